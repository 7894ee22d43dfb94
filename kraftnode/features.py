"""Kafka 4.4's feature definitions, as data: ``MetadataVersion`` and the ``Feature`` enum.

Pure (standard library only), so that the log, the commands, the controller and the server
read one table. Every value below was read from Kafka 4.4.0's ``kafka-server-common`` jar
(``MetadataVersion.VERSIONS``, ``Feature.PRODUCTION_FEATURES``, each ``FeatureVersion``'s
``featureLevel``/``bootstrapMetadataVersion``/``dependencies``, ``Feature.defaultLevel``);
the test ``tests/kraftnode/test_features.py`` compares them with the jar again.

* :data:`METADATA_VERSIONS` -- the metadata.version levels Kafka 4.4 knows, 3.3-IV3 (7,
  ``MetadataVersion.MINIMUM_VERSION``) to 4.5-IV0 (34, not production); production ends at
  4.4-IV2 (33, ``LATEST_PRODUCTION``).
* :data:`FEATURES` -- the production features other than metadata.version, each with its
  levels, the metadata.version from which each level is the default
  (``bootstrapMetadataVersion``) and its dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "FEATURES", "FeatureDef", "KRAFT_VERSION", "LATEST_PRODUCTION", "LATEST_PRODUCTION_LEVEL",
    "METADATA_VERSION", "METADATA_VERSIONS", "MINIMUM_VERSION", "MINIMUM_VERSION_LEVEL",
    "MV_NAMES", "PRODUCTION_METADATA_VERSIONS", "default_feature_levels", "from_version_string",
    "mv_name", "supported_features",
]

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

#: metadata.version name -> feature level, in Kafka's order (MetadataVersion.VERSIONS, 4.4)
METADATA_VERSIONS: dict[str, int] = {
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12,
    "3.6-IV1": 13, "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18,
    "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24,
    "4.0-IV3": 25, "4.1-IV0": 26, "4.1-IV1": 27, "4.2-IV0": 28, "4.2-IV1": 29, "4.3-IV0": 30,
    "4.4-IV0": 31, "4.4-IV1": 32, "4.4-IV2": 33, "4.5-IV0": 34,
}
#: names of the levels before 3.3-IV3, which Kafka 4.x no longer accepts but which a log
#: written by Kafka 3.x may still name (messages only)
_OLD_NAMES: dict[int, str] = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2",
}
MV_NAMES: dict[int, str] = {**_OLD_NAMES, **{lvl: name for name, lvl in METADATA_VERSIONS.items()}}

LATEST_PRODUCTION = "4.4-IV2"
LATEST_PRODUCTION_LEVEL = METADATA_VERSIONS[LATEST_PRODUCTION]
MINIMUM_VERSION = "3.3-IV3"
MINIMUM_VERSION_LEVEL = METADATA_VERSIONS[MINIMUM_VERSION]
#: MetadataVersion.isProduction: every level up to LATEST_PRODUCTION
PRODUCTION_METADATA_VERSIONS: dict[str, int] = {
    n: lvl for n, lvl in METADATA_VERSIONS.items() if lvl <= LATEST_PRODUCTION_LEVEL}


def mv_name(level: int) -> str:
    """MetadataVersion's name for a level (its number when Kafka has no name for it)."""
    return MV_NAMES.get(level, str(level))


def from_version_string(text: str) -> int | None:
    """MetadataVersion.fromVersionString: ``4.4``, ``4.4.1`` or ``4.4-IV2`` -> level; only
    the first two dot-separated parts count (a release means its last IV). None if unknown."""
    parts = text.split(".")
    key = text if len(parts) <= 2 else ".".join(parts[:2])
    if key in METADATA_VERSIONS:
        return METADATA_VERSIONS[key]
    matches = [lvl for name, lvl in METADATA_VERSIONS.items() if name.split("-")[0] == key]
    return matches[-1] if matches else None


@dataclass(frozen=True)
class FeatureLevel:
    """One FeatureVersion: its level, the metadata.version from which it is the default
    (``bootstrapMetadataVersion``) and the levels it depends on (``dependencies``)."""

    level: int
    bootstrap_mv: int
    dependencies: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FeatureDef:
    """One of Kafka's production features (Feature enum)."""

    name: str
    levels: tuple[FeatureLevel, ...]
    latest_production: int

    def level(self, level: int) -> FeatureLevel | None:
        return next((f for f in self.levels if f.level == level), None)

    def default_level(self, mv: int) -> int:
        """Feature.defaultLevel: the highest production level whose bootstrap
        metadata.version is at or below ``mv``."""
        best = 0
        for f in self.levels:
            if f.level <= self.latest_production and f.bootstrap_mv <= mv:
                best = f.level
        return best


def _lv(level: int, bootstrap: str, **deps: int) -> FeatureLevel:
    return FeatureLevel(level, METADATA_VERSIONS[bootstrap],
                        {k.replace("_", "."): v for k, v in deps.items()})


#: Feature.PRODUCTION_FEATURES of Kafka 4.4, in the enum's order
FEATURES: dict[str, FeatureDef] = {f.name: f for f in (
    FeatureDef(KRAFT_VERSION, (_lv(0, "3.3-IV3"), _lv(1, "3.9-IV0")), 1),
    FeatureDef("transaction.version",
               (_lv(0, "3.3-IV3"), _lv(1, "4.0-IV2"), _lv(2, "4.0-IV2")), 2),
    FeatureDef("group.version", (_lv(0, "3.3-IV3"), _lv(1, "4.0-IV0")), 1),
    FeatureDef("eligible.leader.replicas.version",
               (_lv(0, "3.3-IV3"), _lv(1, "4.1-IV0", metadata_version=23)), 1),
    FeatureDef("share.version", (_lv(0, "3.3-IV3"), _lv(1, "4.2-IV0"), _lv(2, "4.4-IV0")), 2),
    FeatureDef("streams.version", (_lv(0, "3.3-IV3"), _lv(1, "4.2-IV1")), 1),
)}


def supported_features() -> dict[str, tuple[int, int]]:
    """The ranges a Kafka 4.4 controller supports and registers (QuorumFeatures
    .defaultSupportedFeatureMap without unstable versions): metadata.version from
    MINIMUM_VERSION to LATEST_PRODUCTION, every production feature from 0 to its latest
    production level."""
    out = {METADATA_VERSION: (MINIMUM_VERSION_LEVEL, LATEST_PRODUCTION_LEVEL)}
    for f in FEATURES.values():
        out[f.name] = (0, f.latest_production)
    return out


def default_feature_levels(mv: int) -> dict[str, int]:
    """Every production feature at its default level for ``mv`` (Feature.defaultLevel), as
    ``kafka-storage.sh format`` sets them when not named with ``--feature``."""
    return {f.name: f.default_level(mv) for f in FEATURES.values()}
