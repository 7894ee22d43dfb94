"""UpdateFeatures as Kafka 4.4's controller decides it (FeatureControlManager.updateFeatures,
updateFeature, reasonNotSupported, updateMetadataVersion; Feature.validateVersion;
ConfigurationControlManager.updateFeatures' ELR safety records), sans I/O.

The updates are judged in the order of Java's HashMap of the request's features; the first
refusal fails the whole request (no records), with FeatureControlManager's message. A feature
is refused unless this controller, every registered broker and every registered controller
supports the level (and, from 3.7-IV0, every voter has registered); a downgrade needs a
downgrade type and an upgrade the upgrade type; a level's dependencies
(eligible.leader.replicas.version 1 needs metadata.version 4.0-IV1) are checked against the
levels the request would leave; metadata.version downgrades across a level that changed the
metadata are refused. kraft.version is the raft's (KRaftVersionAccessor): its checks are made
here and the upgrade itself is the caller's (``FeatureDecision.kraft_upgrade``), with the
NoOpRecord Kafka writes after it.

The table of levels and dependencies is :mod:`kraftnode.features`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftnode import features as ft
from kraftnode.controller.context import ControllerConfig
from kraftnode.controller.versions import MV_3_7_IV0
from kraftnode.controller.view import CONFIG_BROKER, ControllerView
from kraftnode.java_order import java_hashmap_order, java_string_hash
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import ConfigRecord, FeatureLevelRecord, NoOpRecord

__all__ = [
    "DOWNGRADE_CHANGED_METADATA", "FeatureDecision", "SAFE_DOWNGRADE", "UNSAFE_DOWNGRADE", "UPGRADE",
    "update_features", "version_range",
]

# FeatureUpdate.UpgradeType codes (UpdateFeatures v1+ UpgradeType)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

#: MetadataVersion.didMetadataChange, Kafka 4.4: the levels whose records changed (a downgrade
#: across one of them "might delete metadata information")
DOWNGRADE_CHANGED_METADATA = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33})
#: MetadataVersion.latestTesting (4.5-IV0): updateMetadataVersion's "Valid versions" upper end
LATEST_TESTING_LEVEL = max(ft.METADATA_VERSIONS.values())

Record = tuple[Any, int]


def version_range(lo: int, hi: int) -> str:
    """VersionRange.toString: ``7-33``, or one number when min == max."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _reason_not_supported(level: int, what: str, rng: tuple[int, int]) -> str | None:
    """QuorumFeatures.reasonNotSupported."""
    lo, hi = rng
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {version_range(lo, hi)}"


def _features_of(rec: Any) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_supported_version, f.max_supported_version) for f in rec.features}


@dataclass
class FeatureDecision:
    """What an UpdateFeatures comes to: an error (code and message; the request fails whole),
    or the records to write and, for kraft.version, the level to upgrade the raft to."""

    error_code: int = 0
    message: str | None = None
    records: list[Record] = field(default_factory=list)
    kraft_upgrade: int | None = None
    #: a log line (ConfigurationControlManager's "Generating cluster-level ..."), or ""
    note: str = ""


def _invalid(name: str, level: int, why: str) -> FeatureDecision:
    return FeatureDecision(Errors.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {name}. {why}")


def _invalid_mv(level: int, why: str) -> FeatureDecision:
    return FeatureDecision(Errors.INVALID_UPDATE_VERSION, f"Invalid metadata.version {level}. {why}")


class _Checker:
    def __init__(self, view: ControllerView, node_id: int, local: dict[str, tuple[int, int]],
                 quorum_ids: Iterable[int]) -> None:
        self.view = view
        self.node_id = node_id
        self.local = local
        self.quorum_ids = sorted(quorum_ids)

    def reason_not_supported(self, name: str, level: int) -> str | None:
        """FeatureControlManager.reasonNotSupported: this controller, every registered broker,
        every registered controller (from 3.7-IV0, when every voter must have registered)."""
        disabled = (0, 0)
        reason = _reason_not_supported(level, f"Local controller {self.node_id}", self.local.get(name, disabled))
        if reason:
            return reason
        for broker_id, rec in self.view.brokers().items():
            reason = _reason_not_supported(level, f"Broker {broker_id}", _features_of(rec).get(name, disabled))
            if reason:
                return reason
        if self.view.mv.level >= MV_3_7_IV0:
            found = {self.node_id}
            for cid, (rec, _v) in self.view.image.controllers.items():
                if cid == self.node_id:
                    continue
                reason = _reason_not_supported(level, f"Controller {cid}", _features_of(rec).get(name, disabled))
                if reason:
                    return reason
                found.add(cid)
            for cid in self.quorum_ids:
                if cid not in found:
                    return f"controller {cid} has not registered, and may not support this feature"
        return None


def _validate_version(name: str, level: int, proposed: dict[str, int]) -> str | None:
    """Feature.fromFeatureLevel (unstable levels allowed) and Feature.validateVersion."""
    fdef = ft.FEATURES.get(name)
    if fdef is None:
        return f"Feature {name} not found."
    fl = fdef.level(level)
    if fl is None:
        return f"No feature:{name} with feature level {level}"
    mv = proposed.get(ft.METADATA_VERSION)
    if level >= 1 and (mv is None or mv < ft.MINIMUM_VERSION_LEVEL):
        return (f"{name} could not be set to {level} because it depends on metadata.version="
                f"{ft.MINIMUM_VERSION_LEVEL} ({ft.MINIMUM_VERSION})")
    for dep, dep_level in fl.dependencies.items():
        have = proposed.get(dep)
        if have is None or have < dep_level:
            return f"{name} could not be set to {level} because it depends on {dep} level {dep_level}"
    return None


def _update_metadata_version(current: int, level: int, unsafe: bool) -> FeatureDecision:
    """FeatureControlManager.updateMetadataVersion."""
    if level not in ft.METADATA_VERSIONS.values():
        return _invalid_mv(level, f"Valid versions are from {ft.MINIMUM_VERSION_LEVEL} to {LATEST_TESTING_LEVEL}.")
    if level < current:
        changed = any(v in DOWNGRADE_CHANGED_METADATA for v in range(level + 1, current + 1))
        if changed:
            why = ("Unsafe metadata downgrade is not supported in this version." if unsafe else
                   "Refusing to perform the requested downgrade because it might delete metadata information.")
            return FeatureDecision(Errors.INVALID_UPDATE_VERSION,
                                   f"Unsupported metadata.version downgrade from {current} to {level}. {why}")
    return FeatureDecision(records=[(FeatureLevelRecord(name=ft.METADATA_VERSION, feature_level=level), 0)])


def _elr_safety_records(view: ControllerView, config: ControllerConfig) -> tuple[list[Record], str]:
    """ConfigurationControlManager.maybeGenerateElrSafetyRecords: enabling ELR sets a
    cluster-level min.insync.replicas (the controller's static value) unless one is set, and
    removes every broker-level one."""
    records: list[Record] = []
    note = ""
    if "min.insync.replicas" not in view.config(CONFIG_BROKER, ""):
        value = int(config.static_configs.get("min.insync.replicas", "1") or 1)
        records.append((ConfigRecord(resource_type=CONFIG_BROKER, resource_name="", name="min.insync.replicas",
                                     value=str(value)), 0))
        note = f"Generating cluster-level min.insync.replicas of {value}. "
    removed = []
    for (rtype, name), cfg in sorted(view.image.configs.items()):
        if rtype == CONFIG_BROKER and name and "min.insync.replicas" in cfg:
            records.append((ConfigRecord(resource_type=CONFIG_BROKER, resource_name=name,
                                         name="min.insync.replicas", value=None), 0))
            removed.append(name)
    if removed:
        note += "Removing broker-level min.insync.replicas for brokers: " + ", ".join(removed) + "."
    return records, note.strip()


def update_features(view: ControllerView, config: ControllerConfig, local: dict[str, tuple[int, int]],
                    quorum_ids: Iterable[int], updates: list[tuple[str, int, int]], validate_only: bool,
                    kraft_version: int) -> FeatureDecision:
    """``updates``: (feature, level, upgrade type) in the request's order (a repeated feature:
    its last). ``local``: what this controller supports; ``quorum_ids``: the voters."""
    levels: dict[str, int] = {}
    kinds: dict[str, int] = {}
    for name, level, kind in updates:
        levels[name] = level
        kinds[name] = kind
    current_mv = view.mv.level
    finalized = {k: v for k, v in view.image.features.items() if k != ft.METADATA_VERSION}
    proposed = {**finalized, ft.METADATA_VERSION: current_mv, **levels}
    checker = _Checker(view, config.node_id, local, quorum_ids)
    out = FeatureDecision()
    for name in java_hashmap_order(list(levels), java_string_hash):
        level, kind = levels[name], kinds[name]
        if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return _invalid(name, level, "The controller does not support the given upgrade type.")
        if name == ft.METADATA_VERSION:
            current = current_mv
        elif name == ft.KRAFT_VERSION:
            current = kraft_version
        else:
            current = finalized.get(name, 0)
        if level < 0:
            return _invalid(name, level, "A feature version cannot be less than 0.")
        reason = checker.reason_not_supported(name, level)
        if reason:
            return _invalid(name, level, reason)
        if level < current and kind == UPGRADE:
            return _invalid(name, level, "Can't downgrade the version of this feature without setting the "
                                         "upgrade type to either safe or unsafe downgrade.")
        if level > current and kind != UPGRADE:
            return _invalid(name, level, "Can't downgrade to a newer version.")
        if name == ft.METADATA_VERSION:
            d = _update_metadata_version(current, level, kind == UNSAFE_DOWNGRADE)
            if d.error_code:
                return d
            out.records += d.records
        elif name == ft.KRAFT_VERSION:
            if kind == UPGRADE:
                out.kraft_upgrade = level
                out.records.append((NoOpRecord(), 0))
            elif level != current:
                return _invalid(name, level, "Can't downgrade the version of this feature.")
        else:
            why = _validate_version(name, level, proposed)
            if why:
                return _invalid(name, level, why)
            out.records.append((FeatureLevelRecord(name=name, feature_level=level), 0))
    if validate_only:
        out.records = []
        return out
    if levels.get("eligible.leader.replicas.version", 0) > 0:
        extra, out.note = _elr_safety_records(view, config)
        out.records += extra
    return out
