"""Snapshot and log-lifecycle benchmark (issue 14, "Must show" 7), one run.

Rows:
  1. snapshot write and load, MB/s: a MetadataState holding ``--keys`` keyed application
     records (``--value-bytes`` each) plus a metadata image (topics with partitions) is
     written as a snapshot (``.part``, fsync, rename) and loaded back at start-up
     (``prepare_storage``: validate every batch, then rebuild the state);
  2. restart time with 1x and 10x the history: the time to rebuild the state at start-up
     (open the log, load the latest snapshot, replay the log after it) for a log that wrote
     the same key set H and 10 H times over, with snapshots and cleaning on; target: the
     10x/1x ratio <= 1.5 (without snapshots it would be ~10);
  3. catch-up of a wiped replica, real processes: a 3-node quorum writes the history; node 3
     is wiped and re-formatted; the time from when it knows the leader until it has the whole
     log, through FetchSnapshot (snapshots on) vs replaying the same history from offset 0
     (snapshots off): the ratio;
  4. commit latency p50/p99 of an in-process single-node quorum (EmbeddedNode appends, one
     batch of one record at a time) while a large snapshot is being written in a worker
     thread vs not; target: p99 within 2x;
  5. disk use of a node under a write load for ``--duration`` seconds (the issue: 10 minutes)
     at the default retention settings scaled down by ``--scale`` (bytes and snapshot
     thresholds divided by it), sampled every few seconds and printed as a table: bounded.

Usage: python tools/bench/snapshot.py [--quick] [--duration S] [--scale N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kraftnode.log.metadata_log import LogConfig, MetadataLog  # noqa: E402
from kraftnode.log.snapshot import SnapshotId, list_snapshots  # noqa: E402
from kraftnode.metadata.state import MetadataState  # noqa: E402
from kraftnode.metadata.state_machine import KeyValueStateMachine, StateMachineRunner  # noqa: E402
from kraftnode.protocol.generated.metadata import (  # noqa: E402
    FeatureLevelRecord,
    PartitionRecord,
    TopicRecord,
)
from kraftnode.server.controller_io.snapshot_manager import (  # noqa: E402
    SnapshotConfig,
    SnapshotManager,
    prepare_storage,
    write_state_snapshot,
)
from recordbatch import Record, build_batch  # noqa: E402

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def mb(n: int) -> float:
    return n / 1e6


# ------------------------------------------------------------------ 1. write / load
def big_state(keys: int, value_bytes: int) -> MetadataState:
    st = MetadataState()
    st.image.replay(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)
    for t in range(200):
        tid = uuid.UUID(int=t + 1)
        st.image.replay(TopicRecord(name=f"topic-{t}", topic_id=tid), 0)
        for p in range(10):
            st.image.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2, 3],
                                            leader=1), 0)
    value = b"x" * value_bytes
    for k in range(keys):
        st.app[f"key-{k:09d}".encode()] = value
    return st


def bench_write_load(tmp: Path, keys: int, value_bytes: int) -> dict[str, float]:
    st = big_state(keys, value_bytes)
    with MetadataLog(tmp / "wl") as mlog:
        sid = SnapshotId(1, 1)
        # the snapshot covers offset 0: give the log one batch there so start-up accepts it
        mlog.append_as_leader(build_batch([Record(None, b"x")]), 1)
        mlog.flush()
        t0 = time.perf_counter()
        path = write_state_snapshot(mlog.dir, sid, st.snapshot(), last_timestamp=0, kraft_version=0, voters=None)
        write_s = time.perf_counter() - t0
        size = path.stat().st_size
    with MetadataLog(tmp / "wl") as mlog:
        runner = StateMachineRunner(MetadataState())
        t0 = time.perf_counter()
        prepare_storage(mlog, runner)
        load_s = time.perf_counter() - t0
        assert len(runner.sm.app) == keys  # type: ignore[attr-defined]
    return {"bytes": size, "write_mb_s": mb(size) / write_s, "load_mb_s": mb(size) / load_s,
            "write_s": write_s, "load_s": load_s}


# ------------------------------------------------------------------ 2. restart time
def build_history(d: Path, rounds: int, keys: int, value_bytes: int, cfg: SnapshotConfig) -> None:
    value = b"y" * value_bytes
    with MetadataLog(d, LogConfig(segment_bytes=1 << 20, segment_min_bytes=12)) as mlog:
        runner = StateMachineRunner(MetadataState())
        prepare_storage(mlog, runner)
        m = SnapshotManager(mlog, runner, cfg, lambda _o: (0, None))
        for r in range(rounds):
            for k0 in range(0, keys, 100):
                mlog.append_as_leader(build_batch([Record(f"key-{k:07d}".encode(), value + str(r).encode())
                                                   for k in range(k0, min(keys, k0 + 100))]), 1)
            mlog.flush()
            while True:
                more = m.catch_up(mlog.end_offset)
                if m.due():
                    anyio.run(m.maybe_generate)
                if not more:
                    break


def restart_time(d: Path) -> float:
    t0 = time.perf_counter()
    with MetadataLog(d, LogConfig(segment_bytes=1 << 20, segment_min_bytes=12)) as mlog:
        runner = StateMachineRunner(MetadataState())
        prepare_storage(mlog, runner)
        m = SnapshotManager(mlog, runner, SnapshotConfig(), lambda _o: (0, None))
        while m.catch_up(mlog.end_offset, 10_000):
            pass
    return time.perf_counter() - t0


def bench_restart(tmp: Path, keys: int, value_bytes: int, rounds: int) -> dict[str, float]:
    state_bytes = keys * (value_bytes + 20)
    cfg = SnapshotConfig(max_bytes_between_snapshots=state_bytes, retention_bytes=3 * state_bytes)
    build_history(tmp / "h1", rounds, keys, value_bytes, cfg)
    build_history(tmp / "h10", rounds * 10, keys, value_bytes, cfg)
    t1 = statistics.median(restart_time(tmp / "h1") for _ in range(3))
    t10 = statistics.median(restart_time(tmp / "h10") for _ in range(3))
    return {"t1_s": t1, "t10_s": t10, "ratio": t10 / t1}


# ------------------------------------------------------------------ 3. catch-up (processes)
def _cluster(root: Path, extra: str) -> object:
    from tests.support.cluster import Cluster

    return Cluster(root, 3, extra=extra)


def _produce(bootstrap: str, n: int, value_bytes: int, keys: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 200_000})
    value = b"z" * value_bytes
    for i in range(n):
        while True:
            try:
                p.produce("__cluster_metadata", key=f"key-{i % keys:07d}".encode(), value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def catch_up_time(root: Path, extra: str, records: int, value_bytes: int, keys: int) -> float:
    from tests.support.cluster import wait_for_hw

    cl = _cluster(root, extra)
    try:
        cl.start_all()  # type: ignore[attr-defined]
        wait_for_hw(cl, 1, 60)  # type: ignore[arg-type]
        _produce(cl.bootstrap(), records, value_bytes, keys)  # type: ignore[attr-defined]
        info = wait_for_hw(cl, records, 120)  # type: ignore[arg-type]
        time.sleep(3)  # snapshots and cleaning settle
        victim = next(i for i in (1, 2, 3) if i != info.leader_id)
        cl.stop(victim)  # type: ignore[attr-defined]
        shutil.rmtree(root / f"node{victim}" / "metadata")
        subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config",
                        str(root / f"node{victim}" / "server.properties"), "--cluster-id", CLUSTER_ID],
                       check=True, capture_output=True)
        target = info.high_watermark
        t0 = time.perf_counter()
        started_ms = int(time.time() * 1000)
        cl.start(victim)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            q = cl.quorum()  # type: ignore[attr-defined]
            # the leader's view of the wiped replica, from a fetch it made after its restart
            if q is not None and any(v.replica_id == victim and v.log_end_offset >= target
                                     and v.last_fetch_timestamp >= started_ms for v in q.voters):
                done_ms = time.time() * 1000
                # from the moment the restarted replica knows the leader (its log line), so
                # process start-up and leader discovery (an election timeout) are not counted
                follower_ms = None
                for line in cl.log(victim).splitlines():  # type: ignore[attr-defined]
                    if "became follower in epoch" in line:
                        stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) * 1000 + int(line[20:23])
                        if stamp >= started_ms - 1000:
                            follower_ms = stamp
                            break
                if follower_ms is None:
                    return time.perf_counter() - t0
                return max(0.0, done_ms - follower_ms) / 1000
            time.sleep(0.05)
        raise RuntimeError("the wiped replica did not catch up in 300 s")
    finally:
        cl.close()  # type: ignore[attr-defined]


def bench_catch_up(tmp: Path, records: int, value_bytes: int, keys: int) -> dict[str, float]:
    base = "metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes=1048576\n"
    snap = base + "metadata.log.max.record.bytes.between.snapshots=1000000\nmetadata.max.retention.bytes=3000000\n"
    nosnap = base + "metadata.log.max.record.bytes.between.snapshots=100000000000\n"
    t_snap = catch_up_time(tmp / "cs", snap, records, value_bytes, keys)
    t_replay = catch_up_time(tmp / "cr", nosnap, records, value_bytes, keys)
    return {"fetch_snapshot_s": t_snap, "replay_s": t_replay, "ratio": t_replay / t_snap}


# ------------------------------------------------------------------ 4. commit latency
def bench_latency(tmp: Path, n: int, state_keys: int) -> dict[str, float]:
    from kraftnode.embed import EmbeddedNode
    from tests.support.cluster import free_ports

    port = free_ports(1)[0]
    conf = tmp / "lat.properties"
    conf.write_text(f"node.id=1\nprocess.roles=controller\nkraftnode.application.records.enable=true\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                    f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
                    f"log.dirs={tmp / 'lat'}\nmetadata.log.max.snapshot.interval.ms=0\n")
    subprocess.run([sys.executable, "-m", "kraftnode", "format", "--config", str(conf), "--cluster-id",
                    CLUSTER_ID], check=True, capture_output=True)
    out: dict[str, float] = {}

    async def run() -> None:
        sm = KeyValueStateMachine()
        for k in range(state_keys):
            sm.data[f"key-{k:09d}".encode()] = b"v" * 100
        async with EmbeddedNode(conf, sm) as node:
            await node.wait_for_leader()
            for _ in range(50):
                await node.append([(b"warm", b"up")])

            async def sample(count: int) -> list[float]:
                lat = []
                for i in range(count):
                    t0 = time.perf_counter()
                    await node.append([(f"k{i}".encode(), b"v" * 100)])
                    lat.append((time.perf_counter() - t0) * 1000)
                return lat
            idle = await sample(n)
            # a snapshot of the whole state written in a worker thread, as the node does
            mgr = node._node().snapshots  # noqa: SLF001 - the bench drives the node's own manager
            sid, write = mgr.capture()
            during: list[float] = []
            done = anyio.Event()

            async def writer() -> None:
                await anyio.to_thread.run_sync(write)
                mgr.in_progress = None
                done.set()
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer)
                while not done.is_set():
                    during.extend(await sample(20))
            out["snapshot_bytes"] = (node._node().snapshots.mlog.dir / f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint").stat().st_size  # noqa: SLF001
            out["during_samples"] = len(during)
            for name, lat in (("idle", idle), ("during", during)):
                qs = statistics.quantiles(lat, n=100)
                out[f"{name}_p50_ms"] = statistics.median(lat)
                out[f"{name}_p99_ms"] = qs[98]
    anyio.run(run)
    out["p99_ratio"] = out["during_p99_ms"] / out["idle_p99_ms"]
    return out


# ------------------------------------------------------------------ 5. disk use
def bench_disk(tmp: Path, duration: float, scale: int) -> list[tuple[float, int, int, int, int]]:
    from confluent_kafka import Producer

    from tests.support.cluster import wait_for_hw

    retention = 100 * 1024 * 1024 // scale
    between = 20 * 1024 * 1024 // scale
    segment = max(1024 * 1024 // 8, 1024 * 1024 * 1024 // scale // 8)
    extra = (f"metadata.max.retention.bytes={retention}\nmetadata.log.max.record.bytes.between.snapshots={between}\n"
             f"metadata.log.segment.min.bytes=1024\nmetadata.log.segment.bytes={segment}\n")
    cl = _cluster(tmp / "disk", extra)
    rows: list[tuple[float, int, int, int, int]] = []
    try:
        cl.start_all()  # type: ignore[attr-defined]
        wait_for_hw(cl, 1, 60)  # type: ignore[arg-type]
        p = Producer({"bootstrap.servers": cl.bootstrap(), "acks": "all", "linger.ms": 5})  # type: ignore[attr-defined]
        pdir = tmp / "disk" / "node1" / "metadata" / "__cluster_metadata-0"
        t0 = time.monotonic()
        next_sample = t0
        i = 0
        value = b"d" * 200
        while time.monotonic() - t0 < duration:
            try:
                p.produce("__cluster_metadata", key=f"key-{i % 5000}".encode(), value=value, partition=0)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 500 == 0:
                p.poll(0)
            if time.monotonic() >= next_sample:
                next_sample += max(1.0, duration / 20)
                total = sum(f.stat().st_size for f in pdir.iterdir() if f.is_file())
                snaps = len(list_snapshots(pdir))
                segs = len(list(pdir.glob("*.log")))
                rows.append((time.monotonic() - t0, i, total, snaps, segs))
        p.flush(60)
    finally:
        cl.close()  # type: ignore[attr-defined]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of write load for the disk-use row")
    ap.add_argument("--scale", type=int, default=100, help="divide the default retention/snapshot bytes by N")
    args = ap.parse_args()
    q = args.quick
    tmp = Path(tempfile.mkdtemp(prefix="kraftnode-snapbench-"))
    try:
        print(f"kraftnode snapshot benchmark, {time.strftime('%Y-%m-%d %H:%M:%S')}, python {sys.version.split()[0]}, "
              f"{os.cpu_count()} cpus")
        w = bench_write_load(tmp, 20_000 if q else 200_000, 100)
        print(f"1. snapshot of {mb(int(w['bytes'])):.1f} MB: write {w['write_mb_s']:.1f} MB/s "
              f"({w['write_s']:.2f} s), load {w['load_mb_s']:.1f} MB/s ({w['load_s']:.2f} s)")
        r = bench_restart(tmp, 2_000 if q else 20_000, 100, 3)
        print(f"2. restart (state rebuild): 1x history {r['t1_s'] * 1000:.0f} ms, 10x history "
              f"{r['t10_s'] * 1000:.0f} ms, ratio {r['ratio']:.2f} (target <= 1.5: "
              f"{'met' if r['ratio'] <= 1.5 else 'MISSED'})")
        lat = bench_latency(tmp, 200 if q else 1000, 100_000 if q else 500_000)
        print(f"4. commit latency (single node, in-process): idle p50 {lat['idle_p50_ms']:.2f} ms "
              f"p99 {lat['idle_p99_ms']:.2f} ms; while writing a {mb(int(lat['snapshot_bytes'])):.0f} MB snapshot "
              f"({int(lat['during_samples'])} commits) p50 {lat['during_p50_ms']:.2f} ms p99 "
              f"{lat['during_p99_ms']:.2f} ms; p99 ratio {lat['p99_ratio']:.2f} (target <= 2: "
              f"{'met' if lat['p99_ratio'] <= 2 else 'MISSED'})")
        c = bench_catch_up(tmp, 5_000 if q else 100_000, 200, 2_000)
        print(f"3. wiped replica catch-up (3 processes): FetchSnapshot {c['fetch_snapshot_s']:.2f} s, "
              f"replay from 0 {c['replay_s']:.2f} s, ratio {c['ratio']:.2f}x")
        rows = bench_disk(tmp, 30.0 if q else args.duration, args.scale)
        print(f"5. disk use of node 1 under write load, retention {100 // args.scale if args.scale <= 100 else 0} "
              f"MiB-scale (defaults / {args.scale}):")
        print("   t (s) | records sent | partition dir bytes | snapshots | segments")
        for t, n, b, s, g in rows:
            print(f"   {t:5.0f} | {n:12d} | {b:19d} | {s:9d} | {g:8d}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
