"""JoinGroup of the classic protocol: new members, known members, static members.

One ``JoinOperation`` carries the request through the decisions (the request, its
context, the group, the parsed protocols, the rebalance timeout, this request's
parked handle, the effects collected so far, the time), so each step reads as a
function of the operation. A step returns the immediate answer, or None when the
request stays parked and its answer comes later as a completion.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol import consumer_protocol as cp
from ..protocol.apis.join_group import JoinGroupRequest, JoinGroupResponse
from ..protocol.apis.sync_group import SyncGroupResponse
from ..protocol.errors import ErrorCode
from ..protocol.schema import Struct
from . import history as ev
from . import records as rec
from .append_errors import append_error_for_group
from .classic_rebalance import ClassicRebalance
from .classic_responses import UNKNOWN_MEMBER_ID, join_response
from .effects import Effects
from .group import ClassicGroup
from .member import Member, Protocols
from .result import CoordinatorResult, Pending, RequestContext
from .state import GroupState

log = logging.getLogger("slipstream.coordinator")

JOIN_GROUP_KEY = 11


@dataclass(slots=True)
class JoinOperation:
    ctx: RequestContext
    req: JoinGroupRequest
    group: ClassicGroup
    protocols: Protocols
    rebalance_timeout_ms: int
    own: Pending  # this request's handle, should it stay parked
    fx: Effects
    now_ms: int

    @property
    def version(self) -> int:
        return self.ctx.api_version


class ClassicJoin:
    def __init__(
        self,
        rebalance: ClassicRebalance,
        new_pending: Callable[[int, int], Pending],
        new_member_id: Callable[[str], str],
    ) -> None:
        self.rebalance = rebalance
        self._new_pending = new_pending
        self._new_member_id = new_member_id

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, now_ms: int) -> CoordinatorResult:
        rb = self.rebalance
        version = ctx.api_version
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        protocols: Protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        rebalance_timeout = req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
        if version > 0 and rebalance_timeout < 0:
            rebalance_timeout = req.session_timeout_ms
        own = self._new_pending(JOIN_GROUP_KEY, version)

        group = rb.groups.get(req.group_id)
        created = group is None
        if group is None:
            if not is_unknown:
                return CoordinatorResult(
                    response=join_response(version, error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id)
                )
            group = rb.get_or_create(req.group_id, now_ms)

        op = JoinOperation(ctx, req, group, protocols, rebalance_timeout, own, Effects(), now_ms)
        if not self._accepts_joining_member(group, req.member_id):
            group.remove(req.member_id)
            rb.sessions.cancel(group.group_id, req.member_id)
            response: Struct | None = join_response(version, error=ErrorCode.GROUP_MAX_SIZE_REACHED)
        elif is_unknown:
            response = self._join_new_member(op)
        else:
            response = self._join_existing_member(op)

        if created and group.state is GroupState.EMPTY and not group.members and not group.pending_join_members:
            # The join failed before the group got anyone: do not keep an empty shell.
            rb.groups.pop(group.group_id, None)
        return op.fx.result(op.own, response)

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        state = group.state
        max_size = self.rebalance.config.group_max_size
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            # Existing members already waiting are kept; new ones only while there is room.
            # (Counting awaiting members lets a shrunk group.max.size kick out late rejoiners.)
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join() < max_size
        return member_id in group.members or group.num_members < max_size

    def _join_new_member(self, op: JoinOperation) -> Struct | None:
        group, req, version = op.group, op.req, op.version
        if group.state is GroupState.DEAD:
            return join_response(version, error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in op.protocols]):
            return join_response(version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        instance_id = req.group_instance_id
        new_id = self._new_member_id(instance_id if instance_id is not None else op.ctx.client_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                log.info(
                    "group %s: static member %s rejoins with a new member id in state %s; "
                    "replacing %s with %s", group.group_id, instance_id, group.state, existing, new_id,
                )
                self._update_static_member(op, existing, new_id)
                return None  # parked: answered later as a completion
            self._add_member_and_rebalance(op, new_id)
            return None  # parked: answered later as a completion
        if version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.add_pending_member(new_id)
            if group.in_initial_delay:
                group.new_member_added = True  # it rejoins within a round trip: keep waiting for it
            self.rebalance.sessions.schedule(group.group_id, new_id, req.session_timeout_ms)
            log.info("group %s: new member gets id %s and must rejoin with it", group.group_id, new_id)
            return join_response(version, error=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
        self._add_member_and_rebalance(op, new_id)
        return None  # parked: answered later as a completion

    def _join_existing_member(self, op: JoinOperation) -> Struct | None:
        group, req, version = op.group, op.req, op.version
        member_id = req.member_id
        instance_id = req.group_instance_id
        if group.state is GroupState.DEAD:
            return join_response(version, error=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in op.protocols]):
            return join_response(version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if group.is_pending_member(member_id) and instance_id is None:
            log.debug("group %s: pending member %s joins", group.group_id, member_id)
            self._add_member_and_rebalance(op, member_id)
            return None  # parked: answered later as a completion
        error = self.rebalance.validate_member(group, member_id, instance_id, "join-group")
        if error:
            if self.rebalance.is_fence(error, member_id):
                op.fx.event(self.rebalance.fenced(group, member_id, instance_id, "JoinGroup", error, None, op.now_ms))
            return join_response(version, error=error, member_id=member_id)

        member = group.member(member_id)
        reason = req.reason or "not provided"
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            if not member.is_awaiting_join:
                self._joined(op, member_id, ev.JOINED_REJOIN)
            self._note_metadata_change(op, member)
            self._update_member_and_rebalance(
                op, member, f"member {member_id} joins during {state} (client reason: {reason})",
                ev.RebalanceCause.MEMBER_REJOINED,
            )
            return None  # parked: answered later as a completion
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(op.protocols):
                # Same metadata (e.g. it missed the JoinGroup response): answer the current generation.
                return self._current_generation_response(group, member_id, version, with_members=True)
            changed = self._note_metadata_change(op, member)
            if not changed:
                self._joined(op, member_id, ev.JOINED_REJOIN)
            self._update_member_and_rebalance(
                op, member,
                f"member {member_id} {'changed its metadata' if changed else 'rejoins'} during {state} "
                f"(client reason: {reason})",
                ev.RebalanceCause.METADATA_CHANGED if changed else ev.RebalanceCause.MEMBER_REJOINED,
            )
            return None  # parked: answered later as a completion
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(op.protocols):
                # A leader's JoinGroup forces a rebalance (e.g. topic metadata changed).
                changed = self._note_metadata_change(op, member)
                if not changed:
                    self._joined(op, member_id, ev.JOINED_REJOIN)
                self._update_member_and_rebalance(
                    op, member, f"member {member_id} rejoins during {state} (client reason: {reason})",
                    ev.RebalanceCause.METADATA_CHANGED if changed else ev.RebalanceCause.MEMBER_REJOINED,
                )
                return None  # parked: answered later as a completion
            return self._current_generation_response(group, member_id, version, with_members=False)
        # Empty with a known member cannot happen; tell the member to start over.
        log.warning("group %s: member %s rejoins in unexpected state %s", group.group_id, member_id, state)
        return join_response(version, error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _joined(self, op: JoinOperation, member_id: str, how: str, replaced: str | None = None) -> None:
        op.fx.event(
            ev.MemberJoined(
                group_id=op.group.group_id,
                at_ms=op.now_ms,
                member_id=member_id,
                how=how,
                instance_id=op.req.group_instance_id,
                replaced_member_id=replaced,
                client_id=op.ctx.client_id,
                client_host=op.ctx.client_host,
            )
        )

    def _note_metadata_change(self, op: JoinOperation, member: Member) -> bool:
        """A MetadataChanged event if the member's protocols or subscription differ from what it
        had; whether they did. A consumer's subscription also carries what it owned in the last
        generation (owned partitions, generation id, the sticky assignors' user data), which every
        rejoin changes: only its topics and rack make a metadata change."""
        if member.matches(op.protocols) or _same_subscriptions(op.req.protocol_type, member.protocols, op.protocols):
            return False
        detail = (
            "protocols changed"
            if member.protocol_names() != [name for name, _ in op.protocols]
            else "subscription metadata changed"
        )
        op.fx.event(
            ev.MetadataChanged(
                group_id=op.group.group_id,
                at_ms=op.now_ms,
                member_id=member.member_id,
                topics=_subscribed_topics(op),
                detail=detail,
            )
        )
        return True

    def _current_generation_response(
        self, group: ClassicGroup, member_id: str, version: int, *, with_members: bool
    ) -> JoinGroupResponse:
        return join_response(
            version,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id,
            members=self.rebalance.member_list(group) if with_members and group.is_leader(member_id) else [],
        )

    def _add_member_and_rebalance(self, op: JoinOperation, member_id: str) -> None:
        """The request stays parked (its answer comes as a completion)."""
        group, req = op.group, op.req
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=op.ctx.client_id,
            client_host=op.ctx.client_host,
            rebalance_timeout_ms=op.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=op.protocols,
            is_new=True,
            join_pending=op.own,
        )
        if group.in_initial_delay:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member)
        self._joined(op, member_id, ev.JOINED_NEW)
        # A parked new member cannot heartbeat; drop it if its JoinGroup waits too long.
        rb = self.rebalance
        rb.sessions.schedule(group.group_id, member_id, rb.config.group_new_member_join_timeout_ms)
        rb.maybe_prepare_rebalance_or_complete_join(
            group, op.fx, op.now_ms,
            f"adding member {member_id} (instance {req.group_instance_id}; client reason: "
            f"{req.reason or 'not provided'})",
            cause=ev.RebalanceCause.MEMBER_JOINED,
        )

    def _update_member_and_rebalance(self, op: JoinOperation, member: Member, reason: str, cause: str) -> None:
        """The request stays parked (its answer comes as a completion)."""
        op.group.update_member(member, op.protocols, op.rebalance_timeout_ms, op.req.session_timeout_ms)
        old = member.join_pending
        if old is not None and old is not op.own:
            # A newer JoinGroup supersedes a parked one; answer the old one so it is not lost.
            op.fx.complete(
                old,
                join_response(old.api_version, error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id),
            )
        member.join_pending = op.own
        self.rebalance.maybe_prepare_rebalance_or_complete_join(op.group, op.fx, op.now_ms, reason, cause=cause)

    def _update_static_member(self, op: JoinOperation, old_member_id: str, new_member_id: str) -> None:
        """The request stays parked (its answer comes as a completion)."""
        rb, group, fx = self.rebalance, op.group, op.fx
        instance_id = op.req.group_instance_id
        assert instance_id is not None
        leader_before = group.leader_id
        old, new = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._joined(op, new_member_id, ev.JOINED_STATIC_REPLACEMENT, replaced=old_member_id)
        # Fence whoever still waits under the old member id.
        _fence_replaced_member(old, fx)
        rb.sessions.cancel(group.group_id, old_member_id)
        rb.sessions.schedule(group.group_id, new_member_id, new.session_timeout_ms)

        old_settings = (list(new.protocols), new.rebalance_timeout_ms, new.session_timeout_ms)
        group.update_member(new, op.protocols, op.rebalance_timeout_ms, op.req.session_timeout_ms)
        new.join_pending = op.own

        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                log.info(
                    "group %s: static member %s replaced without a rebalance (selected protocol unchanged)",
                    group.group_id, instance_id,
                )
                fx.records.append(
                    rec.group_metadata_record(rb.partition_for(group.group_id), group, group.assignment_map())
                )
                fx.after.append(self._static_replacement_written(op, new, old_member_id, old_settings, leader_before))
                return
            rb.maybe_prepare_rebalance_or_complete_join(
                group, fx, op.now_ms, f"static member {instance_id} rejoined with a protocol change",
                cause=ev.RebalanceCause.STATIC_MEMBER_REPLACED,
            )
            return
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning for the old member id: rebalance again.
            rb.prepare_rebalance(
                group, fx, op.now_ms, f"static member {instance_id} rejoined during CompletingRebalance",
                cause=ev.RebalanceCause.STATIC_MEMBER_REPLACED,
            )
            return
        rb.maybe_complete_join_phase(group, fx, op.now_ms)

    def _static_replacement_written(
        self,
        op: JoinOperation,
        new: Member,
        old_member_id: str,
        old_settings: tuple[Protocols, int, int],
        current_leader: str | None,
    ) -> Callable[[int, int], CoordinatorResult]:
        """Answer a static member replaced in a Stable group once the group record is durable."""
        rb, group, own, version = self.rebalance, op.group, op.own, op.version
        instance_id = op.req.group_instance_id
        assert instance_id is not None
        new_member_id = new.member_id

        def after_append(error: int, now: int) -> CoordinatorResult:
            out = Effects()
            if new.join_pending is not own or group.members.get(new_member_id) is not new:
                return out.result()
            if error:
                log.warning(
                    "group %s: persisting static member %s failed (%s); reverting to member id %s",
                    group.group_id, instance_id, error, old_member_id,
                )
                group.update_member(new, *old_settings)
                new.join_pending = None
                _, back = group.replace_static_member(instance_id, new_member_id, old_member_id)
                rb.sessions.cancel(group.group_id, new_member_id)
                rb.sessions.schedule(group.group_id, old_member_id, back.session_timeout_ms)
                out.complete(
                    own,
                    join_response(
                        version,
                        error=append_error_for_group(error),
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader,
                    ),
                )
            elif version >= 9:
                is_leader = group.is_leader(new_member_id)
                rb.answer_join(
                    new,
                    out,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id,
                    members=rb.member_list(group) if is_leader else [],
                    skip_assignment=is_leader,
                )
            else:
                # Older clients would run the assignor as leader; present the old leader id so
                # the member acts as a follower and fetches its unchanged assignment.
                rb.answer_join(
                    new,
                    out,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=current_leader,
                )
            return out.result()

        return after_append


def _fence_replaced_member(old: Member, fx: Effects) -> None:
    if old.join_pending is not None:
        p = old.join_pending
        old.join_pending = None
        fx.complete(
            p,
            join_response(p.api_version, error=ErrorCode.FENCED_INSTANCE_ID, member_id=old.member_id),
        )
    if old.sync_pending is not None:
        p = old.sync_pending
        old.sync_pending = None
        fx.complete(p, SyncGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID))


def _same_subscriptions(protocol_type: str, before: Protocols, after: Protocols) -> bool:
    """The same protocols subscribing to the same topics from the same rack (consumer protocol)."""
    if protocol_type != cp.PROTOCOL_TYPE or [n for n, _ in before] != [n for n, _ in after]:
        return False
    try:
        for (_, old), (_, new) in zip(before, after, strict=True):
            _v, was = cp.decode_subscription(old)
            _v, now = cp.decode_subscription(new)
            if sorted(was.topics) != sorted(now.topics) or was.rack_id != now.rack_id:
                return False
    except (ValueError, IndexError, struct.error):
        return False
    return True


def _subscribed_topics(op: JoinOperation) -> tuple[str, ...]:
    """The topics of the member's first protocol, when it speaks the consumer protocol."""
    if op.req.protocol_type != cp.PROTOCOL_TYPE or not op.protocols:
        return ()
    try:
        return tuple(sorted(cp.subscribed_topics(op.protocols[0][1])))
    except (ValueError, IndexError, struct.error):
        return ()
