"""Per-election timelines from the debug logs of ``tools/bench/elections.py --trace DIR`` (issue 38,
must-show 5): who timed out first after each leader kill, by how much, and who won.

``elections.py --trace DIR`` keeps each quorum's directory under ``DIR/<quorum>`` with
kraftnode's raft logger at DEBUG (``node<i>/node.log``) and Kafka's ``org.apache.kafka.raft`` at
TRACE (``kafka<i>/server.out``), and writes ``kills.json`` (who was killed, when, in ms since the
epoch). This module reads them back:

* per survivor: its **last successful Fetch answer** from the killed leader (kraftnode: ``fetch
  answer from L: error 0``; Kafka: ``Received inbound message InboundResponse(... FetchResponseData(
  ... errorCode=0 ... source=... (id: L``) -- the fetch timer (``controller.quorum.fetch.timeout.ms``)
  restarts there -- and the moment it **timed out** (its first prospective or candidate state
  after the kill);
* the **winner** (the first survivor to become leader) and whether it was the first or the second
  survivor to time out, and the gap between the two;
* the merged timeline of state changes and Vote/pre-vote traffic, for reading one election.

Run alone on a kept directory: ``.venv/bin/python tools/bench/election_timeline.py DIR/mixed
[--election N]`` prints the table and (with ``--election``) one election's timeline.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: a log line's timestamp: kraftnode's ``2026-12-07 07:52:14,102 ...``, Kafka's ``[2026-12-07 07:52:14,102] ...``
_TS = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]?")
#: what a survivor's first state after the kill is called when its fetch timer ran out
TIMED_OUT = ("prospective", "candidate")


@dataclass(frozen=True)
class Event:
    t_ms: float
    node: str           # "K2": Kafka voter 2, "N1": kraftnode voter 1
    kind: str           # fetch | state | vote-out | vote-answer | vote-served
    text: str
    #: fetch: the source; vote-out/vote-answer: the peer
    peer: int = -1
    #: state: the state's name (prospective, candidate, leader, follower, unattached, voted, resigned)
    state: str = ""


def _ms(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000


#: a Kafka VoteResponseData partition's fields, and a VoteRequestData partition's (the request or,
#: in a served response's line, the request it answers)
_VOTE_ANSWER = re.compile(r"errorCode=(\d+), leaderId=(-?\d+), leaderEpoch=(\d+), voteGranted=(\w+)")
_VOTE_REQUEST = re.compile(r"replicaEpoch=(\d+), replicaId=(\d+).*?preVote=(\w+)")


def _kind(q: re.Match[str]) -> str:
    return "pre-vote" if q.group(3) == "true" else "Vote"


def _kafka_event(t: float, node: str, line: str) -> Event | None:
    if "Received inbound message InboundResponse" in line:
        src = re.search(r"source=\S+ \(id: (\d+)", line)
        peer = int(src.group(1)) if src else -1
        if "data=FetchResponseData(" in line:
            ok = re.search(r"FetchResponseData\(throttleTimeMs=\d+, errorCode=0,.*?PartitionData\(partitionIndex=0, "
                           r"errorCode=0, highWatermark=(-?\d+)", line)
            return Event(t, node, "fetch", f"fetch answer from {peer}, high watermark {ok.group(1)}", peer) if ok else None
        if "data=VoteResponseData(" in line:
            top = re.search(r"VoteResponseData\(errorCode=(\d+)", line)
            p = _VOTE_ANSWER.search(line)
            what = (f"error {top.group(1) if top else '?'}" if p is None else
                    f"error {top.group(1) if top else '?'}/{p.group(1)}, granted {p.group(4)}, epoch {p.group(3)}")
            return Event(t, node, "vote-answer", f"Vote answer from {peer}: {what}", peer)
        return None
    if "Sent outbound request" in line and "data=VoteRequestData(" in line:
        q = _VOTE_REQUEST.search(line)
        dest = re.search(r"destination=\S+ \(id: (\d+)", line)
        if q is None or dest is None:
            return None
        kind = _kind(q)
        return Event(t, node, "vote-out", f"sends {kind} (epoch {q.group(1)}) to {dest.group(1)}", int(dest.group(1)))
    if "Sent response OutboundResponse" in line and "data=VoteResponseData(" in line:
        p = _VOTE_ANSWER.search(line)
        q = _VOTE_REQUEST.search(line)
        if p is None or q is None:
            return None
        kind = _kind(q)
        return Event(t, node, "vote-served", f"answers {kind} of {q.group(2)} (epoch {q.group(1)}): error "
                     f"{p.group(1)}, granted {p.group(4)}, epoch {p.group(3)}", int(q.group(2)))
    m = re.search(r"Completed transition to (\w+?)(?:State)?\(", line)
    if m:
        epoch = re.search(r"epoch=(\d+)", line)
        state = m.group(1).lower()
        return Event(t, node, "state", f"became {state} in epoch {epoch.group(1) if epoch else '?'}", state=state)
    return None


def _kraftnode_event(t: float, node: str, line: str) -> Event | None:
    body = line.split("] ", 1)[1] if "] " in line else line
    m = re.match(r"fetch answer from (\d+): error (\d+)(?:/(\d+))?, high watermark (-?\d+)", body)
    if m:
        if m.group(2) != "0" or (m.group(3) or "0") != "0":
            return None
        return Event(t, node, "fetch", f"fetch answer from {m.group(1)}, high watermark {m.group(4)}", int(m.group(1)))
    m = re.match(r"became (\w+) in epoch (\d+)", body)
    if m:
        return Event(t, node, "state", body.split(";")[0], state=m.group(1))
    m = re.match(r"sending (pre-vote|Vote) to (\d+) \(epoch (\d+)\)", body)
    if m:
        return Event(t, node, "vote-out", f"sends {m.group(1)} (epoch {m.group(3)}) to {m.group(2)}", int(m.group(2)))
    m = re.match(r"(pre-vote|Vote) answered by (\d+): (.*)", body)
    if m:
        return Event(t, node, "vote-answer", f"{m.group(1)} answer from {m.group(2)}: {m.group(3)}", int(m.group(2)))
    m = re.match(r"connected to (\d+) .*for a pre-vote", body)
    if m:
        return Event(t, node, "vote-out", f"connected to {m.group(1)} (ApiVersions done)", int(m.group(1)))
    if body.startswith("timer: "):
        return Event(t, node, "timer", body)
    m = re.match(r"Vote v\d+ from .*?candidate_epoch=(\d+), candidate_id=(\d+).*?pre_vote=(\w+).*?"
                 r"VoteResponse\(error_code=(\d+).*?error_code=(\d+), leader_id=-?\d+, leader_epoch=(\d+), "
                 r"vote_granted=(\w+)", body)
    if m:
        kind = "pre-vote" if m.group(3) == "True" else "Vote"
        return Event(t, node, "vote-served", f"answers {kind} of {m.group(2)} (epoch {m.group(1)}): error "
                     f"{m.group(4)}/{m.group(5)}, granted {m.group(7)}, epoch {m.group(6)}", int(m.group(2)))
    return None


def read_events(root: Path) -> list[Event]:
    """Every event of every voter's log under ``root`` (a quorum's directory), in time order."""
    sources: list[tuple[Path, str, Any]] = []
    for d in sorted(root.glob("kafka*")):
        sources.append((d / "server.out", f"K{d.name[5:]}", _kafka_event))
    for d in sorted((root / "kraftnode").glob("node*")):
        sources.append((d / "node.log", f"N{d.name[4:]}", _kraftnode_event))
    events: list[Event] = []
    for path, node, parse in sources:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            ts = _TS.match(line)
            if ts is None:
                continue
            ev = parse(_ms(ts.group(1)), node, line)
            if ev is not None:
                events.append(ev)
    events.sort(key=lambda e: e.t_ms)
    return events


@dataclass
class Timeline:
    number: int
    killed: int
    killed_at_ms: float
    #: survivor ("K2", "N1") -> ms after the kill of its last successful Fetch answer from the killed leader
    last_fetch: dict[str, float] = field(default_factory=dict)
    #: survivor -> ms after the kill when it timed out (its first prospective or candidate state)
    timed_out: dict[str, float] = field(default_factory=dict)
    winner: str | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def first(self) -> str | None:
        return min(self.timed_out, key=lambda w: self.timed_out[w]) if len(self.timed_out) == 2 else None

    @property
    def gap_ms(self) -> float | None:
        if len(self.timed_out) != 2:
            return None
        a, b = sorted(self.timed_out.values())
        return b - a

    def row(self) -> dict[str, Any]:
        return {"election": self.number, "killed": self.killed, "last_fetch_ms": self.last_fetch,
                "timed_out_ms": self.timed_out, "first": self.first, "gap_ms": self.gap_ms, "winner": self.winner,
                "first_won": None if self.first is None or self.winner is None else self.winner == self.first}


def timelines(events: list[Event], kills: list[tuple[int, float]]) -> list[Timeline]:
    """One timeline per kill (``kills``: (voter id, kill time in ms since the epoch))."""
    out = []
    for k, (victim, t0) in enumerate(kills):
        t1 = kills[k + 1][1] if k + 1 < len(kills) else float("inf")
        tl = Timeline(k + 1, victim, t0)
        survivors = {e.node for e in events if int(e.node[1:]) != victim}
        for e in events:
            if e.t_ms >= t0:
                break
            if e.kind == "fetch" and e.peer == victim and e.node in survivors and e.t_ms > t0 - 10_000:
                tl.last_fetch[e.node] = round(e.t_ms - t0)
        for e in events:
            if not t0 <= e.t_ms < t1 or e.node not in survivors:
                continue
            if e.kind == "state" and e.state in TIMED_OUT:
                tl.timed_out.setdefault(e.node, round(e.t_ms - t0))
            if e.kind == "state" and e.state == "leader" and tl.winner is None:
                tl.winner = e.node
            if tl.winner is None or (e.kind == "state" and e.state == "leader" and e.node == tl.winner):
                if e.kind != "fetch":
                    tl.lines.append(f"{e.t_ms - t0:+7.0f} ms  {e.node:3s} {e.text}")
        out.append(tl)
    return out


def summary(tls: list[Timeline]) -> dict[str, Any]:
    """How the survivor that timed out first fared, by how far ahead it was; who times out first in
    one-of-each elections; how late each kind's timer fired after its last Fetch answer + the timeout."""
    decided = [t for t in tls if t.first is not None and t.winner is not None and t.gap_ms is not None]

    def won(ts: list[Timeline]) -> str:
        return f"{sum(1 for t in ts if t.winner == t.first)} of {len(ts)}"

    one_each = [t for t in decided if {w[0] for w in t.timed_out} == {"K", "N"}]
    return {
        "elections": len(tls),
        "first_won_gap_le_5ms": won([t for t in decided if t.gap_ms is not None and t.gap_ms <= 5]),
        "first_won_gap_gt_5ms": won([t for t in decided if t.gap_ms is not None and t.gap_ms > 5]),
        "one_of_each": len(one_each),
        "one_of_each_kraftnode_first": sum(1 for t in one_each if (t.first or "")[0] == "N"),
        "one_of_each_kraftnode_won": sum(1 for t in one_each if (t.winner or "")[0] == "N"),
        "one_of_each_gap_ms_median": statistics.median(t.gap_ms for t in one_each if t.gap_ms is not None)
        if one_each else None,
    }


def timer_lateness(tls: list[Timeline], fetch_timeout_ms: int = 2000) -> dict[str, list[float]]:
    """Per kind ("K", "N"): timed-out moment - (last Fetch answer + fetch timeout), in ms."""
    out: dict[str, list[float]] = {"K": [], "N": []}
    for t in tls:
        for w, at in t.timed_out.items():
            if w in t.last_fetch:
                out[w[0]].append(at - t.last_fetch[w] - fetch_timeout_ms)
    return out


def describe(tl: Timeline) -> str:
    parts = []
    for w in sorted(tl.timed_out):
        fetch = tl.last_fetch.get(w)
        parts.append(f"{w} last answer {fetch:+.0f} ms, timed out {tl.timed_out[w]:+.0f} ms" if fetch is not None
                     else f"{w} timed out {tl.timed_out[w]:+.0f} ms")
    how = "" if tl.first is None else f"; first {tl.first} by {tl.gap_ms:.0f} ms"
    return f"election {tl.number}: killed {tl.killed}; {'; '.join(parts)}{how}; winner {tl.winner}"


def load(root: Path) -> list[Timeline]:
    kills = [(int(k["killed"]), float(k["at_ms"])) for k in json.loads((root / "kills.json").read_text())]
    return timelines(read_events(root), kills)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("dir", type=Path, help="a quorum's directory kept by elections.py --trace (DIR/mixed, DIR/kafka)")
    ap.add_argument("--election", type=int, default=None, help="print this election's timeline")
    args = ap.parse_args(argv)
    if not (args.dir / "kills.json").exists():
        print(f"election_timeline: {args.dir} holds no kills.json (not a directory elections.py --trace kept)",
              file=sys.stderr)
        return 2
    tls = load(args.dir)
    for tl in tls:
        print(describe(tl))
        if args.election == tl.number:
            print("\n".join("    " + ln for ln in tl.lines))
    print(json.dumps(summary(tls)))
    for kind, xs in timer_lateness(tls).items():
        if xs:
            print(f"{'Kafka' if kind == 'K' else 'kraftnode'}: timed out {statistics.median(xs):.0f} ms (median; "
                  f"{min(xs):.0f}..{max(xs):.0f}) after its last Fetch answer + the 2 s fetch timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
