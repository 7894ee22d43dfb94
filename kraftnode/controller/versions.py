"""What the finalized ``metadata.version`` decides for the controller (Kafka 4.4's MetadataVersion).

Feature levels as Kafka numbers them (3.3-IV3 = 7 ... 3.9-IV0 = 21 ... 4.4-IV2 = 33, the
latest production level; the table is :mod:`kraftnode.features`); the record versions and
behaviours below follow ``MetadataVersion``'s methods of the same names in Kafka 4.4.0.
"""

from __future__ import annotations

from kraftnode.features import (
    LATEST_PRODUCTION_LEVEL,
    METADATA_VERSIONS,
    MINIMUM_VERSION_LEVEL,
    mv_name,
)

__all__ = [
    "MV_3_3_IV0", "MV_3_3_IV1", "MV_3_3_IV2", "MV_3_3_IV3", "MV_3_4_IV0", "MV_3_5_IV2", "MV_3_6_IV0",
    "MV_3_6_IV1", "MV_3_6_IV2", "MV_3_7_IV0", "MV_3_7_IV2", "MV_3_9_IV0", "MV_4_0_IV0", "MV_4_0_IV1",
    "MV_4_0_IV2", "MV_4_1_IV0", "MV_4_2_IV0", "MV_4_3_IV0", "MV_4_4_IV1", "MV_4_4_IV2",
    "LATEST_PRODUCTION_LEVEL", "MINIMUM_VERSION_LEVEL", "METADATA_VERSIONS", "MetadataVersion",
]

MV_3_2_IV0 = 3
MV_3_3_IV0 = 4
MV_3_3_IV1 = 5
MV_3_3_IV2 = 6
MV_3_3_IV3 = 7
MV_3_4_IV0 = 8
MV_3_5_IV2 = 11
MV_3_6_IV0 = 12
MV_3_6_IV1 = 13
MV_3_6_IV2 = 14
MV_3_7_IV0 = 15
MV_3_7_IV2 = 17
MV_3_9_IV0 = 21
MV_4_0_IV0 = 22
MV_4_0_IV1 = 23
MV_4_0_IV2 = 24
MV_4_1_IV0 = 26
MV_4_2_IV0 = 28
MV_4_3_IV0 = 30
MV_4_4_IV1 = 32
MV_4_4_IV2 = 33


class MetadataVersion:
    """One finalized metadata.version level and what it implies."""

    def __init__(self, level: int) -> None:
        self.level = level

    def __repr__(self) -> str:
        return f"MetadataVersion({self.level})"

    def __str__(self) -> str:
        return mv_name(self.level)

    def is_production(self) -> bool:
        return self.level <= LATEST_PRODUCTION_LEVEL

    def is_leader_recovery_supported(self) -> bool:
        return self.level >= MV_3_2_IV0

    def is_noop_record_supported(self) -> bool:
        return self.level >= MV_3_3_IV1

    def is_broker_registration_change_record_supported(self) -> bool:
        return self.level >= MV_3_3_IV2

    def is_in_controlled_shutdown_state_supported(self) -> bool:
        return self.level >= MV_3_3_IV3

    def is_migration_supported(self) -> bool:
        return self.level >= MV_3_4_IV0

    def is_scram_supported(self) -> bool:
        return self.level >= MV_3_5_IV2

    def is_leader_epoch_bump_required_on_isr_shrink(self) -> bool:
        return self.level < MV_3_6_IV0

    def is_metadata_transaction_supported(self) -> bool:
        return self.level >= MV_3_6_IV1

    def is_delegation_token_supported(self) -> bool:
        return self.level >= MV_3_6_IV2

    def is_controller_registration_supported(self) -> bool:
        return self.level >= MV_3_7_IV0

    def is_directory_assignment_supported(self) -> bool:
        return self.level >= MV_3_7_IV2

    def is_elr_supported(self) -> bool:
        """KIP-966: 4.0-IV1 and later (whether ELR is on is eligible.leader.replicas.version)."""
        return self.level >= MV_4_0_IV1

    def is_cordoned_log_dirs_supported(self) -> bool:
        """KIP-1066: 4.3-IV0 and later (RegisterBrokerRecord v4)."""
        return self.level >= MV_4_3_IV0

    def is_cidr_acl_supported(self) -> bool:
        return self.level >= MV_4_4_IV1

    def is_controller_unregistration_supported(self) -> bool:
        """UnregisterControllerRecord: 4.4-IV2 and later."""
        return self.level >= MV_4_4_IV2

    def register_broker_record_version(self) -> int:
        if self.is_cordoned_log_dirs_supported():
            return 4
        if self.is_directory_assignment_supported():
            return 3
        if self.is_migration_supported():
            return 2
        if self.is_in_controlled_shutdown_state_supported():
            return 1
        return 0

    def register_controller_record_version(self) -> int:
        if not self.is_controller_registration_supported():
            raise ValueError(f"Controller registration is not supported in MetadataVersion {self}")
        return 0

    def partition_record_version(self) -> int:
        if self.is_elr_supported():
            return 2
        return 1 if self.is_directory_assignment_supported() else 0

    def partition_change_record_version(self) -> int:
        if self.is_elr_supported():
            return 2
        return 1 if self.is_directory_assignment_supported() else 0
