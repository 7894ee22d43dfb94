"""Must-show 3 of issue 37: a cluster formatted at 3.9-IV0 with a genuine Kafka 4.4 broker,
``kafka-features.sh upgrade --release-version 4.4`` through kraftnode finalizes every feature as a
genuine Kafka 4.4 controller does, and the changes Kafka refuses are refused with its messages.

The same sequence of ``kafka-features.sh`` commands runs twice, one cluster at a time: once on a
kraftnode controller, once on an all-Kafka 4.4 controller quorum; both with one Kafka 4.4 broker
(one controller and one broker per side show every rule: the voter check, the broker check, the
dependencies, downgrades). Every command's output and exit code are compared line by line, with
the only node-specific value -- ``Epoch:``, the offset of the last feature change, which depends
on how many other records each controller wrote -- normalised. ``describe`` runs through the
broker (``--bootstrap-server``: its supported ranges, the finalized levels it replayed) and
through the controller (``--bootstrap-controller``: the controller's ApiVersions).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cluster import SUITE_RELEASE
from tests.support.kafka import KafkaHome
from tests.support.kraft_brokers import Setup, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.slow]

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
DESCRIBE = ("describe",)
STEPS: list[tuple[str, ...]] = [
    DESCRIBE,
    ("upgrade", "--release-version", "4.4", "--dry-run"),
    # ELR needs metadata.version 4.0-IV1; group.version has no level 2
    ("upgrade", "--feature", "eligible.leader.replicas.version=1"),
    ("upgrade", "--feature", "group.version=2"),
    # 3.9-IV0 -> 3.8-IV0 changed no metadata: Kafka makes it (and every other feature to 0)
    ("downgrade", "--release-version", "3.8"),
    DESCRIBE,
    ("upgrade", "--release-version", "4.4"),
    DESCRIBE,
    # downgrades Kafka refuses, with its messages
    ("downgrade", "--release-version", "3.9"),
    ("downgrade", "--metadata", "4.0-IV0"),
    ("downgrade", "--metadata", "4.4-IV1"),
    ("downgrade", "--feature", "kraft.version=0"),
    # and the ones it makes
    ("disable", "--feature", "group.version"),
    ("downgrade", "--feature", "transaction.version=1"),
    DESCRIBE,
]


def _normalised(text: str) -> list[str]:
    return [re.sub(r"Epoch: \d+", "Epoch: N", ln).rstrip() for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("at ")]


def _describe_both(kafka: KafkaHome, root: Path, bootstrap: str,
                   controller: str) -> tuple[list[str], list[str]] | None:
    """``describe`` through the broker and through the controller; None while they disagree on
    a finalized level."""
    got = []
    for args in (("--bootstrap-server", bootstrap), ("--bootstrap-controller", controller)):
        r = kafka.tool("kafka-features", *args, "describe", timeout=120, env={"LOG_DIR": str(root / "tool-logs")})
        assert r.returncode == 0, r.stdout + r.stderr
        got.append(_normalised(r.stdout))

    def levels(lines: list[str]) -> list[str]:
        return [re.sub(r".*FinalizedVersionLevel: (\S+).*", r"\1", ln) for ln in lines]
    return (got[0], got[1]) if levels(got[0]) == levels(got[1]) else None


def _run_side(kafka: KafkaHome, root: Path, genuine: bool) -> list[tuple[str, int, list[str]]]:
    s = Setup(kafka, root, "", "", voters=1, brokers=(101,), kafka_voters=(1,) if genuine else ())
    out: list[tuple[str, int, list[str]]] = []
    try:
        if genuine:
            s.controllers[1].format(CLUSTER, *SUITE_RELEASE)  # as the kraftnode side is formatted
        s.start_all(CLUSTER)
        controller = f"127.0.0.1:{s.cl.port(1)}"
        for step in STEPS:
            if step == DESCRIBE:
                # the finalized levels reach the broker with its next metadata fetch: wait until
                # it and the controller agree, as an operator would re-run describe
                both = wait_until("broker and controller describe the same levels",
                                  lambda: _describe_both(kafka, root, s.bootstrap, controller), 30, s.logs)
                out.append(("describe (broker)", 0, both[0]))
                out.append(("describe (controller)", 0, both[1]))
            else:
                r = s.cli("kafka-features", *step)
                out.append((" ".join(step), r.returncode, _normalised(r.stdout + r.stderr)))
        # the broker lived through every change, registered and unfenced
        assert s.brokers[101].running, s.logs()
        s.check_clean()
    finally:
        s.close()
    return out


def test_upgrade_to_44_through_kraftnode_as_through_kafka(kafka44: KafkaHome, tmp_path: Path) -> None:
    ours = _run_side(kafka44, tmp_path / "kraftnode", genuine=False)
    theirs = _run_side(kafka44, tmp_path / "kafka", genuine=True)
    assert [s for s, _, _ in ours] == [s for s, _, _ in theirs]
    for (step, rc, lines), (_, rc_k, lines_k) in zip(ours, theirs, strict=True):
        assert (rc, lines) == (rc_k, lines_k), f"{step}:\nkraftnode:\n" + "\n".join(lines) + \
            "\nKafka 4.4:\n" + "\n".join(lines_k)
    by_step = {s: lines for s, _, lines in ours}
    # the point of it all: every feature finalized at 4.4's levels ...
    after = [s for s, _, _ in ours].index("upgrade --release-version 4.4") + 1
    assert any("metadata.version" in ln and "FinalizedVersionLevel: 4.4-IV2" in ln for ln in ours[after][2])
    for name, level in (("group.version", 1), ("transaction.version", 2), ("share.version", 2),
                        ("streams.version", 1), ("eligible.leader.replicas.version", 1), ("kraft.version", 1)):
        assert any(ln.startswith(f"Feature: {name} ") and f"FinalizedVersionLevel: {level} " in ln + " "
                   for ln in ours[after][2]), (name, ours[after][2])
    # ... and a downgrade Kafka refuses, refused with its message
    assert any("Unsupported metadata.version downgrade from 33 to 21. Refusing to perform the requested "
               "downgrade because it might delete metadata information." in ln
               for ln in by_step["downgrade --release-version 3.9"])
