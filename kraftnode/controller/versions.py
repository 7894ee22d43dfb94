"""What the finalized ``metadata.version`` decides for the controller (Kafka's MetadataVersion).

Feature levels as Kafka 3.9 numbers them (3.3-IV0 = 4 ... 3.9-IV0 = 21); the record versions
and behaviours below follow ``MetadataVersion``'s methods of the same names.
"""

from __future__ import annotations

__all__ = [
    "MV_3_3_IV0", "MV_3_3_IV1", "MV_3_3_IV2", "MV_3_3_IV3", "MV_3_4_IV0", "MV_3_6_IV0",
    "MV_3_6_IV1", "MV_3_7_IV0", "MV_3_7_IV2", "MV_3_9_IV0", "MetadataVersion",
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
MV_3_7_IV0 = 15
MV_3_7_IV2 = 17
MV_3_9_IV0 = 21


class MetadataVersion:
    """One finalized metadata.version level and what it implies."""

    def __init__(self, level: int) -> None:
        self.level = level

    def __repr__(self) -> str:
        return f"MetadataVersion({self.level})"

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

    def is_leader_epoch_bump_required_on_isr_shrink(self) -> bool:
        return self.level < MV_3_6_IV0

    def is_directory_assignment_supported(self) -> bool:
        return self.level >= MV_3_7_IV2

    def is_controller_unregistration_supported(self) -> bool:
        """UnregisterControllerRecord: a 4.x level only, which kraftnode does not finalize yet
        (issue 37), so UnregisterController is refused as Kafka 4.4 refuses it at 3.9-IV0."""
        return False

    def is_elr_supported(self) -> bool:
        return False  # 4.0-IV0 and later only; a 3.9 controller never finalizes it

    def register_broker_record_version(self) -> int:
        if self.is_directory_assignment_supported():
            return 3
        if self.is_migration_supported():
            return 2
        if self.is_in_controlled_shutdown_state_supported():
            return 1
        return 0

    def partition_record_version(self) -> int:
        return 1 if self.is_directory_assignment_supported() else 0

    def partition_change_record_version(self) -> int:
        return 1 if self.is_directory_assignment_supported() else 0

    def is_cordoned_log_dirs_supported(self) -> bool:
        """KIP-1066: 4.3-IV0 (level 30) and later."""
        return self.level >= 30
