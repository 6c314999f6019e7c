"""Rebuilding a group's history from ``__consumer_offsets`` at start ("replayed" events).

The records keep the outcome of each decision, not its cause: a classic group's
record is written at each new generation (members, leader, protocol) and again
with its assignment; a consumer group's records hold its epoch, its target
assignment's epoch and each member's epoch and partitions. While the broker loads
the log, ``ReplayNarrator`` compares each record with the one before it for the
same group and records what changed as events marked ``replayed``, timed by the
record (its own timestamp field when it has one, else the batch's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import group_records as gr
from . import history as ev
from .history_moves import Owners, owners_of, partition_counts, partition_moves


@dataclass(slots=True)
class _ClassicSeen:
    generation: int = -1
    members: tuple[str, ...] = ()
    assigned: bool = False
    owners: Owners | None = None


@dataclass(slots=True)
class _ConsumerSeen:
    epoch: int = -1
    target_epoch: int = -1
    members: set[str] = field(default_factory=set)
    member_epochs: dict[str, int] = field(default_factory=dict)


class ReplayNarrator:
    def __init__(self, history: ev.GroupHistory) -> None:
        self.history = history
        self._classic: dict[str, _ClassicSeen] = {}
        self._consumer: dict[str, _ConsumerSeen] = {}

    def clear(self) -> None:
        """Loading is over: forget what was seen (live events take over)."""
        self._classic.clear()
        self._consumer.clear()

    # ---------------------------------------------------------------- classic groups

    def group_metadata(self, group_id: str, value: gr.GroupMetadataValue | None, record_ms: int) -> None:
        seen = self._classic.setdefault(group_id, _ClassicSeen())
        if value is None:
            self._classic.pop(group_id, None)
            return
        at = value.current_state_timestamp if value.current_state_timestamp >= 0 else record_ms
        members = tuple(m.member_id for m in value.members)
        events: list[ev.GroupEvent] = []
        if value.generation != seen.generation:
            seen.generation, seen.assigned = value.generation, False
            events.append(
                ev.GenerationStarted(
                    group_id=group_id,
                    at_ms=at,
                    replayed=True,
                    generation=value.generation,
                    member_ids=members,
                    protocol=value.protocol,
                    leader=value.leader if members else None,
                )
            )
        seen.members = members
        assignments = {m.member_id: bytes(m.assignment) for m in value.members}
        if not seen.assigned and any(assignments.values()):
            seen.assigned = True
            owners = owners_of(assignments) if value.protocol_type == "consumer" else None
            events.append(
                ev.AssignmentSent(
                    group_id=group_id,
                    at_ms=at,
                    replayed=True,
                    generation=value.generation,
                    decoded=owners is not None,
                    moves=() if owners is None else partition_moves(seen.owners, owners),
                    partitions={} if owners is None else {m: 0 for m in members} | partition_counts(owners),
                )
            )
            seen.owners = owners
        self.history.record(events)

    # ---------------------------------------------------------------- consumer (KIP-848) groups

    def consumer_record(self, key: object, value: object, record_ms: int) -> None:
        group_id = getattr(key, "group", None)
        if not isinstance(group_id, str):
            return
        seen = self._consumer.setdefault(group_id, _ConsumerSeen())
        event: ev.GroupEvent | None = None
        if isinstance(key, gr.ConsumerGroupMetadataKey):
            if isinstance(value, gr.ConsumerGroupMetadataValue) and value.epoch != seen.epoch:
                seen.epoch = value.epoch
                event = ev.GroupEpochBumped(
                    group_id=group_id, at_ms=record_ms, replayed=True, epoch=value.epoch, cause="replayed"
                )
        elif isinstance(key, gr.ConsumerGroupTargetAssignmentMetadataKey):
            if isinstance(value, gr.ConsumerGroupTargetAssignmentMetadataValue) and (
                value.assignment_epoch != seen.target_epoch
            ):
                seen.target_epoch = value.assignment_epoch
                at = value.assignment_timestamp if value.assignment_timestamp > 0 else record_ms
                event = ev.TargetAssignmentComputed(
                    group_id=group_id, at_ms=at, replayed=True, epoch=value.assignment_epoch
                )
        elif isinstance(key, gr.ConsumerGroupMemberMetadataKey):
            member_id = key.member_id
            if value is None:
                if member_id in seen.members:
                    seen.members.discard(member_id)
                    seen.member_epochs.pop(member_id, None)
                    event = ev.MemberFenced(
                        group_id=group_id, at_ms=record_ms, replayed=True, member_id=member_id, epoch=-1,
                        cause="replayed",
                    )
            elif member_id not in seen.members:
                seen.members.add(member_id)
                instance = getattr(value, "instance_id", None)
                event = ev.MemberJoined(
                    group_id=group_id,
                    at_ms=record_ms,
                    replayed=True,
                    member_id=member_id,
                    instance_id=instance,
                    client_id=getattr(value, "client_id", ""),
                    client_host=getattr(value, "client_host", ""),
                )
        elif isinstance(key, gr.ConsumerGroupCurrentMemberAssignmentKey) and isinstance(
            value, gr.ConsumerGroupCurrentMemberAssignmentValue
        ) and seen.member_epochs.get(key.member_id) != value.member_epoch:
            seen.member_epochs[key.member_id] = value.member_epoch
            event = ev.MemberEpochAdvanced(
                group_id=group_id,
                at_ms=record_ms,
                replayed=True,
                member_id=key.member_id,
                from_epoch=value.previous_member_epoch,
                to_epoch=value.member_epoch,
                state=_member_state_name(value.state),
            )
        if event is not None:
            self.history.record((event,))


def _member_state_name(state: int) -> str:
    return {0: "stable", 1: "unrevoked-partitions", 2: "unreleased-partitions"}.get(state, "unknown")
