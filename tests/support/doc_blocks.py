"""Executable documentation: the blocks a person is meant to type in README.md, docs/*.md and
the step comments of config/**, extracted, given the ports and directories of this run, and
run in order at a person's pace (tests/docs/).

What counts as a block:
* Markdown: every fenced block. Its info string says what it is: ``sh`` (commands) and
  ``python`` are run; ``text``, ``properties``, ``yaml``, ``java``, ... are not commands. A
  fence without an info string is refused by the tests (say ``text`` for output or a layout,
  ``sh`` for commands), so no command block can slip by unclassified.
* A marker on the line before the fence (an HTML comment, invisible when rendered) changes
  how a runnable block is treated:
    ``<!-- illustrative: WHY -->``  not run, for the reason given (the tests list them);
    ``<!-- run-by: tests/PATH.py -->``  run by that test, not by the block runner;
    ``<!-- long-running: REGEX -->``  started, passes once REGEX appears in its output, then
    stopped as Ctrl-C stops it.
* config/**: the step comments, lines ``#   command`` (three or more spaces after ``#``),
  with ``\\`` continuations; each comment paragraph of them is one ``sh`` block.

How a block runs (:class:`Session`): one statement at a time (a ``for`` loop, a here-document
or a continued line is one statement: lines are joined until ``bash -n`` accepts them), in a
work directory holding a copy of ``config/`` whose ports and directories are the session's,
with ``.venv/bin`` (``kraftnode``, ``python``) and Kafka's ``bin/`` first on ``PATH``; ``NAME=...``
statements set a variable the later statements see. ``kraftnode start``, ``tools/dev.sh`` and
``kafka-server-start.sh`` are long-running: started in the background, ready on their "started" / "running" line, and
stopped at the end of the session with SIGINT (Ctrl-C), which must end in a clean shutdown.
Everything else must exit 0 within its timeout. Between statements the session pauses at
least the fetch timeout (controller.quorum.fetch.timeout.ms, 2 s): a person's pace.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNNABLE = {"sh": "sh", "bash": "sh", "console": "sh", "shell": "sh", "python": "python", "py": "python"}
MARKERS = ("illustrative", "run-by", "long-running")
FETCH_TIMEOUT_S = 2.0  # controller.quorum.fetch.timeout.ms, Kafka's default and the examples'

#: the ports the docs and config/ use; each session maps them to free ones
DOC_PORTS = (9092, 9093, 9094, 9095, 9193, 9194, 9195, 9404, 9405, 9406, 9504, 9505, 9506)
#: directories the docs and config/ use; each session moves them under its work directory
DOC_DIRS = ("/tmp/kraftnode-", "/var/lib/kraftnode", "/etc/kraftnode")


@dataclass(frozen=True)
class Block:
    source: str  # repo-relative path
    line: int  # 1-based: the fence, or the first step line of a comment paragraph
    info: str  # the fence's info string ("" if none; "sh" for config steps)
    text: str
    marker: str | None = None
    marker_arg: str = ""

    @property
    def kind(self) -> str | None:
        """"sh" or "python" for a runnable block, None for everything else."""
        return RUNNABLE.get(self.info.split()[0] if self.info else "")

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def first_line(self) -> str:
        return next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")


_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^`\s]*)[^`]*$")
_MARKER = re.compile(r"^\s*<!--\s*(" + "|".join(MARKERS) + r")\s*:\s*(.*?)\s*-->\s*$")


def markdown_blocks(path: Path) -> list[Block]:
    rel = str(path.relative_to(REPO))
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3)
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{re.escape(fence[0] * len(fence))}\s*$", lines[j]):
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mk = _MARKER.match(prev)
        out.append(Block(rel, i + 1, info, "\n".join(body) + "\n",
                         mk.group(1) if mk else None, mk.group(2) if mk else ""))
        i = j + 1
    return out


def config_blocks(path: Path) -> list[Block]:
    """The step comments of a config file: paragraphs of ``#   command`` lines."""
    rel = str(path.relative_to(REPO))
    out: list[Block] = []
    current: list[str] = []
    start = 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^#( {3,})(\S.*)$", line)
        continued = bool(current) and current[-1].rstrip().endswith("\\")
        if m and (len(m.group(1)) == 3 or continued):
            if not current:
                start = n
            current.append(m.group(2) if not continued else "    " + m.group(2))
            continue
        if current:
            out.append(Block(rel, start, "sh", "\n".join(current) + "\n"))
            current = []
    if current:
        out.append(Block(rel, start, "sh", "\n".join(current) + "\n"))
    return out


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def config_files() -> list[Path]:
    return sorted((REPO / "config").rglob("*.properties"))


def all_blocks() -> list[Block]:
    blocks: list[Block] = []
    for p in documents():
        blocks += markdown_blocks(p)
    for p in config_files():
        blocks += config_blocks(p)
    return blocks


def statements(text: str) -> list[str]:
    """The block's statements as bash parses them: comment-only and blank lines dropped,
    lines joined until they form a complete statement (``bash -n``)."""
    out: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        candidate = "\n".join(pending)
        if candidate.rstrip().endswith("\\"):
            continue
        if subprocess.run(["bash", "-n", "-c", candidate], capture_output=True).returncode == 0:
            out.append(candidate)
            pending = []
    if pending:
        raise ValueError(f"incomplete shell statement: {' '.join(pending)!r}")
    return out


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@dataclass
class Background:
    """A long-running command: started, waited for, and stopped as Ctrl-C stops it."""

    statement: str
    proc: subprocess.Popen[bytes]
    output: Path
    ready: str  # regex its output shows once it serves
    clean: str | None  # regex its output shows after Ctrl-C (None: any exit will do)

    def text(self) -> str:
        return self.output.read_text(errors="replace")


@dataclass
class Session:
    """One run of documented steps: its work directory, ports, variables and processes."""

    work: Path
    pause_s: float = FETCH_TIMEOUT_S
    kafka_home: Path | None = None
    ports: dict[int, int] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    #: placeholder word -> what the runner substitutes (PORT, HOST:PORT, DIRECTORY_ID, ...)
    placeholders: dict[str, str] = field(default_factory=dict)
    background: list[Background] = field(default_factory=list)
    #: every statement run, as run (substituted), with its output: for failure messages
    transcript: list[str] = field(default_factory=list)
    _last_step: float = 0.0

    def __post_init__(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.ports = dict(zip(DOC_PORTS, free_ports(len(DOC_PORTS)), strict=True))
        # the checkout as a person has it: config/ (this session's copy), the rest linked
        shutil.copytree(REPO / "config", self.work / "config")
        for p in (self.work / "config").rglob("*.properties"):
            p.write_text(self.substitute(p.read_text()))
        for name in ("tools", "tests", ".venv", "pyproject.toml"):
            if (REPO / name).exists():
                (self.work / name).symlink_to(REPO / name)

    # ---------------------------------------------------------------- substitution
    def substitute(self, text: str) -> str:
        """The text with this session's ports and directories, then its placeholders filled
        (their values are final: a dev cluster's /tmp/kraftnode-dev-... stays as it is)."""
        text = re.sub(r"\b(127\.0\.0\.1|localhost):(\d{4,5})\b",
                      lambda m: f"{m.group(1)}:{self.ports.get(int(m.group(2)), int(m.group(2)))}", text)
        for d in DOC_DIRS:  # (not once more in a path already moved)
            text = re.sub(rf"(?<!/root){re.escape(d)}", f"{self.work}/root{d}", text)
        for word, value in sorted(self.placeholders.items(), key=lambda kv: -len(kv[0])):
            text = re.sub(rf"(?<![\w$]){re.escape(word)}(?!\w)", lambda _m, v=value: v, text)
        return text

    def env(self) -> dict[str, str]:
        path = [str(REPO / ".venv" / "bin")]
        if self.kafka_home is not None:
            path.append(str(self.kafka_home / "bin"))
        env = {**os.environ, "PATH": os.pathsep.join([*path, os.environ.get("PATH", "")]),
               "PYTHONUNBUFFERED": "1", "LOG_DIR": str(self.work / "kafka-logs"),
               "KAFKA_HEAP_OPTS": "-Xmx256M", "KAFKA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
               **self.vars}
        env.pop("VIRTUAL_ENV", None)
        return env

    # ---------------------------------------------------------------- running
    def pace(self) -> None:
        """A person's pace: at least the fetch timeout since the previous step."""
        wait = self._last_step + self.pause_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._last_step = time.monotonic()

    def run_block(self, block: Block, timeout: float = 240) -> None:
        if block.kind == "python":
            self.run_python(block, timeout)
            return
        for st in statements(block.text):
            self.run_statement(st, block.where, timeout)

    def run_statement(self, statement: str, where: str, timeout: float = 240) -> str:
        """Run one statement; its output (stdout and stderr). AssertionError naming the block
        and the statement when it fails."""
        self.pace()
        st = self.substitute(statement)
        first = st.split()[0]
        if re.match(r"^(\S*/)?kraftnode\s+start\s", st):
            return self._start(st, where, ready=r"node \d+ started: cluster ", clean=r"node \d+ shut down cleanly")
        if re.match(r"^(\S*/)?kafka-server-start\.sh\s", st):   # a genuine broker (docs/brokers.md)
            return self._start(st, where, ready=r"Kafka Server started", clean=None)
        if re.match(r"^(\S*/)?(tools/dev\.sh|kraftnode dev-cluster)\b", st):
            return self._start(st, where, ready=r"running; Ctrl-C stops the cluster",
                               clean=r"dev cluster stopped", group=True)
        assign = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", st, re.S)
        script = f'{st}\nprintf "\\n@@VALUE@@%s" "${{{assign.group(1)}}}"' if assign else st
        r = subprocess.run(["bash", "-c", script], cwd=self.work, env=self.env(), capture_output=True,
                           encoding="utf-8", errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)
        out = r.stdout + r.stderr
        self.transcript.append(f"$ {st}\n{out}")
        assert r.returncode == 0, (f"{where}: `{st}` (as typed: `{statement}`) exited {r.returncode}:\n"
                                   f"{out[-3000:]}")
        if assign:
            value = r.stdout.rsplit("@@VALUE@@", 1)[1]
            self.vars[assign.group(1)] = value
            out = r.stdout.rsplit("\n@@VALUE@@", 1)[0] + r.stderr
        del first
        return out

    def run_python(self, block: Block, timeout: float = 240) -> str:
        """A Python block, as a script (``python -``); a long-running one in the background."""
        self.pace()
        code = self.substitute(block.text)
        if block.marker == "long-running":
            return self._start(f"python - <<'EOF'\n{code}EOF", block.where, ready=block.marker_arg, clean=None,
                               group=True, stdin=code)
        r = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-"], input=code, cwd=self.work,
                           env=self.env(), capture_output=True, encoding="utf-8", errors="replace",
                           timeout=timeout)
        out = r.stdout + r.stderr
        self.transcript.append(f">>> {block.where}\n{out}")
        assert r.returncode == 0, f"{block.where}: the Python block exited {r.returncode}:\n{out[-3000:]}"
        return out

    def _start(self, st: str, where: str, ready: str, clean: str | None, group: bool = False,
               stdin: str | None = None, timeout: float = 120) -> str:
        log = self.work / f"background-{len(self.background) + 1}.out"
        argv = [str(REPO / ".venv" / "bin" / "python"), "-"] if stdin is not None else ["bash", "-c", f"exec {st}"]
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, cwd=self.work, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    start_new_session=group)
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin.encode())
            proc.stdin.close()
        bg = Background(st, proc, log, ready, clean)
        self.background.append(bg)
        deadline = time.monotonic() + timeout
        while not re.search(ready, bg.text()):
            assert proc.poll() is None, f"{where}: `{st}` exited {proc.returncode}:\n{bg.text()[-3000:]}"
            assert time.monotonic() < deadline, f"{where}: `{st}` not ready ({ready!r}) in {timeout} s:\n" \
                                                f"{bg.text()[-3000:]}"
            time.sleep(0.1)
        self.transcript.append(f"$ {st} &\n{bg.text()}")
        return bg.text()

    def stop(self, bg: Background, timeout: float = 60) -> str:
        """Ctrl-C: SIGINT to it (to its process group when it has one of its own, as a
        terminal sends it); its output after, which must show its clean stop."""
        if bg.proc.poll() is None:
            try:
                if os.getpgid(bg.proc.pid) == bg.proc.pid:
                    os.killpg(bg.proc.pid, signal.SIGINT)
                else:
                    bg.proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
            try:
                bg.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill(bg)
                raise AssertionError(f"`{bg.statement}` did not stop within {timeout} s of Ctrl-C:\n"
                                     f"{bg.text()[-3000:]}") from None
        if bg.clean is not None:
            assert re.search(bg.clean, bg.text()), \
                f"`{bg.statement}` stopped without {bg.clean!r}:\n{bg.text()[-3000:]}"
        return bg.text()

    def _kill(self, bg: Background) -> None:
        if bg.proc.poll() is None:
            try:
                if os.getpgid(bg.proc.pid) == bg.proc.pid:
                    os.killpg(bg.proc.pid, signal.SIGKILL)
                else:
                    bg.proc.kill()
            except ProcessLookupError:
                pass
            bg.proc.wait()

    def close(self, check: bool = True) -> None:
        """Stop every background command, the newest first; check their clean stop."""
        errors = []
        for bg in reversed(self.background):
            try:
                if check:
                    self.stop(bg)
            except AssertionError as e:
                errors.append(str(e))
            finally:
                self._kill(bg)
        self.background.clear()
        if errors:
            raise AssertionError("\n".join(errors))


def session(work: Path, **kw: object) -> Iterator[Session]:
    """A Session closed at the end (checking clean stops unless the body failed)."""
    s = Session(work, **kw)  # type: ignore[arg-type]
    try:
        yield s
    except BaseException:
        s.close(check=False)
        raise
    s.close()


Selector = Callable[[Block], bool]
