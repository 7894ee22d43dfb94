"""How a partition's leader, ISR and replicas change: Kafka's PartitionChangeBuilder.

Given a partition as the image holds it (a PartitionRecord with every change merged) and the
target state a caller asks for (an ISR, a replica list, a reassignment, an election type), the
builder elects a leader if the current one may not stay, completes a reassignment whose new
replicas are all in the ISR, and produces the one PartitionChangeRecord that says what changed
-- or nothing, when nothing would. Elections, as Kafka 4.4 makes them (with eligible leader
replicas when enabled: the rules in :mod:`kraftnode.controller.elr`):

* PREFERRED: the first target replica if it is in the ISR and acceptable, else the current
  leader if it still is, else the first other acceptable ISR member;
* ONLINE: the current leader if it is in the ISR and acceptable, else the first acceptable ISR
  member in replica order;
* UNCLEAN: as ONLINE, then any acceptable replica (the ISR becomes that replica alone and the
  leader recovery state RECOVERING).

With ELR enabled, an empty ISR lets an acceptable ELR member lead (it becomes the ISR), and with
ISR and ELR both empty the last known leader is elected (uncleanly) whatever the election type.

"Acceptable" is the caller's predicate (registered, unfenced, not shutting down, its directory
for the partition online). Every change bumps the partition epoch; a new leader (or a removed
replica, or an ISR shrink before metadata.version 3.6) bumps the leader epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from enum import Enum

from kraftnode.controller.elr import partition_change_record_version, populate_target_elr
from kraftnode.controller.result import Record
from kraftnode.controller.versions import MetadataVersion
from kraftnode.controller.view import UNASSIGNED_DIR
from kraftnode.protocol.generated.metadata import PartitionChangeRecord, PartitionRecord

__all__ = ["NO_LEADER", "NO_LEADER_CHANGE", "Election", "PartitionChangeBuilder", "RECOVERED", "RECOVERING",
           "has_preferred_leader", "reassignment_in_progress", "replica_directory"]

NO_LEADER = -1
NO_LEADER_CHANGE = -2
RECOVERED = 0
RECOVERING = 1
NO_RECOVERY_CHANGE = -1


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def has_preferred_leader(p: PartitionRecord) -> bool:
    return p.leader == (p.replicas[0] if p.replicas else NO_LEADER)


def reassignment_in_progress(p: PartitionRecord) -> bool:
    return bool(p.removing_replicas) or bool(p.adding_replicas)


def replica_directory(p: PartitionRecord, replica: int) -> uuid.UUID | None:
    """PartitionRegistration.directory (None: not a replica of the partition)."""
    dirs = list(getattr(p, "directories", None) or [])
    for i, r in enumerate(p.replicas):
        if r == replica:
            return dirs[i] if i < len(dirs) else uuid.UUID(int=0)  # MIGRATING when absent
    return None


def complete_reassignment(removing: list[int], adding: list[int], replicas: list[int],
                          target_isr: list[int]) -> tuple[list[int], list[int]] | None:
    """PartitionReassignmentReplicas.maybeCompleteReassignment: (replicas, isr) once done."""
    if not removing and not adding:
        return None
    new_isr = list(target_isr)
    new_replicas = list(replicas)
    if removing:
        new_isr = [r for r in target_isr if r not in removing]
        if not new_isr:
            return None
        new_replicas = [r for r in replicas if r not in removing]
        if not new_replicas:
            return None
    if not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


class PartitionChangeBuilder:
    def __init__(self, partition: PartitionRecord, topic_id: uuid.UUID, partition_id: int,
                 is_acceptable_leader: Callable[[int], bool], mv: MetadataVersion, min_isr: int = 1,
                 elr_enabled: bool = False) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.mv = mv
        self.target_isr = list(partition.isr)
        self.target_replicas = list(partition.replicas)
        self.target_removing = list(partition.removing_replicas)
        self.target_adding = list(partition.adding_replicas)
        self.target_recovery = partition.leader_recovery_state
        dirs = list(getattr(partition, "directories", None) or [])
        self.target_directories: dict[int, uuid.UUID] = {
            r: (dirs[i] if i < len(dirs) else uuid.UUID(int=0)) for i, r in enumerate(partition.replicas)}
        self.election = Election.ONLINE
        self.default_dir: Callable[[int], uuid.UUID] = lambda _b: UNASSIGNED_DIR
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.target_elr = list(partition.eligible_leader_replicas or [])
        self.target_lkelr = list(partition.last_known_elr or [])
        self.unclean_shutdown_replicas: list[int] | None = None
        self.use_last_known_leader = True  # Kafka 4.4 always sets it (useLastKnownLeaderInBalancedRecovery)

    # ------------------------------------------------------------------ targets
    def set_target_isr(self, isr: list[int]) -> PartitionChangeBuilder:
        self.target_isr = list(isr)
        return self

    def set_target_replicas(self, replicas: list[int]) -> PartitionChangeBuilder:
        self.target_replicas = list(replicas)
        return self

    def set_target_removing(self, removing: list[int]) -> PartitionChangeBuilder:
        self.target_removing = list(removing)
        return self

    def set_target_adding(self, adding: list[int]) -> PartitionChangeBuilder:
        self.target_adding = list(adding)
        return self

    def set_target_leader_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self.target_recovery = state
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self.election = election
        return self

    def set_directory(self, broker_id: int, directory: uuid.UUID) -> PartitionChangeBuilder:
        self.target_directories[broker_id] = directory
        return self

    def set_unclean_shutdown_replicas(self, replicas: list[int]) -> PartitionChangeBuilder:
        self.unclean_shutdown_replicas = list(replicas)
        return self

    def set_default_dir_provider(self, provider: Callable[[int], uuid.UUID]) -> PartitionChangeBuilder:
        self.default_dir = provider
        return self

    # ------------------------------------------------------------------ election
    def _valid_new_leader(self, replica: int) -> bool:
        # in the ISR, or in the ELR when the ISR is empty
        return (replica in self.target_isr or (not self.target_isr and replica in self.target_elr)) \
            and self.is_acceptable_leader(replica)

    def _last_known_leader(self) -> bool:
        """canElectLastKnownLeader."""
        if not self.elr_enabled or not self.use_last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        lkelr = list(self.partition.last_known_elr or [])
        return len(lkelr) == 1 and self.is_acceptable_leader(lkelr[0])  # 4.4: only a live last known leader

    def elect_leader(self) -> tuple[int, bool]:
        """(leader, unclean)."""
        current = self.partition.leader
        if self.election is Election.PREFERRED:
            preferred = self.target_replicas[0] if self.target_replicas else NO_LEADER
            if self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(current):
                return current, False
            for r in self.target_replicas[1:]:
                if self._valid_new_leader(r):
                    return r, False
            if self._last_known_leader():
                return list(self.partition.last_known_elr or [])[0], True
            return NO_LEADER, False
        if self._valid_new_leader(current):
            return current, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self._last_known_leader():
            return list(self.partition.last_known_elr or [])[0], True
        if self.election is Election.UNCLEAN:
            for r in self.target_replicas:
                if self.is_acceptable_leader(r):
                    return r, True
        return NO_LEADER, False

    # ------------------------------------------------------------------ build
    def build(self) -> Record | None:
        """The PartitionChangeRecord (with its version), or None when nothing changes."""
        p = self.partition
        rec = PartitionChangeRecord(topic_id=self.topic_id, partition_id=self.partition_id)
        done = complete_reassignment(self.target_removing, self.target_adding, self.target_replicas,
                                     self.target_isr)
        if done is not None:
            self.target_replicas, self.target_isr = done
            self.target_removing = []
            self.target_adding = []
        if self.elr_enabled:
            self.target_elr, self.target_lkelr = populate_target_elr(
                self.min_isr, list(p.isr), self.target_isr, self.target_elr, self.target_lkelr,
                self.unclean_shutdown_replicas)
        leader, unclean = self.elect_leader()
        if leader != p.leader:
            if leader in self.target_elr:  # elected from the ELR: it becomes the ISR
                self.target_isr = [leader]
                self.target_elr = [r for r in self.target_elr if r != leader]
            rec.leader = leader
            if unclean:
                rec.isr = [leader]
                if p.leader_recovery_state != RECOVERING and self.mv.is_leader_recovery_supported():
                    rec.leader_recovery_state = RECOVERING
        # a reassignment that drops a replica bumps the leader epoch
        if rec.leader == NO_LEADER_CHANGE and not set(p.replicas) <= set(self.target_replicas):
            rec.leader = p.leader
        self._record_elr(rec)
        # with ELR enabled the ISR may become empty
        if rec.isr is None and (self.target_isr or self.elr_enabled) and self.target_isr != list(p.isr):
            rec.isr = list(self.target_isr)
        if (self.mv.is_leader_epoch_bump_required_on_isr_shrink() and rec.leader == NO_LEADER_CHANGE
                and rec.isr is not None and not set(p.isr) <= set(rec.isr)):
            rec.leader = p.leader
        self._last_known_leader_change(rec)
        self._assignment_changes(rec)
        if self.target_recovery != p.leader_recovery_state:
            rec.leader_recovery_state = self.target_recovery
        if _is_noop(rec):
            return None
        return rec, partition_change_record_version(self.mv)

    def _record_elr(self, rec: PartitionChangeRecord) -> None:
        """maybeUpdateRecordElr."""
        p = self.partition
        clean = rec.isr is None  # an unclean election has set the ISR already
        if not clean or not self.elr_enabled:
            self.target_elr = []
            self.target_lkelr = []
        if self.target_elr != list(p.eligible_leader_replicas or []):
            rec.eligible_leader_replicas = list(self.target_elr)
        lkelr = list(p.last_known_elr or [])
        if self.use_last_known_leader and len(lkelr) == 1 and (
                rec.leader == NO_LEADER or (rec.leader == NO_LEADER_CHANGE and p.leader == NO_LEADER)):
            self.target_lkelr = lkelr
        if self.use_last_known_leader:
            return  # the last known leader is recorded by _last_known_leader_change
        if self.target_lkelr != lkelr:
            rec.last_known_elr = list(self.target_lkelr)

    def _last_known_leader_change(self, rec: PartitionChangeRecord) -> None:
        """maybeUpdateLastKnownLeader."""
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        lkelr = list(p.last_known_elr or [])
        if rec.leader == NO_LEADER and not lkelr:
            rec.last_known_elr = [p.leader]  # the partition loses its leader: remember it
        elif rec.leader >= 0 and lkelr:
            rec.last_known_elr = []  # a new leader: forget it

    def _assignment_changes(self, rec: PartitionChangeRecord) -> None:
        p = self.partition
        if self.target_replicas:
            if self.mv.is_directory_assignment_supported():
                dirs = [self.target_directories[r] if r in self.target_directories else self.default_dir(r)
                        for r in self.target_replicas]
                if dirs != list(getattr(p, "directories", None) or []):
                    rec.directories = dirs
            if self.target_replicas != list(p.replicas):
                rec.replicas = list(self.target_replicas)
        if self.target_removing != list(p.removing_replicas):
            rec.removing_replicas = list(self.target_removing)
        if self.target_adding != list(p.adding_replicas):
            rec.adding_replicas = list(self.target_adding)


def _is_noop(rec: PartitionChangeRecord) -> bool:
    """PartitionChangeBuilder.changeRecordIsNoOp."""
    return (rec.isr is None and rec.leader == NO_LEADER_CHANGE and rec.replicas is None
            and rec.removing_replicas is None and rec.adding_replicas is None
            and rec.leader_recovery_state == NO_RECOVERY_CHANGE and rec.directories is None
            and rec.eligible_leader_replicas is None and rec.last_known_elr is None)
