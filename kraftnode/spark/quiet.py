"""A quiet Spark start for command-line tools (``kraftnode audit``): no start-up noise
before the tool's own lines, and every real error still shown.

Why: a person running ``kraftnode audit`` saw Spark's start-up chatter mixed into the
progress lines (issue 41): the JVM's ``WARNING: Using incubator modules:
jdk.incubator.vector`` (Spark's launcher always adds that module, and the JVM prints the
line itself: no option turns it off), then log4j2's ``Using Spark's default log4j
profile``, ``Setting default log level to "WARN"`` and its hint, and WARN lines such as
``NativeCodeLoader: Unable to load native-hadoop library``. Two measures:

* :func:`log4j2_options`: a log4j2 configuration (a console on stderr that prints ERROR
  and above) given to the driver JVM with ``-Dlog4j2.configurationFile``: with a
  configuration of its own Spark prints neither the default-profile line nor the level
  hint, and WARN lines are dropped
  while ERROR and FATAL lines (and exceptions) are still printed;
* :func:`filtered_stderr`: while the JVM is launched, file descriptor 2 is a pipe that a
  thread copies to the real stderr line by line, dropping only the lines in
  :data:`NOISE` (matched whole). The JVM keeps the pipe as its stderr for its lifetime, so
  anything else it prints later -- a stack trace, an OutOfMemoryError -- still arrives.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["LOG4J2", "NOISE", "filtered_stderr", "is_noise", "log4j2_options"]

#: whole lines the JVM prints on every start that say nothing about the run
NOISE = (
    re.compile(r"WARNING: Using incubator modules: [\w.,]+"),
)

LOG4J2 = """\
# kraftnode audit: Spark prints errors only, to stderr (kraftnode/spark/quiet.py). The root
# level stays WARN, the level Spark gives a PySpark driver's console anyway (at any other level
# it prints 'Setting default log level to "WARN"' and a hint); the console appender drops
# what is below ERROR.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = error
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def is_noise(line: str) -> bool:
    """True for a line of :data:`NOISE` (the whole line, without its end of line)."""
    text = line.rstrip("\r\n")
    return any(p.fullmatch(text) for p in NOISE)


def log4j2_options() -> tuple[list[str], Path | None]:
    """The driver JVM options that load :data:`LOG4J2`, and the file to delete once the
    JVM has started (log4j2 reads it at start only). No options when no temporary file
    can be written: Spark then logs as it does by default."""
    try:
        fd, name = tempfile.mkstemp(prefix="kraftnode-log4j2-", suffix=".properties")
    except OSError:
        return [], None
    with os.fdopen(fd, "w") as f:
        f.write(LOG4J2)
    return [f"-Dlog4j2.configurationFile=file:{name}"], Path(name)


def _copy(read_fd: int, write_fd: int) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as src:
        pending = b""
        while chunk := src.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(ln + b"\n" for ln in lines if not is_noise(ln.decode("utf-8", "replace")))
            if out:
                os.write(write_fd, out)
        if pending and not is_noise(pending.decode("utf-8", "replace")):
            os.write(write_fd, pending)
    os.close(write_fd)


@contextmanager
def filtered_stderr() -> Iterator[None]:
    """Within the block, processes started inherit a stderr that drops :data:`NOISE` lines;
    the process's own stderr is restored after it (what it prints goes straight out)."""
    sys.stderr.flush()
    real = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    threading.Thread(target=_copy, args=(read_fd, real), name="stderr-filter", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)   # ours again; the children keep the pipe
