"""kraftnode.controller.feature_control: Kafka 4.4's FeatureControlManager rules on a view
(the end-to-end comparison with a genuine 4.4 controller is tests/interop/test_features_upgrade.py)."""

from __future__ import annotations

from typing import Any

from kraftnode.controller.feature_control import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    update_features,
)
from kraftnode.features import supported_features
from kraftnode.protocol.errors import Errors
from kraftnode.protocol.generated.metadata import ConfigRecord, RegisterControllerRecord
from tests.kraftnode.controller.support import Harness

LOCAL = supported_features()


def decide(h: Harness, *updates: tuple[str, int, int], validate_only: bool = False, kraft: int = 0,
           voters: tuple[int, ...] = (1,)) -> Any:
    return update_features(h.view, h.ctl.config, LOCAL, voters, list(updates), validate_only, kraft)


def names(d: Any) -> list[tuple[str, str, object]]:
    return [(type(m).NAME, getattr(m, "name", ""), getattr(m, "feature_level", getattr(m, "value", None)))
            for m, _v in d.records]


def test_upgrade_to_44_writes_every_level() -> None:
    h = Harness(mv=21)
    d = decide(h, ("metadata.version", 33, UPGRADE), ("group.version", 1, UPGRADE),
               ("eligible.leader.replicas.version", 1, UPGRADE), ("transaction.version", 2, UPGRADE))
    assert d.error_code == 0, d.message
    # Java HashMap order of the request's features; ELR's safety ConfigRecord last
    assert names(d) == [("FeatureLevelRecord", "group.version", 1), ("FeatureLevelRecord", "metadata.version", 33),
                        ("FeatureLevelRecord", "transaction.version", 2),
                        ("FeatureLevelRecord", "eligible.leader.replicas.version", 1),
                        ("ConfigRecord", "min.insync.replicas", "1")]
    assert decide(h, ("metadata.version", 33, UPGRADE), validate_only=True).records == []


def test_refusals_in_kafkas_words() -> None:
    h = Harness(mv=21)
    d = decide(h, ("eligible.leader.replicas.version", 1, UPGRADE))
    assert (d.error_code, d.message, d.records) == (
        Errors.INVALID_UPDATE_VERSION,
        "Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version "
        "could not be set to 1 because it depends on metadata.version level 23", [])
    assert decide(h, ("share.version", 3, UPGRADE)).message == (
        "Invalid update version 3 for feature share.version. Local controller 1 only supports versions 0-2")
    assert decide(h, ("metadata.version", 20, UPGRADE)).message.endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe "
        "downgrade.")
    assert decide(h, ("group.version", 1, SAFE_DOWNGRADE)).message.endswith("Can't downgrade to a newer version.")
    assert decide(h, ("metadata.version", 14, UNSAFE_DOWNGRADE)).message == (
        "Unsupported metadata.version downgrade from 21 to 14. Unsafe metadata downgrade is not supported in "
        "this version.")
    assert decide(h, ("kraft.version", 0, SAFE_DOWNGRADE), kraft=1).message == (
        "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature.")
    # every voter must have registered (3.7-IV0 and later), and support the level
    assert decide(h, ("group.version", 1, UPGRADE), voters=(1, 2)).message == (
        "Invalid update version 1 for feature group.version. controller 2 has not registered, and may not "
        "support this feature")
    C = RegisterControllerRecord
    h.apply([(C(controller_id=2, features=[C.ControllerFeature(name="metadata.version", min_supported_version=1,
                                                               max_supported_version=21)]), 0)])
    assert decide(h, ("group.version", 1, UPGRADE), voters=(1, 2)).message == (
        "Invalid update version 1 for feature group.version. Controller 2 does not support this feature.")
    # and every registered broker (the harness's support 0-1 of kraft.version only)
    h.register(5)
    assert decide(h, ("group.version", 1, UPGRADE)).message == (
        "Invalid update version 1 for feature group.version. Broker 5 does not support this feature.")


def test_kraft_upgrade_is_the_callers_with_a_noop_record() -> None:
    h = Harness(mv=21)
    d = decide(h, ("kraft.version", 1, UPGRADE))
    assert (d.error_code, d.kraft_upgrade, names(d)) == (0, 1, [("NoOpRecord", "", None)])


def test_enabling_elr_removes_broker_level_min_isr() -> None:
    h = Harness(mv=33)
    h.apply([(ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"), 0),
             (ConfigRecord(resource_type=4, resource_name="7", name="min.insync.replicas", value="3"), 0)])
    d = decide(h, ("eligible.leader.replicas.version", 1, UPGRADE))
    assert names(d) == [("FeatureLevelRecord", "eligible.leader.replicas.version", 1),
                        ("ConfigRecord", "min.insync.replicas", None)]
    assert d.records[1][0].resource_name == "7"
