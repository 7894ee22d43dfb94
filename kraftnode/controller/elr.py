"""Eligible leader replicas (KIP-966) as Kafka 4.4's controller keeps them.

What turns them on (``FeatureControlManager.isElrFeatureEnabled``): metadata.version 4.0-IV1 or
later *and* ``eligible.leader.replicas.version`` >= 1. From 4.0-IV1 on, PartitionRecord and
PartitionChangeRecord are written at version 2 (the ELR fields) whether or not the feature is.

The rules, as ``PartitionChangeBuilder`` applies them to one partition change (the builder in
:mod:`kraftnode.controller.partition_change` calls the functions here):

* **populate** (``maybePopulateTargetElr``): while the target ISR has at least the topic's
  effective ``min.insync.replicas`` (min(min ISR, replication factor)) members, ELR and
  last-known ELR are empty. Below it, the ELR is the old ISR plus the old ELR, minus the target
  ISR and minus any replica that shut down uncleanly; the last-known ELR collects the rest of
  those (and of the old last-known ELR) that are neither in the ISR nor in the ELR.
* **elect**: with an empty ISR, an ELR member that is an acceptable leader may be elected; it
  becomes the ISR alone and leaves the ELR. With both empty, the *last known leader* (the single
  member of the last-known ELR) is elected, as an unclean election (leader recovery RECOVERING).
* **record** (``maybeUpdateRecordElr`` / ``maybeUpdateLastKnownLeader``): an unclean election, or
  ELR disabled, empties both lists; when the partition loses its leader and has no last-known
  ELR, the last-known ELR becomes the old leader; a new leader clears it. (The last known leader
  is elected only while it is an acceptable leader: 4.4's ``canElectLastKnownLeader``.)

The rules were checked against Kafka 4.4's own ``PartitionChangeBuilder`` on random partition
changes (tests/interop/test_elr_records_vs_kafka44.py).
* ``ClearElrRecord`` (``ConfigurationControlManager.createClearElrRecordsAsNeeded``): any
  ``min.insync.replicas`` ConfigRecord written while ELR is enabled is followed by a
  ClearElrRecord -- for that topic at the topic level, for every topic at the broker and
  cluster levels.

Java's ``HashSet<Integer>`` iteration order decides the order of the lists, so it is kept here
(the records compare byte for byte with a Kafka controller's).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftnode.controller.result import Record
from kraftnode.controller.versions import MV_4_0_IV1, MetadataVersion
from kraftnode.java_order import java_hashmap_order
from kraftnode.protocol.generated.metadata import ClearElrRecord, ConfigRecord

__all__ = ["ELR_FEATURE", "MIN_INSYNC_REPLICAS", "MV_4_0_IV1", "clear_elr_records", "effective_min_isr",
           "elr_enabled", "elr_supported", "java_int_set", "partition_change_record_version",
           "partition_record_version", "populate_target_elr"]

ELR_FEATURE = "eligible.leader.replicas.version"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
CONFIG_TOPIC = 2


def elr_supported(mv_level: int) -> bool:
    """MetadataVersion.isElrSupported."""
    return MetadataVersion(mv_level).is_elr_supported()


def elr_enabled(features: dict[str, int]) -> bool:
    """FeatureControlManager.isElrFeatureEnabled, from the finalized levels of the image."""
    return elr_supported(features.get("metadata.version", 1)) and features.get(ELR_FEATURE, 0) >= 1


def partition_record_version(mv: MetadataVersion) -> int:
    """MetadataVersion.partitionRecordVersion (2 from 4.0-IV1 on)."""
    return mv.partition_record_version()


def partition_change_record_version(mv: MetadataVersion) -> int:
    """MetadataVersion.partitionChangeRecordVersion (2 from 4.0-IV1 on)."""
    return mv.partition_change_record_version()


def effective_min_isr(min_isr_config: str | None, replication_factor: int) -> int:
    """ReplicationControlManager.getTopicEffectiveMinIsr: min(min.insync.replicas, RF)."""
    try:
        configured = int((min_isr_config or "1").strip())
    except ValueError:
        configured = 1
    return min(configured, replication_factor)


def java_int_set(values: Iterable[int]) -> list[int]:
    """The iteration order of a java.util.HashSet<Integer> built by adding ``values``."""
    unique: list[int] = []
    seen: set[int] = set()
    for v in values:
        if v not in seen:
            seen.add(v)
            unique.append(v)
    return java_hashmap_order(unique, lambda v: v & 0xFFFFFFFF)


def populate_target_elr(min_isr: int, current_isr: list[int], target_isr: list[int], target_elr: list[int],
                        target_lkelr: list[int], unclean_shutdown: list[int] | None
                        ) -> tuple[list[int], list[int]]:
    """PartitionChangeBuilder.maybePopulateTargetElr (ELR enabled): (target ELR, target last-known ELR)."""
    if len(target_isr) >= min_isr:
        return [], []
    isr_set = set(target_isr)
    candidates = list(target_elr) + list(current_isr)
    candidate_set = java_int_set(candidates)
    elr = [r for r in candidate_set if r not in isr_set and not (unclean_shutdown and r in unclean_shutdown)]
    all_candidates = java_int_set(candidates + list(target_lkelr))
    lkelr = [r for r in all_candidates if r not in isr_set and r not in elr]
    return elr, lkelr


def clear_elr_records(records: Iterable[Record]) -> list[Record]:
    """ConfigurationControlManager.createClearElrRecordsAsNeeded (ELR enabled): a ClearElrRecord
    per ``min.insync.replicas`` ConfigRecord -- the topic's for a topic config, every topic's
    (an empty name) for a broker or cluster one."""
    out: list[Record] = []
    for m, _v in records:
        if isinstance(m, ConfigRecord) and m.name == MIN_INSYNC_REPLICAS:
            name = m.resource_name if m.resource_type == CONFIG_TOPIC else ""
            out.append((ClearElrRecord(topic_name=name), 0))
    return out
