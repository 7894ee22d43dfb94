"""Send the same mutated request frames to a genuine Kafka controller and to a kraftnode node,
and compare what each does with them.

Kafka's own request parsing is the reference for how lenient and how strict kraftnode's is
(docs/protocol.md, issue 43): for every frame both servers must *agree on the outcome* --
``answered`` (with the answer's top-level error code, where the answer has one), ``closed``
(the connection closed without an answer), or ``silent`` (neither within the timeout, e.g. a
size prefix that promises more bytes than were sent). Each frame goes on a fresh connection.

Seeds are valid requests of the APIs both serve on a controller listener without changing
any state (ApiVersions, DescribeCluster, DescribeQuorum, DescribeConfigs, DescribeAcls), or,
with ``--listener broker`` against a Kafka broker, the client and group APIs (Metadata,
ListGroups, DescribeGroups, FindCoordinator, OffsetFetch);
mutations flip bytes, overwrite the API key or version, cut the frame, add bytes after it,
or make the size prefix lie. Seeded: a difference replays with the same ``--seed``. Usage::

    python -m tools.fuzz.differential --kafka HOST:PORT --kraftnode HOST:PORT \\
        [--listener controller|broker] [--frames N] [--seed S] [--timeout T] [--workers W]

Exit code 1 when an outcome differs. Error codes that differ while both answer are listed
apart (``codes``): they may follow from the two servers' different state (a quorum of one
Kafka controller against a kraftnode quorum), not from parsing; those kraftnode differs in on
purpose (it also answers as a broker) are counted apart again (``by_design``).
"""

from __future__ import annotations

import argparse
import random
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from kraftnode.protocol import generated as w
from kraftnode.protocol.framing import encode_request
from kraftnode.protocol.registry import (
    API_VERSIONS,
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_QUORUM,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    FIND_COORDINATOR,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SERVED,
    SYNC_GROUP,
)
from recordbatch.wire import DecodeError

_I32 = struct.Struct(">i")


def seeds(listener: str = "controller") -> list[bytes]:
    """Valid request frames (without their size prefix) of read-only APIs that both serve on
    a ``controller`` listener, or on a ``broker`` one (the group and client APIs)."""
    out: list[tuple[int, int, Any]] = []
    for v in range(0, 4):
        out.append((API_VERSIONS, v, w.ApiVersionsRequest(client_software_name="diff",
                                                          client_software_version="1")))
    if listener == "broker":
        M = w.MetadataRequest
        out += [(METADATA, 12, M(topics=None, allow_auto_topic_creation=False)),
                (METADATA, 1, M(topics=[M.MetadataRequestTopic(name="diff-t")])),
                (LIST_GROUPS, 4, w.ListGroupsRequest(states_filter=["Empty"])),
                (LIST_GROUPS, 0, w.ListGroupsRequest()),
                (DESCRIBE_GROUPS, 5, w.DescribeGroupsRequest(groups=["diff-g"])),
                (FIND_COORDINATOR, 4, w.FindCoordinatorRequest(key_type=0, coordinator_keys=["diff-g"])),
                (OFFSET_FETCH, 7, w.OffsetFetchRequest(group_id="diff-g", topics=None))]
        return [encode_request(SERVED[api], v, 1000 + i, "diff", body)[4:]
                for i, (api, v, body) in enumerate(out)]
    out.append((DESCRIBE_CLUSTER, 0, w.DescribeClusterRequest()))
    out.append((DESCRIBE_CLUSTER, 1, w.DescribeClusterRequest(endpoint_type=2)))
    Q = w.DescribeQuorumRequest
    for v in (0, 1, 2):
        out.append((DESCRIBE_QUORUM, v, Q(topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[
            Q.PartitionData(partition_index=0)])])))
    C = w.DescribeConfigsRequest
    for v in (1, 4):
        out.append((DESCRIBE_CONFIGS, v, C(resources=[C.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=None)])))
    A = w.DescribeAclsRequest
    out.append((DESCRIBE_ACLS, 3, A(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                    principal_filter=None, host_filter=None, operation=1, permission_type=1)))
    return [encode_request(SERVED[api], v, 1000 + i, "diff", body)[4:]
            for i, (api, v, body) in enumerate(out)]


@dataclass
class Mutation:
    """A frame to send: ``body`` after the size prefix, and the size the prefix claims."""

    kind: str
    body: bytes
    size: int

    def wire(self) -> bytes:
        return _I32.pack(self.size) + self.body


#: API keys a mutation writes: ones both serve on the listener, or neither (kraftnode serves a
#: broker's APIs on its controller listener too, and not every broker API -- DeleteRecords,
#: transactions --: such keys would differ by design)
_KEYS = {"controller": [-1, 18, 29, 32, 55, 60, 21, 90, 1000],
         "broker": [-1, 3, 9, 10, 15, 16, 18, 90, 1000]}


def mutate(rng: random.Random, frame: bytes, listener: str = "controller") -> Mutation:
    b = bytearray(frame)
    kind = rng.choice(["flip", "flip", "flip", "version", "api", "cut", "extend", "lie"])
    if kind == "flip":
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == "version":
        b[2:4] = struct.pack(">h", rng.choice([-1, 0, 1, 2, 3, 4, 5, 9, 127, 32767]))
    elif kind == "api":
        b[0:2] = struct.pack(">h", rng.choice(_KEYS[listener]))
    elif kind == "cut":
        del b[rng.randint(0, len(b) - 1):]
    elif kind == "extend":
        b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    size = len(b)
    if kind == "lie":
        size = len(b) + rng.randint(1, 64)
    return Mutation(kind, bytes(b), size)


def outcome(addr: tuple[str, int], m: Mutation, timeout: float) -> str:
    """``answered <code>`` / ``closed`` / ``silent`` for one frame on a fresh connection."""
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(m.wire())
        s.settimeout(timeout)
        buf = b""
        try:
            while len(buf) < 4 or len(buf) < 4 + _I32.unpack_from(buf)[0]:
                chunk = s.recv(65536)
                if not chunk:
                    return "closed" if not buf else "closed mid-answer"
                buf += chunk
        except TimeoutError:
            return "silent" if not buf else "partial answer"
        except ConnectionResetError:
            return "closed"
    return "answered " + _error_code(m.body, buf[4:4 + _I32.unpack_from(buf)[0]])


def _error_code(request: bytes, answer: bytes) -> str:
    """The answer's top-level error code, decoded as the API and version the request named
    (an ApiVersions answer to a version not served is a v0 body); ``-`` when it has none."""
    api, version = struct.unpack_from(">hh", request)
    spec = SERVED.get(api)
    if spec is None:
        return "?"
    if api == API_VERSIONS:
        return str(struct.unpack_from(">h", answer, 4)[0]) if len(answer) >= 6 else "?"
    try:
        head = 4 + (1 if spec.response_header_version(version) >= 1 else 0)
        body, _ = spec.response.decode_from(memoryview(answer), head, version)
    except (DecodeError, Exception):  # noqa: BLE001 - a version we cannot read: say so
        return "?"
    code = getattr(body, "error_code", None)
    return "-" if code is None else str(code)


@dataclass
class Report:
    frames: int = 0
    #: (index, mutation kind, frame hex, kafka's outcome, kraftnode's)
    differences: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    codes: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    #: differences kraftnode makes on purpose (docs/interop.md)
    by_design: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)


#: APIs a kraftnode node serves to the clients of its metadata log (as a broker would) that a
#: Kafka controller listener does not: Kafka closes the connection, kraftnode answers
BROKER_APIS = {LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT,
               LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, INIT_PRODUCER_ID, DELETE_GROUPS,
               OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE}


def _by_design(request: bytes, theirs: str, mine: str, listener: str = "controller") -> bool:
    """What kraftnode answers differently on purpose (docs/protocol.md, "Differential fuzzing"):

    - a kraftnode node is a broker to clients as well as a controller: DescribeCluster for the
      brokers (endpoint type 1, v0's only one) is answered, where a Kafka controller says
      INVALID_REQUEST; and a broker API a mutation lands on is answered where a Kafka controller
      listener closes the connection;
    - DescribeUserScramCredentials: a Kafka 4.x controller advertises it but its ControllerApis
      has no handler, and building the error answer for ``Users`` null throws a
      NullPointerException, so it never answers; kraftnode answers it as a broker does."""
    api = int.from_bytes(request[:2], "big", signed=True) if len(request) >= 2 else -1
    if api == DESCRIBE_CLUSTER and (theirs, mine) == ("answered 42", "answered 0"):
        return True
    if listener == "controller" and api in BROKER_APIS and theirs == "closed" and mine.startswith("answered"):
        return True
    return api == DESCRIBE_USER_SCRAM_CREDENTIALS and theirs == "silent" and mine.startswith("answered")


def run(kafka: tuple[str, int], ours: tuple[str, int], frames: int = 200, seed: int = 0,
        timeout: float = 2.0, listener: str = "controller", workers: int = 1) -> Report:
    """``listener``: what ``kafka`` is, a Kafka ``controller`` listener or a ``broker`` one;
    ``workers``: frames in flight at once (each on its own connection; the frames, and so the
    report, are the same for any number)."""
    rng = random.Random(seed)
    pool = seeds(listener)
    mutations = [mutate(rng, rng.choice(pool), listener) for _ in range(frames)]

    def both(m: Mutation) -> tuple[str, str]:
        return outcome(kafka, m, timeout), outcome(ours, m, timeout)

    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as ex:
            results = list(ex.map(both, mutations))
    else:
        results = [both(m) for m in mutations]
    report = Report()
    for i, (m, (theirs, mine)) in enumerate(zip(mutations, results, strict=True)):
        report.frames += 1
        report.outcomes[theirs.split(" ")[0]] = report.outcomes.get(theirs.split(" ")[0], 0) + 1
        row = (i, m.kind, m.wire().hex(), theirs, mine)
        if theirs == mine:
            continue
        if _by_design(m.body, theirs, mine, listener):
            report.by_design.append(row)
        elif theirs.split(" ")[0] != mine.split(" ")[0]:
            report.differences.append(row)
        else:
            report.codes.append(row)
    return report


def _addr(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kafka", required=True, help="a Kafka controller (or broker) listener, HOST:PORT")
    ap.add_argument("--listener", choices=["controller", "broker"], default="controller",
                    help="what --kafka is: the APIs sent are those both serve there")
    ap.add_argument("--kraftnode", required=True, help="a kraftnode listener, HOST:PORT")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds before an outcome is 'silent'")
    ap.add_argument("--workers", type=int, default=1, help="frames in flight at once (same report for any number)")
    a = ap.parse_args(argv)
    t = time.monotonic()
    try:
        r = run(_addr(a.kafka), _addr(a.kraftnode), a.frames, a.seed, a.timeout, a.listener, a.workers)
    except OSError as e:
        print(f"cannot reach a server: {e}", file=sys.stderr)
        return 2
    for i, kind, frame, theirs, mine in r.differences:
        print(f"DIFFERENT #{i} ({kind}) {frame}: Kafka {theirs}, kraftnode {mine}")
    for i, kind, frame, theirs, mine in r.codes:
        print(f"codes #{i} ({kind}) {frame}: Kafka {theirs}, kraftnode {mine}")
    print(f"{r.frames} frames (seed {a.seed}) in {time.monotonic() - t:.1f}s: Kafka's outcomes {r.outcomes}; "
          f"{len(r.differences)} different outcomes, {len(r.codes)} different error codes "
          f"({len(r.by_design)} more by design)")
    return 1 if r.differences else 0


if __name__ == "__main__":
    sys.exit(main())
