"""The group coordinator: sans-IO and deterministic (Kafka 3.9's GroupMetadataManager and
OffsetMetadataManager, for one coordinator "partition": the whole raft log).

Everything comes in as arguments -- the request (the generated wire message and its
version), the time, a new member id the shell generated -- and goes out as a
:class:`Result`: the records to append to the log and the answers to give, each to the
*token* of the request it answers (a JoinGroup or SyncGroup may be answered by a later
call, or by :meth:`GroupCoordinator.poll` when a timer fires).  When a result holds
records, its answers are sent only once those records are committed (as Kafka completes
a write's response when its records are committed); an answer of a result without
records is sent at once.

State: every committed group record is replayed into a coordinator on the leader when it
takes over (:meth:`replay`, then :meth:`on_loaded`, which starts the members' session
timers from "now", as Kafka's ``onLoaded`` does).  From then on the leader's operations
change the state directly (classic groups, whose records are written but not replayed,
as in Kafka) or by replaying the records they write (offsets, KIP-848 consumer groups,
deletions).  A leader that loses its leadership throws its coordinator away
(:meth:`unload` answers the waiting requests NOT_COORDINATOR) and the next leader
starts from the committed records -- what Kafka does when a ``__consumer_offsets``
partition moves.

Layout: the state, replay, timers and result plumbing are :mod:`kraftnode.groups.core`; the
classic protocol :mod:`kraftnode.groups.classic_protocol`, KIP-848
:mod:`kraftnode.groups.consumer_protocol`, offsets :mod:`kraftnode.groups.offsets` -- each a
mixin over the core -- and this module composes them, with what spans both kinds of group
(loading, DescribeGroups, ListGroups, DeleteGroups).
"""

from __future__ import annotations

from typing import Any

from kraftnode.groups import records as rec
from kraftnode.groups.classic import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    State,
)
from kraftnode.groups.classic_protocol import ClassicProtocol, join_error, sync_error
from kraftnode.groups.consumer import (
    ConsumerGroup,
    MemberState,
)
from kraftnode.groups.consumer_protocol import ConsumerProtocol
from kraftnode.groups.core import (
    OffsetEntry,
    Result,
)
from kraftnode.groups.offsets import OffsetManager
from kraftnode.protocol import Errors
from kraftnode.protocol import generated as w

__all__ = ["GroupCoordinator", "Result", "OffsetEntry"]


class GroupCoordinator(ClassicProtocol, ConsumerProtocol, OffsetManager):
    """Groups and committed offsets of one coordinator (see the module doc): the classic and
    KIP-848 protocols and the offsets, each a mixin over :class:`kraftnode.groups.core.CoordinatorCore`."""

    def on_loaded(self, now: int) -> None:
        """Start every member's session timer from ``now`` (Kafka's onLoaded)."""
        self._now = now
        for grp in self.groups.values():
            if isinstance(grp, ClassicGroup):
                for m in grp.members.values():
                    self._reschedule_heartbeat(grp, m, m.session_timeout_ms)
            else:
                for cm in grp.members.values():
                    self._schedule_session_timeout(grp.group_id, cm.member_id)
                    if cm.state == MemberState.UNREVOKED_PARTITIONS:
                        self._schedule_rebalance_timeout(grp.group_id, cm)

    def unload(self) -> Result:
        """The node stops coordinating: waiting JoinGroup/SyncGroup requests are answered
        NOT_COORDINATOR (Kafka's onUnloaded); the coordinator is not used afterwards."""
        self._begin(self._now)
        for grp in self.groups.values():
            if not isinstance(grp, ClassicGroup):
                continue
            for m in grp.members.values():
                if m.awaiting_join is not None:
                    self._reply(m.awaiting_join, join_error(Errors.NOT_COORDINATOR, m.member_id))
                    m.awaiting_join = None
                if m.awaiting_sync is not None:
                    self._reply(m.awaiting_sync, sync_error(Errors.NOT_COORDINATOR))
                    m.awaiting_sync = None
        self._timers.clear()
        return self._end()

    # ================================================================== describe / list / delete
    def describe_groups(self, group_ids: list[str], version: int = 5) -> list[Any]:
        """Classic groups as DescribeGroups shows them. A group that is not there, or is
        not a classic group, is Dead: with no error before v6, with GROUP_ID_NOT_FOUND and
        Kafka's message (GroupMetadataManager.classicGroup) from v6 (KIP-1043)."""
        D = w.DescribeGroupsResponse
        out = []
        for gid in group_ids:
            grp = self.groups.get(gid)
            if not isinstance(grp, ClassicGroup):
                d = D.DescribedGroup(error_code=0, group_id=gid, group_state=State.DEAD.value,
                                     protocol_type="", protocol_data="", members=[])
                if version >= 6:
                    d.error_code = Errors.GROUP_ID_NOT_FOUND
                    d.error_message = (f"Group {gid} not found." if grp is None
                                       else f"Group {gid} is not a classic group.")
                out.append(d)
                continue
            stable = grp.state == State.STABLE
            members = [D.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(grp.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"") for m in grp.members.values()]
            out.append(D.DescribedGroup(error_code=0, group_id=gid, group_state=grp.state.value,
                                        protocol_type=grp.protocol_type or "",
                                        protocol_data=(grp.protocol_name or "") if stable else "",
                                        members=members))
        return out

    def list_groups(self, states: list[str], types: list[str]) -> list[Any]:
        L = w.ListGroupsResponse
        want_states = {s.strip().lower() for s in states}
        want_types = {t.strip().lower() for t in types}
        out = []
        for gid, grp in self.groups.items():
            if isinstance(grp, ClassicGroup):
                state, kind, ptype = grp.state.value, "classic", grp.protocol_type or ""
            else:
                state, kind, ptype = grp.state(), "consumer", CONSUMER_PROTOCOL_TYPE
            if want_states and state.lower() not in want_states:
                continue
            if want_types and kind not in want_types:
                continue
            out.append(L.ListedGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type=kind))
        return out

    def delete_groups(self, token: Any, group_ids: list[str], now: int,
                      refused: dict[str, int] | None = None) -> Result:
        self._begin(now)
        D = w.DeleteGroupsResponse
        results = []
        records: list[rec.Record] = []
        for gid in group_ids:
            code = (refused or {}).get(gid, 0)
            grp = self.groups.get(gid)
            if not code:
                if grp is None or (isinstance(grp, ClassicGroup) and grp.state == State.DEAD):
                    code = int(Errors.GROUP_ID_NOT_FOUND)
                elif isinstance(grp, ClassicGroup) and grp.state != State.EMPTY:
                    code = int(Errors.NON_EMPTY_GROUP)
                elif isinstance(grp, ConsumerGroup) and grp.members:
                    code = int(Errors.NON_EMPTY_GROUP)
            if not code:
                assert grp is not None
                for (t, p) in sorted(self.offsets.get(gid, {})):
                    records.append(rec.offset_tombstone(gid, t, p))
                if isinstance(grp, ClassicGroup):
                    records.append(rec.group_metadata(gid, None))
                else:
                    records.extend(self._consumer_group_tombstones(grp))
            results.append(D.DeletableGroupResult(group_id=gid, error_code=code))
        self._write(records, replay=True)
        for gid in group_ids:
            # an empty classic group with no GroupMetadata record (a simple group) goes too
            if any(r.group_id == gid and r.error_code == 0 for r in results):
                self.groups.pop(gid, None)
        self._reply(token, D(throttle_time_ms=0, results=results))
        return self._end()
