"""Elections as Kafka draws them (issue 26, must-show 5): who wins, and how many epochs an
election costs, in a mixed quorum of genuine Kafka 3.9 controllers and kraftnode voters against
an all-Kafka quorum measured the same way.

For each quorum in turn (three voters, ``process.roles=controller``, no brokers; Kafka's default
timeouts on both sides, kraftnode with its defaults, pre-vote on) and N rounds:

1. wait until the quorum is **stable**: the leader's DescribeQuorum lists every voter with its
   log end at the high watermark and a fetch within the last second -- every survivor of the next
   kill is an eligible candidate (up-to-date log, a running fetch timer);
2. after a random pause (0-1 s: the kill lands anywhere in the followers' fetch cycle), kill -9
   the leader and poll the survivors until one of them answers DescribeQuorum as leader of a
   higher epoch: the **winner**, its implementation, the **epochs consumed** (new epoch - old;
   more than one is a split vote: an epoch that elected nobody) and the time kill -> leader;
3. start the killed voter again and wait for stability; an epoch that moves while it rejoins is
   counted as a **rejoin election** (not one of the N).

Checks printed at the end:

* **wins**: each election's chance of a kraftnode winner is the kraftnode share of its eligible
  voters (the two survivors); the number of kraftnode wins must lie in the two-sided 99% interval
  of that Poisson-binomial distribution (computed exactly). Also shown: the plain binomial
  (p = 1/2) over the elections whose survivors were one of each kind.
* **splits**: split votes in the mixed quorum are no more frequent than in the all-Kafka quorum:
  fewer or equal, or a one-sided Fisher exact test does not find the mixed rate higher at 1%.

Usage::

    .venv/bin/python tools/bench/elections.py [--kills N] [--kafka-voters 1|2] [--only mixed|kafka] [--kafka 3.9|4.4]
        [--json] [--trace DIR]

``--trace DIR`` keeps each quorum's directory under ``DIR/<quorum>`` with debug logs on both sides
(kraftnode's ``kraftnode.raft`` at DEBUG, Kafka's ``org.apache.kafka.raft`` at TRACE) and the kill
times (``kills.json``), and prints per election who timed out first after the kill, by how much,
and who won (``tools/bench/election_timeline.py``, which also prints one election's timeline).
The debug logs cost each node a little time: a traced run's figures are for reading elections, not
for the tables.

With ``--kafka 4.4`` the Kafka voters are genuine 4.4 controllers, which always pre-vote (Vote v2),
and kraftnode's voters, formatted at 4.4-IV2, pre-vote with them (issue 38, must-show 5).

The 50-kill run is a tool run (docs/bench.md records one), not in CI: it takes some 20 minutes.
CI runs it with 3 kills per quorum (tests/tools/test_bench_elections.py) to keep it working.
Needs genuine Kafka (``KAFKA_HOME`` or ``../shared/kafka-3.9``) and Java.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kraftnode.protocol import generated as w  # noqa: E402
from kraftnode.protocol.registry import DESCRIBE_QUORUM  # noqa: E402
from tests.support.cluster import CLUSTER_ID, Cluster, free_ports  # noqa: E402
from tests.support.kafka import KafkaHome, find_kafka_home  # noqa: E402
from tests.support.kafka_server import KafkaServer  # noqa: E402
from tests.support.node import call  # noqa: E402
from tools.bench import election_timeline  # noqa: E402

CONTROLLER_HEAP = "-Xmx256m -Xms128m"
VOTERS = (1, 2, 3)
#: a follower counts as fetching when its last fetch is at most this old (the leader's clock)
FRESH_FETCH_MS = 1000
STABLE_TIMEOUT_S = 180.0
#: the metadata.version kafka-storage.sh of a 4.x line formats at by default
RELEASES = {"4.4": "4.4-IV2"}
ELECTION_TIMEOUT_S = 60.0


def wait_until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


@dataclass
class LeaderView:
    """One DescribeQuorum answer of the leader."""
    leader_id: int
    epoch: int
    high_watermark: int
    #: voter id -> (log end offset, last fetch timestamp ms)
    voters: dict[int, tuple[int, int]]


def describe(port: int) -> LeaderView | None:
    """The node's DescribeQuorum answer when it is the leader, else None (a follower answers
    NOT_LEADER_OR_FOLLOWER; a dead or starting node does not answer)."""
    Q = w.DescribeQuorumRequest
    try:
        _, resp = call(port, DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(
            topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]))
    except (OSError, AssertionError):
        return None
    for t in resp.topics:  # type: ignore[attr-defined]
        for p in t.partitions:
            if p.error_code == 0 and p.leader_id >= 0:
                return LeaderView(int(p.leader_id), int(p.leader_epoch), int(p.high_watermark),
                                  {v.replica_id: (v.log_end_offset, v.last_fetch_timestamp)
                                   for v in p.current_voters})
    return None


class Quorum:
    """Three controllers: ``kafka_ids`` genuine Kafka controllers (3.9, or 4.4 with ``--kafka 4.4``),
    the rest kraftnode."""

    def __init__(self, name: str, kafka: KafkaHome, root: Path, kafka_ids: set[int],
                 kraftnode_args: tuple[str, ...] = ()) -> None:
        self.name = name
        self.kafka_ids = kafka_ids
        self.kraft: Cluster | None = None
        self.kafka: dict[int, KafkaServer] = {}
        if kafka_ids != set(VOTERS):
            # formats all three; the Kafka voters' kraftnode directories stay unused. Beside
            # Kafka 4.x, at the release its kafka-storage.sh formats by default (4.4-IV2 for 4.4)
            release = ("--release-version", RELEASES[kafka.line]) if kafka.line in RELEASES else None
            self.kraft = Cluster(root / "kraftnode", len(VOTERS), release=release, start_args=kraftnode_args)
            self.ports = {i: self.kraft.port(i) for i in VOTERS}
        else:
            self.ports = dict(zip(VOTERS, free_ports(len(VOTERS)), strict=True))
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        for i in sorted(kafka_ids):
            d = root / f"kafka{i}"
            s = KafkaServer(kafka, d, i,
                            f"process.roles=controller\nnode.id={i}\nlisteners=CONTROLLER://127.0.0.1:{self.ports[i]}\n"
                            f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters={voters}\n"
                            f"log.dirs={d / 'data'}\n", heap=CONTROLLER_HEAP)
            s.format(CLUSTER_ID)
            self.kafka[i] = s

    def kind(self, i: int) -> str:
        return "kafka" if i in self.kafka_ids else "kraftnode"

    def start(self, i: int) -> None:
        if i in self.kafka:
            self.kafka[i].start()
        else:
            assert self.kraft is not None
            self.kraft.start(i)

    def kill(self, i: int) -> None:
        if i in self.kafka:
            self.kafka[i].kill()
        else:
            assert self.kraft is not None
            self.kraft.kill(i)

    def close(self) -> None:
        if self.kraft is not None:
            self.kraft.close()
        for s in self.kafka.values():
            s.close()

    def leader(self, among: list[int]) -> LeaderView | None:
        for i in among:
            view = describe(self.ports[i])
            if view is not None and view.leader_id == i:
                return view
        return None

    def stable(self) -> LeaderView | None:
        view = self.leader(list(VOTERS))
        if view is None or view.high_watermark <= 0:
            return None
        now_ms = int(time.time() * 1000)
        for i in VOTERS:
            leo, fetched = view.voters.get(i, (-1, -1))
            if leo < view.high_watermark:
                return None
            if i != view.leader_id and now_ms - fetched > FRESH_FETCH_MS:
                return None
        return view

    def logs(self) -> str:
        out = []
        for i in VOTERS:
            if i in self.kafka:
                out.append(f"--- kafka {i}\n{self.kafka[i].log()[-1500:]}")
            elif self.kraft is not None:
                out.append(f"--- kraftnode {i}\n{self.kraft.log(i)[-1500:]}")
        return "\n".join(out)


@dataclass
class Election:
    killed: int
    killed_kind: str
    winner: int
    winner_kind: str
    #: the survivors' kinds: the eligible candidates
    eligible: list[str]
    old_epoch: int
    new_epoch: int
    ms: int

    @property
    def epochs(self) -> int:
        return self.new_epoch - self.old_epoch


@dataclass
class Run:
    name: str
    kafka_ids: set[int]
    elections: list[Election] = field(default_factory=list)
    rejoin_elections: int = 0
    #: (killed voter, kill time in ms since the epoch), as ``kills.json`` in the quorum's directory
    kills: list[tuple[int, float]] = field(default_factory=list)


def measure(name: str, kafka: KafkaHome, root: Path, kafka_ids: set[int], kills: int, rng: random.Random,
            progress: Callable[[str], None], kraftnode_args: tuple[str, ...] = ()) -> Run:
    q = Quorum(name, kafka, root, kafka_ids, kraftnode_args)
    run = Run(name, kafka_ids)
    try:
        for i in VOTERS:
            q.start(i)
        view = wait_until(f"{name}: a stable quorum", q.stable, STABLE_TIMEOUT_S)
        for k in range(kills):
            time.sleep(rng.uniform(0, 1.0))
            view = q.stable() or wait_until(f"{name}: a stable quorum", q.stable, STABLE_TIMEOUT_S)
            victim, old_epoch = view.leader_id, view.epoch
            survivors = [i for i in VOTERS if i != victim]
            run.kills.append((victim, time.time() * 1000))
            (root / "kills.json").write_text(json.dumps([{"killed": v, "at_ms": t} for v, t in run.kills]))
            q.kill(victim)
            t0 = time.monotonic()
            def elected(among: list[int] = survivors, epoch: int = old_epoch) -> LeaderView | None:
                v = q.leader(among)
                return v if v is not None and v.epoch > epoch else None
            try:
                new = wait_until(f"{name}: a leader after killing {victim}", elected, ELECTION_TIMEOUT_S,
                                 interval=0.02)
            except RuntimeError as err:
                raise RuntimeError(f"{err}\n{q.logs()}") from None
            e = Election(victim, q.kind(victim), new.leader_id, q.kind(new.leader_id),
                         [q.kind(i) for i in survivors], old_epoch, new.epoch, round((time.monotonic() - t0) * 1000))
            run.elections.append(e)
            progress(f"{name} kill {k + 1}/{kills}: killed {victim} ({e.killed_kind}) at epoch {old_epoch}; "
                     f"{e.winner} ({e.winner_kind}) won epoch {e.new_epoch} ({e.epochs} epoch(s), {e.ms} ms)")
            q.start(victim)
            try:
                after = wait_until(f"{name}: {victim} rejoining", q.stable, STABLE_TIMEOUT_S)
            except RuntimeError as err:
                raise RuntimeError(f"{err}\n{q.logs()}") from None
            if after.epoch != new.epoch:
                run.rejoin_elections += 1
                progress(f"{name}: epoch {new.epoch} -> {after.epoch} while {victim} rejoined "
                         f"(leader {after.leader_id})")
    finally:
        q.close()
    return run


def poisson_binomial(ps: list[float]) -> list[float]:
    """P(exactly k successes) of independent trials with success chances ``ps``."""
    dist = [1.0]
    for p in ps:
        nxt = [0.0] * (len(dist) + 1)
        for k, x in enumerate(dist):
            nxt[k] += x * (1 - p)
            nxt[k + 1] += x * p
        dist = nxt
    return dist


def interval(dist: list[float], level: float = 0.99) -> tuple[int, int]:
    """The two-sided ``level`` interval: from the (1-level)/2 quantile to the (1+level)/2 one."""
    tail = (1 - level) / 2
    cdf, lo, hi = 0.0, 0, len(dist) - 1
    found_lo = False
    for k, x in enumerate(dist):
        cdf += x
        if not found_lo and cdf > tail:
            lo, found_lo = k, True
        if cdf >= 1 - tail - 1e-12:
            hi = k
            break
    return lo, hi


def fisher_greater(a: int, n1: int, b: int, n2: int) -> float:
    """One-sided Fisher exact p-value that the rate a/n1 exceeds b/n2 (P(X >= a) given the
    a + b splits among n1 + n2 elections)."""
    total, splits = n1 + n2, a + b
    denom = math.comb(total, splits)
    return sum(math.comb(n1, x) * math.comb(n2, splits - x)
               for x in range(a, min(n1, splits) + 1)) / denom


def summary(run: Run) -> dict[str, Any]:
    el = run.elections
    wins = {k: sum(1 for e in el if e.winner_kind == k) for k in ("kafka", "kraftnode")}
    ps = [e.eligible.count("kraftnode") / len(e.eligible) for e in el]
    expected = sum(ps)
    lo, hi = interval(poisson_binomial(ps))
    one_each = [e for e in el if sorted(e.eligible) == ["kafka", "kraftnode"]]
    oe_lo, oe_hi = interval(poisson_binomial([0.5] * len(one_each)))
    oe_wins = sum(1 for e in one_each if e.winner_kind == "kraftnode")
    epochs = [e.epochs for e in el]
    ms = sorted(e.ms for e in el)
    return {
        "quorum": run.name,
        "voters": {str(i): ("kafka" if i in run.kafka_ids else "kraftnode") for i in VOTERS},
        "elections": len(el),
        "wins": wins,
        "kraftnode_wins_expected": round(expected, 2),
        "kraftnode_wins_99": [lo, hi],
        "wins_ok": lo <= wins["kraftnode"] <= hi,
        "one_of_each": {"elections": len(one_each), "kraftnode_wins": oe_wins, "binomial_99": [oe_lo, oe_hi]},
        "split_votes": sum(1 for x in epochs if x > 1),
        "epochs_per_election": round(statistics.mean(epochs), 3) if epochs else None,
        "epochs_max": max(epochs) if epochs else None,
        "election_ms_p50": ms[len(ms) // 2] if ms else None,
        "election_ms_max": ms[-1] if ms else None,
        "rejoin_elections": run.rejoin_elections,
    }


def text(row: dict[str, Any]) -> str:
    w_ = row["wins"]
    oe = row["one_of_each"]
    return (f"{row['quorum']:6s} voters {row['voters']}: {row['elections']} elections; wins kafka {w_['kafka']}, "
            f"kraftnode {w_['kraftnode']} (kraftnode expected {row['kraftnode_wins_expected']}, "
            f"99% interval {row['kraftnode_wins_99']}: {'ok' if row['wins_ok'] else 'OUTSIDE'}); "
            f"one of each eligible: {oe['kraftnode_wins']}/{oe['elections']} kraftnode (binomial 99% {oe['binomial_99']})\n"
            f"       split votes {row['split_votes']}, epochs per election {row['epochs_per_election']} "
            f"(max {row['epochs_max']}), kill -> leader p50 {row['election_ms_p50']} ms max {row['election_ms_max']} ms, "
            f"rejoin elections {row['rejoin_elections']}")


#: --trace: kraftnode's raft logger (and the handlers', which log the Votes it answers) at DEBUG
KRAFTNODE_TRACE_LOGGING = {
    "version": 1, "disable_existing_loggers": False,
    "formatters": {"f": {"format": "%(asctime)s %(levelname)s [%(name)s] %(message)s"}},
    "handlers": {"c": {"class": "logging.StreamHandler", "formatter": "f", "stream": "ext://sys.stdout"}},
    "root": {"level": "INFO", "handlers": ["c"]},
    "loggers": {"kraftnode.raft": {"level": "DEBUG"}, "kraftnode.handlers": {"level": "DEBUG"}},
}


def trace_setup(kafka: KafkaHome, trace: Path) -> tuple[str, ...]:
    """--trace: write both sides' debug log configurations into ``trace``; Kafka's (its own
    server configuration with ``org.apache.kafka.raft`` at TRACE) goes to the Kafka servers through
    ``KAFKA_LOG4J_OPTS``. Returns the ``kraftnode start`` options that load kraftnode's."""
    trace.mkdir(parents=True, exist_ok=True)
    kn = trace / "kraftnode-logging.json"
    kn.write_text(json.dumps(KRAFTNODE_TRACE_LOGGING, indent=1))
    xml, props = kafka.root / "config" / "log4j2.xml", kafka.root / "config" / "log4j.properties"
    if xml.is_file():   # Kafka 4.x: log4j2
        out = trace / "kafka-log4j2.xml"
        out.write_text(xml.read_text().replace(
            "</Loggers>", '  <Logger name="org.apache.kafka.raft" level="TRACE"/>\n  </Loggers>', 1))
        os.environ["KAFKA_LOG4J_OPTS"] = f"-Dlog4j2.configurationFile={out}"
    elif props.is_file():   # Kafka 3.x: log4j 1
        out = trace / "kafka-log4j.properties"
        out.write_text(props.read_text() + "\nlog4j.logger.org.apache.kafka.raft=TRACE\n")
        os.environ["KAFKA_LOG4J_OPTS"] = f"-Dlog4j.configuration=file:{out}"
    else:
        raise FileNotFoundError(f"{kafka.root / 'config'} holds no log4j2.xml or log4j.properties to extend")
    return ("--log-config", str(kn))


def trace_report(name: str, root: Path, as_json: bool, progress: Callable[[str], None]) -> None:
    """--trace: per election who timed out first and who won; then one summary line."""
    tls = election_timeline.load(root)
    for tl in tls:
        progress(f"{name} {election_timeline.describe(tl)}")
        if as_json:
            print(json.dumps({"kind": "trace-election", "quorum": name, **tl.row()}), flush=True)
    s = election_timeline.summary(tls)
    late = {("kafka" if k == "K" else "kraftnode"): statistics.median(v)
            for k, v in election_timeline.timer_lateness(tls).items() if v}
    if as_json:
        print(json.dumps({"kind": "trace", "quorum": name, "dir": str(root), **s, "timed_out_late_ms_median": late}),
              flush=True)
        return
    print(f"trace {name} ({root}): the survivor that timed out first won {s['first_won_gap_gt_5ms']} elections "
          f"when more than 5 ms ahead, {s['first_won_gap_le_5ms']} when within 5 ms; one of each kind eligible: "
          f"kraftnode timed out first in {s['one_of_each_kraftnode_first']} of {s['one_of_each']} "
          f"(median gap {s['one_of_each_gap_ms_median']} ms); timed out after last Fetch answer + 2 s, median ms: "
          f"{late}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50, help="leader kills per quorum (default 50)")
    ap.add_argument("--kafka-voters", type=int, choices=(1, 2), default=1,
                    help="genuine Kafka controllers among the mixed quorum's three voters")
    ap.add_argument("--only", choices=("mixed", "kafka"))
    ap.add_argument("--kafka", default="3.9", choices=("3.9", "4.4"),
                    help="the genuine Kafka line of the Kafka voters (default 3.9); with 4.x both sides pre-vote")
    ap.add_argument("--seed", type=int, default=None, help="seed of the pauses before each kill")
    ap.add_argument("--json", action="store_true", help="one JSON object a line")
    ap.add_argument("--quiet", action="store_true", help="no line per kill on stderr")
    ap.add_argument("--tmp", type=Path, default=None)
    ap.add_argument("--trace", type=Path, default=None, metavar="DIR",
                    help="keep each quorum's directory under DIR with debug logs on both sides and print who "
                         "timed out first in each election (tools/bench/election_timeline.py)")
    args = ap.parse_args(argv)
    if args.trace is not None and args.trace.exists() and any(args.trace.iterdir()):
        print(f"elections bench: --trace {args.trace}: the directory is not empty", file=sys.stderr)
        return 2
    kafka = find_kafka_home(args.kafka)
    if kafka is None:
        print(f"elections bench: genuine Kafka {args.kafka} not found (KAFKA_HOME or ../shared/kafka-3.9)",
              file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    quorums = {"mixed": set(range(len(VOTERS) - args.kafka_voters + 1, len(VOTERS) + 1)), "kafka": set(VOTERS)}
    rows: dict[str, dict[str, Any]] = {}
    kraftnode_args = trace_setup(kafka, args.trace) if args.trace is not None else ()
    with tempfile.TemporaryDirectory(prefix="elections-bench-", dir=args.tmp) as tmp:
        base = args.trace if args.trace is not None else Path(tmp)
        for name, kafka_ids in quorums.items():
            if args.only and name != args.only:
                continue
            row = summary(measure(name, kafka, base / name, kafka_ids, args.kills, rng, progress, kraftnode_args))
            rows[name] = row
            print(json.dumps({"kind": "row", "seed": seed, **row}) if args.json else text(row), flush=True)
            if args.trace is not None:
                trace_report(name, base / name, args.json, progress)
    checks = []
    if "mixed" in rows:
        m = rows["mixed"]
        checks.append({"kind": "check", "check": "wins", "ok": m["wins_ok"],
                       "note": f"kraftnode won {m['wins']['kraftnode']} of {m['elections']}: 99% interval "
                               f"{m['kraftnode_wins_99']} around {m['kraftnode_wins_expected']}"})
    if "mixed" in rows and "kafka" in rows:
        m, k = rows["mixed"], rows["kafka"]
        p = fisher_greater(m["split_votes"], m["elections"], k["split_votes"], k["elections"])
        ratio = (round(m["epochs_per_election"] / k["epochs_per_election"], 3)
                 if m["epochs_per_election"] and k["epochs_per_election"] else None)
        checks.append({"kind": "check", "check": "splits",
                       "ok": m["split_votes"] * k["elections"] <= k["split_votes"] * m["elections"] or p >= 0.01,
                       "note": f"split votes mixed {m['split_votes']}/{m['elections']}, all-Kafka "
                               f"{k['split_votes']}/{k['elections']} (one-sided Fisher p {p:.3f}); epochs per "
                               f"election mixed/all-Kafka x{ratio}",
                       "fisher_p": round(p, 4), "epochs_ratio": ratio})
    for c in checks:
        print(json.dumps(c) if args.json else f"check {c['check']}: {'ok' if c['ok'] else 'FAILED'} -- {c['note']}",
              flush=True)
    if not args.json:
        print(f"(seed {seed})")
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
