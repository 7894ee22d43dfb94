"""Raft rules as readable scenarios, in the spirit of etcd raft's ``testdata/`` (datadriven).

Each file in ``testdata/`` is one scenario: a header comment names the rule it checks (a
KIP-595 / KIP-853 / KIP-996 section or the Kafka class and method), then blocks of::

    command arg=value ...
    ----
    expected output (the actions the node emitted, then its state)

separated by blank lines. The interpreter plays every peer of ONE node under test and
drives ``kraftnode.raft.raft_node.RaftNode`` through its public event API only (the
constructor, ``handle_request``, ``handle_response``, ``request_failed``, ``tick``,
``append``, ``take_actions`` and read-only properties), the same API the server and the
simulation use, importing only what ``kraftnode.raft`` exports and the message types; so
the scenarios survive any rebuild of the module's insides.

Output is compared exactly. ``KRAFTNODE_SCENARIO_REWRITE=1`` rewrites the expected
output from what the node does now (etcd's ``--rewrite``); review the diff before
committing it.

Commands (``last=E@O`` is a log position: epoch E, offset O)
  node id= voters=1,2,3 [dynamic] [log=1,1,2] [snapshot=N] [epoch= leader= voted=] [pre-vote] [seed=7]
       [backoff-max=MS]
      build the node at t=0. ``log`` lists one record per entry by its epoch; ``dynamic``
      starts the log with the bootstrap control batch (KRaftVersion 1 + VotersRecord with
      directory ids) instead of static voters; ``snapshot=N`` puts the first N entries
      in a snapshot the log starts after.
  tick +MS | tick deadline        advance the clock and call ``tick``.
  recv vote from= epoch= last=E@O [pre-vote] [cluster=]
  recv fetch from= epoch= offset= last-epoch= [wait=MS]
  recv begin-epoch from= epoch=
  recv end-epoch from= epoch= [preferred=2,3]
  recv add-voter id= | recv remove-voter id=        (from an admin client)
  reply vote from= granted=true|false [epoch=] [leader=]
  reply begin-epoch from= [epoch=]
  reply fetch from= [hw=] [records=2,2] [diverging=E@O] [snapshot=E@O] [error=NAME] [leader= epoch=]
  reply api-versions from= [range=0-1]
  reply fetch-snapshot from= [error=NAME] [size=N] [bytes=K]   a chunk of K bytes of an N-byte snapshot
  fail from=                      the request in flight to that peer was lost.
  append [n=1]                    append n application records.
  voters                          the latest voter set (uncommitted VotersRecords included).
  log                             the log as batches, [base..last eEPOCH].
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import random
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kraftnode.protocol.errors import Errors
from kraftnode.raft import (
    Action,
    AppendCompleted,
    Batch,
    ElectionState,
    HighWatermarkAdvanced,
    KRaftVersionControlRecord,
    MemoryRaftLog,
    OffsetAndEpoch,
    RaftConfig,
    RaftNode,
    SendRequest,
    SendResponse,
    VotersControlRecord,
)
from kraftnode.raft.messages import (
    AddRaftVoterRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    DivergingEpoch,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RemoveRaftVoterRequest,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraftnode.raft.voters import Endpoint, ReplicaKey, VoterNode, VoterSet

TESTDATA = Path(__file__).parent / "testdata"
CLUSTER = "scenario-cluster"
REWRITE = os.environ.get("KRAFTNODE_SCENARIO_REWRITE") == "1"
#: Fields left out of the printed messages: the same in every scenario, or endpoints.
QUIET_FIELDS = {"cluster_id", "leader_endpoints", "node_endpoints", "listeners", "endpoints"}


def dir_id(n: int) -> uuid.UUID:
    return uuid.UUID(int=1000 + n)


def endpoints(n: int) -> tuple[Endpoint, ...]:
    return (Endpoint("CONTROLLER", f"h{n}", 9000 + n),)


# ------------------------------------------------------------------ printing
def fmt(value: object, name: str = "") -> str:
    """A compact, stable text form of actions and messages (defaults are left out)."""
    if name.endswith("error_code") and isinstance(value, int):
        return Errors(value).name
    if isinstance(value, uuid.UUID):
        n = value.int - 1000
        return f"d{n}" if 0 <= n < 1000 else str(value)
    if isinstance(value, ReplicaKey):
        return f"{value.id}/{fmt(value.directory_id)}" if value.directory_id is not None else str(value.id)
    if isinstance(value, VoterSet):
        return "{" + ",".join(fmt(k) for k in value.keys()) + "}"
    if isinstance(value, Batch):
        kinds = ",".join(type(r).__name__.removesuffix("ControlRecord").removesuffix("Record")
                         for r in value.records) if value.is_control else ""
        return f"[{value.base_offset}..{value.last_offset} e{value.epoch}{' ' + kinds if kinds else ''}]"
    if isinstance(value, str | bytes):
        return repr(value)
    if isinstance(value, Sequence):
        return "[" + " ".join(fmt(v) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = []
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name in QUIET_FIELDS:
                continue
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            parts.append(f"{f.name}={fmt(v, f.name)}")
        return f"{type(value).__name__}({' '.join(parts)})"
    return str(value)


# ------------------------------------------------------------------ interpreter
class Scenario:
    """One node under test; the interpreter is every other party."""

    def __init__(self) -> None:
        self.node: RaftNode | None = None
        self.log = MemoryRaftLog()
        self.now = 0
        self.hw = 0
        self.next_request_id = 1
        #: request id -> who sent it (for printing the answer).
        self.senders: dict[int, str] = {}
        #: peer -> (correlation id, request) of the latest request sent to it.
        self.outstanding: dict[int, tuple[int, Request]] = {}
        self.local_id = -1

    @property
    def raft(self) -> RaftNode:
        assert self.node is not None, "the scenario must start with `node`"
        return self.node

    def run(self, command: str, args: dict[str, str]) -> str:
        handler: Callable[[dict[str, str]], list[str]] | None = getattr(self, "cmd_" + command.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {command!r}")
        return "\n".join(handler(args))

    # -- output
    def drain(self) -> list[str]:
        out = []
        for action in self.raft.take_actions():
            out.append(self.describe(action))
        n = self.raft
        out.append(f"state={n.state_name} epoch={n.epoch} leader={n.leader_id} hw={self.hw}")
        return out

    def describe(self, action: Action) -> str:
        if isinstance(action, SendRequest):
            self.outstanding[action.destination] = (action.correlation_id, action.request)
            return f"-> {action.destination} {fmt(action.request)}"
        if isinstance(action, SendResponse):
            return f"<- {self.senders.pop(action.request_id)} {fmt(action.response)}"
        if isinstance(action, HighWatermarkAdvanced):
            self.hw = action.high_watermark
        if isinstance(action, AppendCompleted):
            return f"AppendCompleted(last_offset={action.last_offset} error={Errors(action.error_code).name})"
        return fmt(action)

    # -- setup
    def cmd_node(self, a: dict[str, str]) -> list[str]:
        ids = ints(a["voters"])
        static = VoterSet.of(VoterNode(ReplicaKey(i), endpoints(i)) for i in ids)
        if "dynamic" in a:
            vs = VoterSet.of(VoterNode(ReplicaKey(i, dir_id(i)), endpoints(i), 0, 1) for i in ids)
            self.log.append_as_leader([KRaftVersionControlRecord(1), VotersControlRecord(vs)], 0, is_control=True)
            static = VoterSet()
        entries = ints(a.get("log", ""))
        snapshot_end = int(a.get("snapshot", "0"))
        if snapshot_end:
            self.install_snapshot([Batch(i, i, e, (f"r{i}",)) for i, e in enumerate(entries[:snapshot_end])])
        for i, epoch in enumerate(entries[snapshot_end:], snapshot_end):
            self.log.append_as_leader([f"r{i}"], epoch)
        self.log.flush()
        voted = int(a.get("voted", "-1"))
        election = ElectionState(int(a.get("epoch", "0")), int(a.get("leader", "-1")),
                                 ReplicaKey(voted, dir_id(voted)) if voted >= 0 else None)
        config = RaftConfig(cluster_id=CLUSTER, pre_vote="pre-vote" in a,
                            election_backoff_max_ms=int(a.get("backoff-max", "1000")))
        local = self.local_id = int(a["id"])
        self.node = RaftNode(local, dir_id(local), config, self.log, election, static, random.Random(int(a.get("seed", "7"))), 0,
                             local_endpoints=endpoints(local), snapshots=self.log)
        return self.drain()

    def install_snapshot(self, batches: list[Batch]) -> None:
        """A log that starts with a snapshot of ``batches``, installed through the
        SnapshotStore protocol (as a follower installs a fetched one): the snapshot's
        content is MemoryRaftLog's test format, its pickled batches."""
        snapshot_id = OffsetAndEpoch(batches[-1].epoch, batches[-1].next_offset)
        self.log.begin_snapshot_download(snapshot_id)
        self.log.write_snapshot_chunk(snapshot_id, 0, pickle.dumps(batches))
        self.log.install_snapshot(snapshot_id)

    # -- time
    def cmd_tick(self, a: dict[str, str]) -> list[str]:
        (arg,) = a
        if arg == "deadline":
            deadline = self.raft.next_deadline_ms()
            assert deadline is not None, "no deadline"
            self.now = max(self.now, deadline)
        else:
            self.now += int(arg.removeprefix("+"))
        self.raft.tick(self.now)
        return [f"t={self.now}", *self.drain()]

    # -- inbound requests
    def request(self, sender: str, request: Request) -> list[str]:
        rid = self.next_request_id
        self.next_request_id += 1
        self.senders[rid] = sender
        self.raft.handle_request(rid, request, self.now)
        return self.drain()

    def cmd_recv(self, a: dict[str, str]) -> list[str]:
        kind = next(iter(a))
        sender = a.get("from", "admin")
        peer = int(a.get("from", "-1"))
        epoch = int(a.get("epoch", "0"))
        req: Request
        if kind == "vote":
            last_epoch, last_offset = position(a["last"])
            req = VoteRequest(a.get("cluster", CLUSTER), self.raft_id(), epoch, peer, dir_id(peer), dir_id(self.raft_id()),
                              last_epoch, last_offset, pre_vote="pre-vote" in a)
        elif kind == "fetch":
            req = FetchRequest(CLUSTER, peer, dir_id(peer), int(a.get("wait", "0")), epoch, int(a["offset"]),
                               int(a["last-epoch"]))
        elif kind == "begin-epoch":
            req = BeginQuorumEpochRequest(CLUSTER, self.raft_id(), dir_id(self.raft_id()), peer, epoch, endpoints(peer))
        elif kind == "end-epoch":
            preferred = tuple(ReplicaKey(i, dir_id(i)) for i in ints(a.get("preferred", "")))
            req = EndQuorumEpochRequest(CLUSTER, peer, epoch, preferred, endpoints(peer))
        elif kind == "add-voter":
            i = int(a["id"])
            req = AddRaftVoterRequest(CLUSTER, 30_000, i, dir_id(i), endpoints(i))
        elif kind == "remove-voter":
            i = int(a["id"])
            req = RemoveRaftVoterRequest(CLUSTER, i, dir_id(i))
        else:
            raise ValueError(f"unknown request {kind!r}")
        return self.request(sender, req)

    def raft_id(self) -> int:
        return self.local_id

    # -- answers to the node's requests
    def cmd_reply(self, a: dict[str, str]) -> list[str]:
        kind = next(iter(a))
        peer = int(a["from"])
        correlation, sent = self.outstanding.pop(peer)
        epoch = int(a.get("epoch", str(self.raft.epoch)))
        leader = int(a.get("leader", "-1"))
        resp: Response
        if kind == "vote":
            assert isinstance(sent, VoteRequest), sent
            resp = VoteResponse(0, 0, leader, epoch, a["granted"] == "true")
        elif kind == "begin-epoch":
            assert isinstance(sent, BeginQuorumEpochRequest), sent
            resp = BeginQuorumEpochResponse(0, 0, self.raft.leader_id, epoch)
        elif kind == "fetch":
            assert isinstance(sent, FetchRequest), sent
            leader = int(a.get("leader", str(self.raft.leader_id)))
            batches = []
            offset = sent.fetch_offset
            for i, e in enumerate(ints(a.get("records", ""))):
                batches.append(Batch(offset, offset, e, (f"f{i}",)))
                offset += 1
            diverging = DivergingEpoch(*position(a["diverging"])) if "diverging" in a else None
            snapshot = None
            if "snapshot" in a:
                se, so = position(a["snapshot"])
                snapshot = SnapshotId(so, se)
            resp = FetchResponse(0, Errors[a.get("error", "NONE")].value, int(a.get("hw", "-1")),
                                 CurrentLeader(leader, epoch), 0, diverging, snapshot, tuple(batches))
        elif kind == "fetch-snapshot":
            assert isinstance(sent, FetchSnapshotRequest), sent
            leader = int(a.get("leader", str(self.raft.leader_id)))
            resp = FetchSnapshotResponse(0, Errors[a.get("error", "NONE")].value, sent.snapshot_id,
                                         CurrentLeader(leader, epoch), int(a.get("size", "-1")), sent.position,
                                         b"x" * int(a.get("bytes", "0")))
        elif kind == "api-versions":
            lo, hi = ints(a.get("range", "0-1").replace("-", ","))
            resp = ApiVersionsResponse(0, (lo, hi))
        else:
            raise ValueError(f"unknown reply {kind!r}")
        self.raft.handle_response(peer, correlation, resp, self.now)
        return self.drain()

    def cmd_fail(self, a: dict[str, str]) -> list[str]:
        peer = int(a["from"])
        correlation, _ = self.outstanding.pop(peer)
        self.raft.request_failed(peer, correlation, self.now)
        return self.drain()

    # -- application
    def cmd_append(self, a: dict[str, str]) -> list[str]:
        n = int(a.get("n", "1"))
        self.raft.append([f"a{i}" for i in range(n)], self.now)
        return self.drain()

    def cmd_voters(self, a: dict[str, str]) -> list[str]:
        return [f"voters={fmt(self.raft.voters)} is_voter={self.raft.is_voter}"]

    def cmd_log(self, a: dict[str, str]) -> list[str]:
        snap = self.log.latest_snapshot_id()
        head = f"start={self.log.start_offset} end={self.log.end_offset}"
        if snap is not None:
            head += f" snapshot={snap.epoch}@{snap.offset}"
        return [head, *(fmt(b) for b in self.log.read(self.log.start_offset, 1 << 30))]



def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def position(text: str) -> tuple[int, int]:
    epoch, offset = text.split("@")
    return int(epoch), int(offset)


# ------------------------------------------------------------------ datadriven files
def parse(text: str) -> list[tuple[list[str], str, list[str]]]:
    """Blocks of (leading comment/blank lines, command line, expected output lines)."""
    blocks = []
    lines = text.splitlines()
    i = 0
    lead: list[str] = []
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            lead.append(line)
            i += 1
            continue
        command = line
        assert lines[i + 1] == "----", f"line {i + 2}: expected ---- after {command!r}"
        i += 2
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        blocks.append((lead, command, expected))
        lead = []
    return blocks


def run_file(path: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """Run a scenario; returns the rewritten text and the mismatches (command, want, got)."""
    scenario = Scenario()
    out: list[str] = []
    mismatches = []
    for lead, command, expected in parse(path.read_text()):
        words = command.split()
        args: dict[str, str] = {}
        for w in words[1:]:
            key, _, value = w.partition("=")
            args[key] = value
        got = scenario.run(words[0], args)
        want = "\n".join(expected)
        if got != want:
            mismatches.append((command, want, got))
        out.extend(lead)
        out.extend([command, "----", got])
    return "\n".join(out) + "\n", mismatches


FILES = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scenarios() -> None:
    assert len(FILES) >= 20


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario(path: Path) -> None:
    text, mismatches = run_file(path)
    if REWRITE:
        path.write_text(text)
        return
    report = "\n\n".join(f"{cmd}\n--- want\n{want}\n--- got\n{got}" for cmd, want, got in mismatches)
    assert not mismatches, f"{path.name}:\n{report}"
