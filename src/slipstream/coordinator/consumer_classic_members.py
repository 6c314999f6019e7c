"""Classic-protocol members inside a consumer (KIP-848) group: JoinGroup, SyncGroup,
Heartbeat and LeaveGroup answered as Kafka 4's ``classicGroup*ToConsumerGroup`` do.

A consumer group holds classic members after an online upgrade (every member of
the classic group it was) or when a classic consumer joins it. They take part in
the group like the others: the server-side assignor assigns them, and they are
reconciled by the same rules (revoke before another member gets a partition),
only the steps are classic requests:

- JoinGroup updates the member (subscription and owned partitions from its
  embedded consumer protocol), bumps the group epoch if its subscription changed,
  and reconciles it; the answer (no leader, no member list) carries its epoch as
  the generation, once the records are durable. An eager member joins owning
  nothing, so its revocation is complete; a cooperative one lists what it still
  owns, and gets a smaller assignment to revoke first when it must give some up.
- SyncGroup returns its current assignment; REBALANCE_IN_PROGRESS when the group
  moved past its epoch (unless it is still revoking).
- Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin: the group epoch is
  ahead of it, it has partitions to revoke, or partitions it waited for are free.
- LeaveGroup removes it and bumps the group epoch.

Timers (like Kafka's): the member's classic session timeout, refreshed by each of
its requests; after a JoinGroup answer it must sync within its rebalance timeout;
once told to rejoin it must join within its rebalance timeout. Any of them
expiring fences the member.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..protocol import consumer_protocol as cp
from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import JoinGroupRequest
from ..protocol.apis.leave_group import (
    LeaveGroupRequest,
    LeaveGroupRequestMemberIdentity,
    LeaveGroupResponseMemberResponse,
)
from ..protocol.apis.sync_group import SyncGroupRequest, SyncGroupResponse
from ..protocol.errors import ErrorCode
from ..protocol.uuid_strings import random_uuid_string
from . import consumer_records as crec
from . import history as ev
from .append_errors import append_error_for_group
from .classic_responses import join_response, leave_response
from .consumer import ConsumerGroup, ConsumerGroupMember, MemberState, replacement_for_static_member
from .consumer.member import ClassicMemberMetadata
from .consumer_group_manager import ConsumerGroupManager
from .consumer_rebalance import MemberChange
from .migration import to_assignment_bytes, to_partition_map
from .result import CoordinatorResult, Record, RequestContext

log = logging.getLogger("slipstream.coordinator")


def join_timeout_key(group_id: str, member_id: str) -> str:
    return f"consumer-classic-join-{group_id}-{member_id}"


def sync_timeout_key(group_id: str, member_id: str) -> str:
    return f"consumer-classic-sync-{group_id}-{member_id}"


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ClassicMembers:
    """The classic APIs for members of consumer groups (the group exists and has members)."""

    def __init__(self, manager: ConsumerGroupManager, new_member_id: Callable[[str], str] | None = None) -> None:
        """``new_member_id(client_id)``: the id of a classic member joining without one (Kafka:
        its random Uuid string in a consumer group, protocol/uuid_strings.py); the simulator injects one
        so a seed replays exactly."""
        self.manager = manager
        self.sessions = manager.sessions
        self.timer = manager.timer
        self.new_member_id = new_member_id or (lambda _client_id: random_uuid_string())

    # ================================================================ JoinGroup

    def join(self, ctx: RequestContext, req: JoinGroupRequest, group: ConsumerGroup, now_ms: int) -> CoordinatorResult:
        version = ctx.api_version
        try:
            return self._join(ctx, req, group, now_ms)
        except _Refused as refused:
            log.info("group %s: classic JoinGroup of %r refused: %s", group.group_id, req.member_id, refused)
            return CoordinatorResult(response=join_response(version, error=refused.code, member_id=req.member_id))

    def _join(self, ctx: RequestContext, req: JoinGroupRequest, group: ConsumerGroup, now_ms: int) -> CoordinatorResult:
        version = ctx.api_version
        group_id = group.group_id
        manager = self.manager
        config = manager.config
        instance_id = req.group_instance_id
        member_id = req.member_id
        unknown = member_id == ""
        if unknown:
            member_id = self.new_member_id(ctx.client_id)
        if len(group.members) >= config.consumer_group_max_size and not group.has_member(member_id):
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED, "the consumer group is full")
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        names = frozenset(name for name, _ in protocols)
        if not protocols or not group.supports_classic_protocols(req.protocol_type, names):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"member {member_id}'s protocols are not supported")
        if unknown and instance_id is None and version >= 4:
            # KIP-394: a dynamic member gets its id first, and joins again with it.
            return CoordinatorResult(
                response=join_response(version, error=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
            )
        try:
            _v, subscription = cp.decode_subscription(protocols[0][1])
        except ValueError as exc:
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"malformed subscription: {exc}") from exc

        partition = manager.partition_for(group_id)
        records: list[Record] = []
        events: list[ev.GroupEvent] = []
        replaced: ConsumerGroupMember | None = None
        existing = group.static_member(instance_id)
        if instance_id is not None and existing is None and not unknown:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
        if instance_id is not None and existing is not None and existing.member_id != member_id:
            if not unknown:
                raise _Refused(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"static member {member_id} of instance {instance_id} was fenced by {existing.member_id}",
                )
            # A static member back under a new id takes its previous incarnation's place.
            member = replacement_for_static_member(existing, member_id)
            replaced = existing
            records += crec.member_tombstones(partition, group_id, existing.member_id)
            records.append(crec.member_subscription_record(partition, group_id, member))
            records.append(
                crec.target_assignment_record(partition, group_id, member_id, group.target_assignment_of(existing.member_id))
            )
            records.append(crec.current_assignment_record(partition, group_id, member))
            self.cancel_timers(group_id, existing.member_id)
        else:
            found = group.member(member_id)
            if found is None and not unknown and instance_id is None and version >= 4:
                # A member id the group does not know (fenced meanwhile): Kafka creates it again.
                log.info("group %s: classic member %s unknown: joining anew", group_id, member_id)
            member = found if found is not None else ConsumerGroupMember(member_id=member_id)
        is_new = not group.has_member(member.member_id) and replaced is None
        if is_new or replaced is not None:
            events.append(
                ev.MemberJoined(
                    group_id=group_id,
                    at_ms=now_ms,
                    member_id=member_id,
                    how=ev.JOINED_STATIC_REPLACEMENT if replaced is not None else ev.JOINED_NEW,
                    instance_id=instance_id,
                    replaced_member_id=None if replaced is None else replaced.member_id,
                    client_id=ctx.client_id,
                    client_host=ctx.client_host,
                )
            )
            log.info("group %s: member %s joins with the classic protocol", group_id, member_id)

        updated = member.with_subscription(
            topic_names=frozenset(subscription.topics),
            rack_id=subscription.rack_id,
            rebalance_timeout_ms=None if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms,
            instance_id=instance_id,
        ).replace(
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, protocols),
        )
        if updated != member:
            records.append(crec.member_subscription_record(partition, group_id, updated))
        owned = to_partition_map(manager.topics(), subscription.owned_partitions)
        change = MemberChange(
            group, member, updated, owned, now_ms, records, events, replaced=replaced, is_new=is_new
        )
        reconciled, _target_epoch, _bumped = manager.advance_member(change)
        protocol_name = protocols[0][0]
        response = join_response(
            version,
            member_id=member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=cp.PROTOCOL_TYPE,
            protocol_name=protocol_name,
        )
        session_ms = req.session_timeout_ms
        rebalance_ms = updated.rebalance_timeout_ms

        def joined() -> None:
            self.timer.cancel(join_timeout_key(group_id, member_id))
            self.sessions.schedule_session_timeout(group_id, member_id, session_ms)
            self._schedule_sync_timeout(group_id, member_id, rebalance_ms)

        if not records:
            joined()
            return CoordinatorResult(response=response, events=events)

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                return CoordinatorResult(
                    response=join_response(version, error=append_error_for_group(error), member_id=member_id)
                )
            joined()
            return CoordinatorResult(response=response, events=events)

        return CoordinatorResult(records=records, after_append=after_append)

    # ================================================================ SyncGroup

    def sync(self, req: SyncGroupRequest, group: ConsumerGroup, now_ms: int) -> CoordinatorResult:
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != member.member_epoch:
                raise _Refused(ErrorCode.ILLEGAL_GENERATION, "generation is not the member epoch")
            classic = member.classic
            assert classic is not None
            if req.protocol_type is not None and req.protocol_type != cp.PROTOCOL_TYPE:
                raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol type differs")
            if req.protocol_name is not None and req.protocol_name != classic.protocol_name:
                raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol name differs")
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                # A new epoch since its join: it rejoins first (unless it is still revoking).
                self._schedule_join_timeout_if_absent(group.group_id, member)
                raise _Refused(ErrorCode.REBALANCE_IN_PROGRESS, "the group moved on: rejoin")
        except _Refused as refused:
            return CoordinatorResult(response=SyncGroupResponse(error_code=refused.code, assignment=b""))
        self.timer.cancel(sync_timeout_key(group.group_id, member.member_id))
        self.sessions.schedule_session_timeout(group.group_id, member.member_id, classic.session_timeout_ms)
        assignment = to_assignment_bytes(
            self.manager.topics(), member.assigned_partitions, dict(classic.protocols)[classic.protocol_name]
        )
        return CoordinatorResult(
            response=SyncGroupResponse(
                error_code=ErrorCode.NONE,
                protocol_type=req.protocol_type,
                protocol_name=req.protocol_name,
                assignment=assignment,
            )
        )

    # ================================================================ Heartbeat

    def heartbeat(self, req: HeartbeatRequest, group: ConsumerGroup, now_ms: int) -> CoordinatorResult:
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != member.member_epoch:
                raise _Refused(ErrorCode.ILLEGAL_GENERATION, "generation is not the member epoch")
        except _Refused as refused:
            return CoordinatorResult(response=HeartbeatResponse(error_code=refused.code))
        assert member.classic is not None
        self.sessions.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
        error = ErrorCode.NONE
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member, self.manager.topics().name_of)
            )
        ):
            error = ErrorCode.REBALANCE_IN_PROGRESS
            self._schedule_join_timeout_if_absent(group.group_id, member)
        return CoordinatorResult(response=HeartbeatResponse(error_code=error))

    # ================================================================ LeaveGroup

    def leave(self, ctx: RequestContext, req: LeaveGroupRequest, group: ConsumerGroup, now_ms: int) -> CoordinatorResult:
        version = ctx.api_version
        identities = (
            [LeaveGroupRequestMemberIdentity(member_id=req.member_id)] if version <= 2 else list(req.members)
        )
        answers: list[LeaveGroupResponseMemberResponse] = []
        leaving: list[ConsumerGroupMember] = []
        events: list[ev.GroupEvent] = []
        for identity in identities:
            member_id, instance_id = identity.member_id, identity.group_instance_id
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    found = group.static_member(instance_id)
                    if found is None:
                        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
                    if member_id and found.member_id != member_id:
                        raise _Refused(ErrorCode.FENCED_INSTANCE_ID, f"instance {instance_id} is {found.member_id}")
                    member = self._classic_member(group, found.member_id, None)
                    member_id = member.member_id
            except _Refused as refused:
                answers.append(
                    LeaveGroupResponseMemberResponse(
                        member_id=member_id, group_instance_id=instance_id, error_code=refused.code
                    )
                )
                continue
            if member not in leaving:
                leaving.append(member)
                log.info("group %s: classic member %s left", group.group_id, member_id)
                events.append(
                    ev.MemberLeft(group_id=group.group_id, at_ms=now_ms, member_id=member_id, instance_id=instance_id)
                )
            answers.append(
                LeaveGroupResponseMemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=0)
            )
        response = leave_response(version, ErrorCode.NONE, answers)
        if not leaving:
            return CoordinatorResult(response=response)
        records = self.sessions.removal_records(group, leaving)
        epoch = group.group_epoch + 1
        events.append(ev.GroupEpochBumped(group_id=group.group_id, at_ms=now_ms, epoch=epoch, cause="classic members left"))

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                return CoordinatorResult(response=leave_response(version, append_error_for_group(error), []))
            for m in leaving:
                self.cancel_timers(group.group_id, m.member_id)
            return CoordinatorResult(response=response, events=events)

        return CoordinatorResult(records=records, after_append=after_append)

    # ================================================================ helpers and timers

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.member(member_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group.group_id}")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"instance id {instance_id} is unknown")
            if member.member_id != member_id:
                raise _Refused(ErrorCode.FENCED_INSTANCE_ID, f"instance {instance_id} is {member.member_id}")
        if not member.uses_classic_protocol:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member.member_id} does not use the classic protocol")
        return member

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.sessions.cancel_timers(group_id, member_id)
        self.timer.cancel(join_timeout_key(group_id, member_id))
        self.timer.cancel(sync_timeout_key(group_id, member_id))

    def _fence_later(self, group_id: str, member_id: str, why: str) -> Callable[[int], CoordinatorResult]:
        def expire(now_ms: int) -> CoordinatorResult:
            group = self.manager.groups.get(group_id)
            member = None if group is None else group.member(member_id)
            if group is None or member is None:
                return CoordinatorResult()
            log.info("group %s: classic member %s fenced: %s", group_id, member_id, why)
            self.timer.cancel(join_timeout_key(group_id, member_id))
            self.timer.cancel(sync_timeout_key(group_id, member_id))
            return self.sessions.fence(group, member, now_ms, "session-expired")

        return expire

    def _schedule_sync_timeout(self, group_id: str, member_id: str, rebalance_ms: int) -> None:
        delay = rebalance_ms if rebalance_ms > 0 else self.manager.timeouts(group_id).session_timeout_ms
        self.timer.schedule(
            sync_timeout_key(group_id, member_id),
            delay,
            self._fence_later(group_id, member_id, "it did not sync within its rebalance timeout"),
        )

    def _schedule_join_timeout_if_absent(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = join_timeout_key(group_id, member.member_id)
        if self.timer.is_scheduled(key):
            return
        delay = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else (
            self.manager.timeouts(group_id).session_timeout_ms
        )
        self.timer.schedule(
            key, delay, self._fence_later(group_id, member.member_id, "it did not rejoin within its rebalance timeout")
        )


__all__ = ["ClassicMembers", "join_timeout_key", "sync_timeout_key"]
