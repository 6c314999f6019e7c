"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Follows Apache Kafka's classic group coordinator (``GroupMetadataManager``'s
classic-group half): a group moves Empty -> PreparingRebalance (members join)
-> CompletingRebalance (the leader assigns) -> Stable, and back to
PreparingRebalance whenever membership or metadata changes.

Membership is live, in-memory state mutated here; what must survive a restart
(the group's generation, protocol, leader, members and assignments after each
rebalance, and the group's disappearance) is written as records. Timers:
``heartbeat-<group>-<member>`` (session expiry, or a new member's join
timeout), ``join-<group>`` (rebalance timeout / initial delay) and
``sync-<group>`` (members that never send SyncGroup).

Initial delay: a group leaving Empty first waits a quarter of
group.initial.rebalance.delay.ms; a wait during which a member joined (or was
handed its member id, or a client looked up the group's coordinator), or at
whose end a member handed an id has not rejoined yet or more connections looked
the group up within the last delay than its members account for, is followed by
another full delay, never past the rebalance timeout. Kafka waits the full
delay from the start.

A heartbeat or commit that extends a session whose timer is already armed no
later than the new end only notes the new end; the timer re-arms when it fires.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from ..protocol.apis.leave_group import (
    LeaveGroupRequest,
    LeaveGroupRequestMemberIdentity,
    LeaveGroupResponse,
    LeaveGroupResponseMemberResponse,
)
from ..protocol.apis.sync_group import SyncGroupRequest, SyncGroupResponse
from ..protocol.errors import ErrorCode
from ..protocol.schema import Struct
from . import records as rec
from .append_errors import (
    append_error_for_group,
)
from .config import CoordinatorConfig
from .group import ClassicGroup
from .lookups import RecentLookups
from .member import Member, Protocols
from .result import AfterAppend, Completion, CoordinatorResult, Pending, Record, RequestContext
from .state import GroupState
from .timer import GuardedTimer

log = logging.getLogger("slipstream.coordinator")

UNKNOWN_MEMBER_ID = ""
JOIN_GROUP_KEY = 11
SYNC_GROUP_KEY = 14
# FindCoordinator lookups one consumer makes before joining, at most: librdkafka asks
# on its bootstrap connection and again on its connection to the learned broker.
LOOKUPS_PER_CONSUMER = 2


def initial_wait_ms(delay_ms: int) -> int:
    """The first wait of a group leaving Empty: a quarter of group.initial.rebalance.delay.ms.

    A lone consumer gets its assignment after this short wait; every member that
    arrives during a wait (or is handed its member id, until it rejoins) extends
    it by the full delay, so consumers started together still land in one generation.
    """
    return (delay_ms + 3) // 4


def heartbeat_key(group_id: str, member_id: str) -> str:
    # Length-prefixed: ids may contain "-", and ("a-b", "c") must not collide with ("a", "b-c").
    return f"heartbeat-{len(group_id)}:{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class Effects:
    """Collects what one operation produced, to become a ``CoordinatorResult``."""

    __slots__ = ("after", "completions", "records")

    def __init__(self) -> None:
        self.completions: list[Completion] = []
        self.records: list[Record] = []
        self.after: list[AfterAppend] = []

    def complete(self, pending: Pending, response: Struct) -> None:
        self.completions.append(Completion(pending, response))

    def result(self, own: Pending | None = None, response: Struct | None = None) -> CoordinatorResult:
        """The result; ``own`` is this request's handle, answered now if a completion has it."""
        completions = self.completions
        pending: Pending | None = None
        if own is not None and response is None:
            for i, c in enumerate(completions):
                if c.pending is own:
                    response = c.response
                    completions = completions[:i] + completions[i + 1 :]
                    break
            else:
                pending = own
        return CoordinatorResult(
            response=response,
            pending=pending,
            records=self.records,
            completions=completions,
            after_append=_chain(self.after),
        )


def _chain(callbacks: list[AfterAppend]) -> AfterAppend | None:
    if not callbacks:
        return None
    if len(callbacks) == 1:
        return callbacks[0]

    def run(error: int, now_ms: int) -> CoordinatorResult:
        merged = CoordinatorResult()
        chained: list[AfterAppend] = []
        for cb in callbacks:
            r = cb(error, now_ms)
            merged.records.extend(r.records)
            merged.completions.extend(r.completions)
            if r.after_append is not None:
                chained.append(r.after_append)
        merged.after_append = _chain(chained)
        return merged

    return run


def join_response(
    version: int,
    *,
    error: int = ErrorCode.NONE,
    member_id: str = UNKNOWN_MEMBER_ID,
    generation_id: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = None,
    members: list[JoinGroupResponseMember] | None = None,
    skip_assignment: bool = False,
) -> JoinGroupResponse:
    # Before v7 the protocol name is not nullable: "" stands for none (and v7+ sends null for "").
    if version < 7:
        protocol_name = protocol_name or ""
    elif protocol_name == "":
        protocol_name = None
    return JoinGroupResponse(
        error_code=error,
        generation_id=generation_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        leader=leader or "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=members or [],
    )


class GroupManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        timer: GuardedTimer,
        new_pending: Callable[[int, int], Pending],
        new_member_id: Callable[[str], str],
    ) -> None:
        self.config = config
        self.timer = timer
        self._new_pending = new_pending
        self._new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        self.lookups = RecentLookups(config.group_initial_rebalance_delay_ms)
        # Session timers by heartbeat key: when the armed timer fires, and the
        # session's latest end if a heartbeat moved it since (see reschedule_heartbeat).
        self._session_armed: dict[str, int] = {}
        self._session_due: dict[str, int] = {}

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    # ================================================================ groups

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, now_ms)
        return group

    def remove_group(self, group_id: str, now_ms: int) -> None:
        """Forget a group (after its tombstone): it becomes Dead and its timers stop."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for member_id in list(group.members) + list(group.pending_join_members):
            self._cancel_heartbeat(group_id, member_id)
        self.timer.cancel(join_key(group_id))
        self.timer.cancel(sync_key(group_id))
        if group.state is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD, now_ms)

    # ================================================================ JoinGroup

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, now_ms: int) -> CoordinatorResult:
        version = ctx.api_version
        fx = Effects()
        own = self._new_pending(JOIN_GROUP_KEY, version)
        group_id = req.group_id
        member_id = req.member_id
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        protocols: Protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        rebalance_timeout = req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
        if version > 0 and rebalance_timeout < 0:
            rebalance_timeout = req.session_timeout_ms

        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return CoordinatorResult(
                    response=join_response(version, error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
                )
            group = self.get_or_create(group_id, now_ms)
            created = True
        else:
            created = False

        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self._cancel_heartbeat(group_id, member_id)
            response: Struct | None = join_response(version, error=ErrorCode.GROUP_MAX_SIZE_REACHED)
        elif is_unknown:
            response = self._join_new_member(ctx, req, group, protocols, rebalance_timeout, own, fx, now_ms)
        else:
            response = self._join_existing_member(ctx, req, group, protocols, rebalance_timeout, own, fx, now_ms)

        if created and group.state is GroupState.EMPTY and not group.members and not group.pending_join_members:
            # The join failed before the group got anyone: do not keep an empty shell.
            self.groups.pop(group_id, None)
        return fx.result(own, response)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        state = group.state
        max_size = self.config.group_max_size
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            # Existing members already waiting are kept; new ones only while there is room.
            # (Counting awaiting members lets a shrunk group.max.size kick out late rejoiners.)
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join() < max_size
        return member_id in group.members or group.num_members < max_size

    def _join_new_member(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        protocols: Protocols,
        rebalance_timeout: int,
        own: Pending,
        fx: Effects,
        now_ms: int,
    ) -> Struct | None:
        version = ctx.api_version
        if group.state is GroupState.DEAD:
            return join_response(version, error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in protocols]):
            return join_response(version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        instance_id = req.group_instance_id
        new_id = self._new_member_id(instance_id if instance_id is not None else ctx.client_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                log.info(
                    "group %s: static member %s rejoins with a new member id in state %s; "
                    "replacing %s with %s", group.group_id, instance_id, group.state, existing, new_id,
                )
                return self._update_static_member(
                    ctx, req, group, protocols, rebalance_timeout, existing, new_id, own, fx, now_ms
                )
            return self._add_member_and_rebalance(
                ctx, req, group, new_id, protocols, rebalance_timeout, own, fx, now_ms
            )
        if version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.add_pending_member(new_id)
            if group.in_initial_delay:
                group.new_member_added = True  # it rejoins within a round trip: keep waiting for it
            self._schedule_heartbeat_expiry(group.group_id, new_id, req.session_timeout_ms)
            log.info("group %s: new member gets id %s and must rejoin with it", group.group_id, new_id)
            return join_response(version, error=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member_and_rebalance(ctx, req, group, new_id, protocols, rebalance_timeout, own, fx, now_ms)

    def _join_existing_member(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        protocols: Protocols,
        rebalance_timeout: int,
        own: Pending,
        fx: Effects,
        now_ms: int,
    ) -> Struct | None:
        version = ctx.api_version
        member_id = req.member_id
        instance_id = req.group_instance_id
        if group.state is GroupState.DEAD:
            return join_response(version, error=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in protocols]):
            return join_response(version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if group.is_pending_member(member_id) and instance_id is None:
            log.debug("group %s: pending member %s joins", group.group_id, member_id)
            return self._add_member_and_rebalance(
                ctx, req, group, member_id, protocols, rebalance_timeout, own, fx, now_ms
            )
        error = self._validate_member(group, member_id, instance_id, "join-group")
        if error:
            return join_response(version, error=error, member_id=member_id)

        member = group.member(member_id)
        reason = req.reason or "not provided"
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout, req.session_timeout_ms, own, fx, now_ms,
                f"member {member_id} joins during {state} (client reason: {reason})",
            )
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Same metadata (e.g. it missed the JoinGroup response): answer the current generation.
                return self._current_generation_response(group, member_id, version, with_members=True)
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout, req.session_timeout_ms, own, fx, now_ms,
                f"member {member_id} changed its metadata during {state} (client reason: {reason})",
            )
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup forces a rebalance (e.g. topic metadata changed).
                return self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout, req.session_timeout_ms, own, fx, now_ms,
                    f"member {member_id} rejoins during {state} (client reason: {reason})",
                )
            return self._current_generation_response(group, member_id, version, with_members=False)
        # Empty with a known member cannot happen; tell the member to start over.
        log.warning("group %s: member %s rejoins in unexpected state %s", group.group_id, member_id, state)
        return join_response(version, error=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)

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
            members=self._member_list(group) if with_members and group.is_leader(member_id) else [],
        )

    def _member_list(self, group: ClassicGroup) -> list[JoinGroupResponseMember]:
        protocol = group.protocol_name or ""
        return [
            JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata(protocol)
            )
            for m in group.members.values()
        ]

    def _validate_member(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, operation: str
    ) -> int:
        """Kafka's validateMember: 0, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                log.info(
                    "group %s: %s by member %s of static instance %s fenced by current member %s",
                    group.group_id, operation, member_id, instance_id, existing,
                )
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _add_member_and_rebalance(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        member_id: str,
        protocols: Protocols,
        rebalance_timeout: int,
        own: Pending,
        fx: Effects,
        now_ms: int,
    ) -> Struct | None:
        """Returns None: the request stays parked (its answer comes as a completion)."""
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=protocols,
            is_new=True,
            join_pending=own,
        )
        if group.in_initial_delay:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member)
        # A parked new member cannot heartbeat; drop it if its JoinGroup waits too long.
        self._schedule_heartbeat_expiry(group.group_id, member_id, self.config.group_new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            group, fx, now_ms,
            f"adding member {member_id} (instance {req.group_instance_id}; client reason: "
            f"{req.reason or 'not provided'})",
        )
        return None

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        protocols: Protocols,
        rebalance_timeout: int,
        session_timeout: int,
        own: Pending,
        fx: Effects,
        now_ms: int,
        reason: str,
    ) -> Struct | None:
        """Returns None: the request stays parked (its answer comes as a completion)."""
        group.update_member(member, protocols, rebalance_timeout, session_timeout)
        self._set_join_pending(member, own, fx)
        self._maybe_prepare_rebalance_or_complete_join(group, fx, now_ms, reason)
        return None

    def _set_join_pending(self, member: Member, pending: Pending | None, fx: Effects) -> None:
        old = member.join_pending
        if old is not None and old is not pending:
            # A newer JoinGroup supersedes a parked one; answer the old one so it is not lost.
            fx.complete(
                old,
                join_response(old.api_version, error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id),
            )
        member.join_pending = pending

    def _update_static_member(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        protocols: Protocols,
        rebalance_timeout: int,
        old_member_id: str,
        new_member_id: str,
        own: Pending,
        fx: Effects,
        now_ms: int,
    ) -> Struct | None:
        """Returns None: the request stays parked (its answer comes as a completion)."""
        version = ctx.api_version
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        old, new = group.replace_static_member(instance_id, old_member_id, new_member_id)
        # Fence whoever still waits under the old member id.
        self._fence_replaced_member(old, fx)
        self._cancel_heartbeat(group.group_id, old_member_id)
        self._schedule_heartbeat_expiry(group.group_id, new_member_id, new.session_timeout_ms)

        old_protocols = list(new.protocols)
        old_rebalance_timeout = new.rebalance_timeout_ms
        old_session_timeout = new.session_timeout_ms
        group.update_member(new, protocols, rebalance_timeout, req.session_timeout_ms)
        new.join_pending = own

        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                log.info(
                    "group %s: static member %s replaced without a rebalance (selected protocol unchanged)",
                    group.group_id, instance_id,
                )
                fx.records.append(
                    rec.group_metadata_record(self.partition_for(group.group_id), group, group.assignment_map())
                )

                def after_append(error: int, now: int) -> CoordinatorResult:
                    out = Effects()
                    if new.join_pending is not own or group.members.get(new_member_id) is not new:
                        return out.result()
                    if error:
                        log.warning(
                            "group %s: persisting static member %s failed (%s); reverting to member id %s",
                            group.group_id, instance_id, error, old_member_id,
                        )
                        group.update_member(new, old_protocols, old_rebalance_timeout, old_session_timeout)
                        new.join_pending = None
                        _, back = group.replace_static_member(instance_id, new_member_id, old_member_id)
                        self._cancel_heartbeat(group.group_id, new_member_id)
                        self._schedule_heartbeat_expiry(group.group_id, old_member_id, back.session_timeout_ms)
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
                        self._answer_join(
                            new,
                            out,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader=group.leader_id,
                            members=self._member_list(group) if is_leader else [],
                            skip_assignment=is_leader,
                        )
                    else:
                        # Older clients would run the assignor as leader; present the old leader id so
                        # the member acts as a follower and fetches its unchanged assignment.
                        self._answer_join(
                            new,
                            out,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader=current_leader,
                        )
                    return out.result()

                fx.after.append(after_append)
                return None
            self._maybe_prepare_rebalance_or_complete_join(
                group, fx, now_ms,
                f"static member {instance_id} rejoined with a protocol change",
            )
            return None
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning for the old member id: rebalance again.
            self._prepare_rebalance(
                group, fx, now_ms, f"static member {instance_id} rejoined during CompletingRebalance"
            )
            return None
        self._maybe_complete_join_phase(group, fx, now_ms)
        return None

    def _fence_replaced_member(self, old: Member, fx: Effects) -> None:
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

    # ---------------------------------------------------------------- rebalance machinery

    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, fx: Effects, now_ms: int, reason: str
    ) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, fx, now_ms, reason)
        else:
            self._maybe_complete_join_phase(group, fx, now_ms)

    def _maybe_complete_join_phase(self, group: ClassicGroup, fx: Effects, now_ms: int) -> None:
        # The initial rebalance (from Empty) completes only when its delay runs out.
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.has_all_members_joined()
            and not group.in_initial_delay
        ):
            self._complete_join(group, fx, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, fx: Effects, now_ms: int, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, fx)
        self._remove_sync_expiration(group)
        initial = group.state is GroupState.EMPTY
        if initial:
            first = initial_wait_ms(self.config.group_initial_rebalance_delay_ms)
            group.new_member_added = False
            bound = now_ms + max(group.rebalance_timeout_ms(), first)
            self._schedule_initial_rebalance(group.group_id, first, bound)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        log.info(
            "group %s: preparing to rebalance (old generation %s; reason: %s)",
            group.group_id, group.generation_id, reason,
        )
        if not initial:
            self._maybe_complete_join_else_schedule(group, fx, now_ms)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup, fx: Effects, now_ms: int) -> None:
        if group.has_all_members_joined():
            self._complete_join(group, fx, now_ms)
        else:
            self._schedule_join_completion(group.group_id, group.rebalance_timeout_ms())

    def _schedule_join_completion(self, group_id: str, delay_ms: int) -> None:
        self.timer.schedule(join_key(group_id), delay_ms, lambda now: self._on_join_timeout(group_id, now))

    def _schedule_initial_rebalance(self, group_id: str, delay_ms: int, bound_ms: int) -> None:
        self.timer.schedule(
            join_key(group_id),
            delay_ms,
            lambda now: self._on_initial_delay(group_id, bound_ms, now),
        )

    def _on_join_timeout(self, group_id: str, now_ms: int) -> CoordinatorResult:
        fx = Effects()
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group, fx, now_ms)
        return fx.result()

    def note_coordinator_lookup(self, group_id: str, connection: str, now_ms: int) -> None:
        """A client on ``connection`` looked up this group's coordinator (FindCoordinator).

        Consumers started together reach a new group in bursts: those whose
        coordinator connection is up join at once, the rest a lookup or two later.
        Lookups are the early sign of the later burst, and count two ways:
        one during the initial delay extends it like an arrival; and when the
        first wait ends, lookups from more connections than the members present
        could have made (``LOOKUPS_PER_CONSUMER`` each) extend it too.
        """
        self.lookups.note(group_id, connection, now_ms)
        group = self.groups.get(group_id)
        if group is not None and group.in_initial_delay:
            group.new_member_added = True

    def _more_consumers_looking_up(self, group: ClassicGroup, now_ms: int) -> bool:
        since = now_ms - self.config.group_initial_rebalance_delay_ms
        expected = len(group.members) + len(group.pending_join_members)
        return self.lookups.connections_since(group.group_id, since, now_ms) > LOOKUPS_PER_CONSUMER * expected

    def _on_initial_delay(self, group_id: str, bound_ms: int, now_ms: int) -> CoordinatorResult:
        fx = Effects()
        group = self.groups.get(group_id)
        if group is None:
            return fx.result()
        delay = self.config.group_initial_rebalance_delay_ms
        arriving = (
            group.new_member_added
            or bool(group.pending_join_members)
            or self._more_consumers_looking_up(group, now_ms)
        )
        if arriving and delay > 0 and now_ms < bound_ms:
            # Members are still arriving (joined or looked the group up during the wait, were
            # handed a member id and have not rejoined yet, or looked it up before in numbers
            # the members present do not account for): wait another full delay, within the
            # rebalance timeout.
            group.new_member_added = False
            self._schedule_initial_rebalance(group_id, min(delay, bound_ms - now_ms), bound_ms)
        else:
            self._complete_join(group, fx, now_ms)
        return fx.result()

    def _complete_join(self, group: ClassicGroup, fx: Effects, now_ms: int) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next generation."""
        group_id = group.group_id
        self.timer.cancel(join_key(group_id))
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for m in gone:
            self._remove_member(group, m, fx)
        if gone:
            log.info("group %s: removed members that did not rejoin: %s", group_id, [m.member_id for m in gone])

        if group.state is GroupState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members remain): wait another rebalance timeout,
            # until their sessions expire.
            log.error("group %s: cannot complete the rebalance because no member rejoined", group_id)
            self._schedule_join_completion(group_id, group.rebalance_timeout_ms())
            return

        group.init_next_generation(now_ms)
        if group.state is GroupState.EMPTY:
            log.info("group %s: generation %s is empty", group_id, group.generation_id)
            fx.records.append(rec.group_metadata_record(self.partition_for(group_id), group, {}))
            fx.after.append(_log_append_failure(group_id, "empty group metadata"))
            return

        log.info(
            "group %s: generation %s with %s members, protocol %s, leader %s",
            group_id, group.generation_id, group.num_members, group.protocol_name, group.leader_id,
        )
        members = self._member_list(group)
        for member in group.members.values():
            self._answer_join(
                member,
                fx,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id,
                members=members if group.is_leader(member.member_id) else [],
            )
            self._schedule_heartbeat_expiry(group_id, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    def _answer_join(
        self,
        member: Member,
        fx: Effects,
        *,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        leader: str | None,
        members: list[JoinGroupResponseMember] | None = None,
        skip_assignment: bool = False,
    ) -> None:
        """Answer a member's parked JoinGroup (if it has one)."""
        pending = member.join_pending
        if pending is None:
            return
        member.join_pending = None
        fx.complete(
            pending,
            join_response(
                pending.api_version,
                member_id=member.member_id,
                generation_id=generation_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                leader=leader,
                members=members,
                skip_assignment=skip_assignment,
            ),
        )

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        generation = group.generation_id
        self.timer.schedule(
            sync_key(group_id),
            group.rebalance_timeout_ms(),
            lambda now: self._on_sync_timeout(group_id, generation, now),
        )

    def _on_sync_timeout(self, group_id: str, generation: int, now_ms: int) -> CoordinatorResult:
        fx = Effects()
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return fx.result()
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                member = group.members.get(member_id)
                if member is not None:
                    self._remove_member(group, member, fx)
            log.info("group %s: removed members that never sent SyncGroup: %s", group_id, missing)
            self._prepare_rebalance(group, fx, now_ms, f"removing {missing} on pending sync expiration")
        return fx.result()

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def _remove_member(self, group: ClassicGroup, member: Member, fx: Effects) -> None:
        """Take a member out, answering anything it still has parked."""
        if member.join_pending is not None:
            p = member.join_pending
            member.join_pending = None
            fx.complete(p, join_response(p.api_version, error=ErrorCode.UNKNOWN_MEMBER_ID))
        if member.sync_pending is not None:
            p = member.sync_pending
            member.sync_pending = None
            fx.complete(p, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._cancel_heartbeat(group.group_id, member.member_id)

    # ---------------------------------------------------------------- heartbeats / sessions

    def _schedule_heartbeat_expiry(
        self, group_id: str, member_id: str, timeout_ms: int, now_ms: int | None = None
    ) -> None:
        key = heartbeat_key(group_id, member_id)
        self._session_due.pop(key, None)
        if now_ms is None:
            self._session_armed.pop(key, None)
        else:
            self._session_armed[key] = now_ms + timeout_ms
        self.timer.schedule(key, timeout_ms, lambda now: self._on_heartbeat_expired(group_id, member_id, now))

    def _cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        key = heartbeat_key(group_id, member_id)
        self._session_armed.pop(key, None)
        self._session_due.pop(key, None)
        self.timer.cancel(key)

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, now_ms: int | None = None) -> None:
        """Push the member's session end to ``now_ms`` + its session timeout.

        With ``now_ms``, a timer already armed no later than the new end is left
        alone and only the new end is noted; when it fires it re-arms for the rest.
        Heartbeats and commits arrive far more often than sessions end, so this
        saves a timer reschedule on nearly every one of them.
        """
        if now_ms is not None:
            key = heartbeat_key(group.group_id, member.member_id)
            armed = self._session_armed.get(key)
            due = now_ms + member.session_timeout_ms
            if armed is not None and armed <= due and self.timer.is_scheduled(key):
                self._session_due[key] = due
                return
        self._schedule_heartbeat_expiry(group.group_id, member.member_id, member.session_timeout_ms, now_ms)

    def _on_heartbeat_expired(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult:
        key = heartbeat_key(group_id, member_id)
        self._session_armed.pop(key, None)
        due = self._session_due.pop(key, None)
        if due is not None and due > now_ms:
            # The session was extended after this timer was armed: wait for its real end.
            self._schedule_heartbeat_expiry(group_id, member_id, due - now_ms, now_ms)
            return CoordinatorResult()
        fx = Effects()
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return fx.result()
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s expired before rejoining", group_id, member_id)
            group.remove(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group, fx, now_ms)
            return fx.result()
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return fx.result()
        log.info("group %s: member %s session expired; removing it", group_id, member_id)
        self._remove_member(group, member, fx)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(
                group, fx, now_ms, f"removing member {member_id} on heartbeat expiration"
            )
        elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group, fx, now_ms)
        return fx.result()

    # ================================================================ SyncGroup

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, now_ms: int) -> CoordinatorResult:
        version = ctx.api_version
        group = self.groups.get(req.group_id)
        if group is None or group.state is GroupState.EMPTY:
            return CoordinatorResult(response=SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            return CoordinatorResult(response=SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        error = self._validate_sync(group, req)
        if error:
            return CoordinatorResult(response=SyncGroupResponse(error_code=error))
        if group.state is GroupState.PREPARING_REBALANCE:
            return CoordinatorResult(response=SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))

        fx = Effects()
        member = group.member(req.member_id)
        if group.state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member.member_id)
            return CoordinatorResult(
                response=SyncGroupResponse(
                    error_code=ErrorCode.NONE,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                )
            )

        # CompletingRebalance: park until the leader's assignment is durable.
        own = self._new_pending(SYNC_GROUP_KEY, version)
        if member.sync_pending is not None:
            old = member.sync_pending
            fx.complete(old, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_pending = own
        self._remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
            missing = [m for m in group.members if m not in assignment]
            for member_id in missing:
                assignment[member_id] = b""
            if missing:
                log.warning(
                    "group %s: leader's assignment for generation %s leaves out %s; they get an empty one",
                    group.group_id, group.generation_id, missing,
                )
            log.info(
                "group %s: assignment received from leader %s for generation %s (%s members)",
                group.group_id, member.member_id, group.generation_id, group.num_members,
            )
            fx.records.append(rec.group_metadata_record(self.partition_for(group.group_id), group, assignment))
            generation = req.generation_id

            def after_append(error: int, now: int) -> CoordinatorResult:
                out = Effects()
                # Something else may have happened meanwhile: act only on the same generation.
                if group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == generation:
                    if error:
                        mapped = append_error_for_group(error)
                        self._reset_and_propagate_assignment_error(group, mapped, out)
                        self._maybe_prepare_rebalance_or_complete_join(
                            group, out, now, f"error {mapped} storing the group assignment"
                        )
                    else:
                        for m in group.members.values():
                            m.assignment = assignment.get(m.member_id, b"")
                        self._propagate_assignment(group, ErrorCode.NONE, out)
                        group.transition_to(GroupState.STABLE, now)
                return out.result()

            fx.after.append(after_append)
        return fx.result(own)

    def _validate_sync(self, group: ClassicGroup, req: SyncGroupRequest) -> int:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, req.member_id, req.group_instance_id, "sync-group")
        if error:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if not group.pending_sync_members:
                self.timer.cancel(sync_key(group.group_id))
        else:
            self.timer.cancel(sync_key(group.group_id))

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int, fx: Effects) -> None:
        if group.state is not GroupState.COMPLETING_REBALANCE:
            raise RuntimeError(f"group {group.group_id!r} must be CompletingRebalance, is {group.state}")
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error, fx)

    def _propagate_assignment(self, group: ClassicGroup, error: int, fx: Effects) -> None:
        ok = error == ErrorCode.NONE
        for m in group.members.values():
            if m.sync_pending is None:
                continue
            if ok and not m.assignment:
                log.warning(
                    "group %s: member %s gets an empty assignment for generation %s",
                    group.group_id, m.member_id, group.generation_id,
                )
            p = m.sync_pending
            m.sync_pending = None
            fx.complete(
                p,
                SyncGroupResponse(
                    error_code=error,
                    protocol_type=group.protocol_type if ok else None,
                    protocol_name=group.protocol_name if ok else None,
                    assignment=m.assignment,
                ),
            )
            # Expiries ignored while the member waited are re-armed now.
            self.reschedule_heartbeat(group, m)

    # ================================================================ Heartbeat

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest, now_ms: int) -> CoordinatorResult:
        group = self.groups.get(req.group_id)
        if group is None:
            return CoordinatorResult(response=HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is GroupState.DEAD:
            return CoordinatorResult(response=HeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_member(group, req.member_id, req.group_instance_id, "heartbeat")
        if not error and req.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error:
            return CoordinatorResult(response=HeartbeatResponse(error_code=error))
        member = group.member(req.member_id)
        if group.state is GroupState.EMPTY:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            # CompletingRebalance too: members heartbeat between JoinGroup and SyncGroup.
            self.reschedule_heartbeat(group, member, now_ms)
            if group.state is GroupState.PREPARING_REBALANCE:
                error = ErrorCode.REBALANCE_IN_PROGRESS
        return CoordinatorResult(response=HeartbeatResponse(error_code=error))

    # ================================================================ LeaveGroup

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, now_ms: int) -> CoordinatorResult:
        version = ctx.api_version
        identities = (
            [LeaveGroupRequestMemberIdentity(member_id=req.member_id)] if version <= 2 else list(req.members)
        )
        group = self.groups.get(req.group_id)
        if group is None:
            return CoordinatorResult(
                response=_leave_response(
                    version,
                    ErrorCode.NONE,
                    [
                        LeaveGroupResponseMemberResponse(
                            member_id=i.member_id,
                            group_instance_id=i.group_instance_id,
                            error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                        )
                        for i in identities
                    ],
                )
            )
        if group.state is GroupState.DEAD:
            return CoordinatorResult(response=_leave_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, []))

        fx = Effects()
        answers: list[LeaveGroupResponseMemberResponse] = []
        removed: list[str] = []
        for ident in identities:
            reason = ident.reason or "not provided"
            error = ErrorCode.NONE
            if ident.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by group.instance.id.
                target = group.static_member_id(ident.group_instance_id) if ident.group_instance_id else None
                if target is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._leave(group, target, reason, fx)
                    removed.append(target)
            elif group.is_pending_member(ident.member_id):
                group.remove(ident.member_id)
                self._cancel_heartbeat(group.group_id, ident.member_id)
                log.info("group %s: pending member %s left (reason: %s)", group.group_id, ident.member_id, reason)
                removed.append(ident.member_id)
            else:
                error = self._validate_member(group, ident.member_id, ident.group_instance_id, "leave-group")
                if not error:
                    self._leave(group, ident.member_id, reason, fx)
                    removed.append(ident.member_id)
            answers.append(
                LeaveGroupResponseMemberResponse(
                    member_id=ident.member_id, group_instance_id=ident.group_instance_id, error_code=error
                )
            )
        if removed:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(
                    group, fx, now_ms, f"members {removed} left the group"
                )
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group, fx, now_ms)
        return fx.result(None, _leave_response(version, ErrorCode.NONE, answers))

    def _leave(self, group: ClassicGroup, member_id: str, reason: str, fx: Effects) -> None:
        log.info("group %s: member %s left (reason: %s)", group.group_id, member_id, reason)
        self._remove_member(group, group.member(member_id), fx)

    # ================================================================ loading

    def on_loaded(self, group: ClassicGroup) -> None:
        """Arm session timers for a group rebuilt from the log."""
        for member in group.members.values():
            self.reschedule_heartbeat(group, member)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _leave_response(
    version: int, error: int, members: list[LeaveGroupResponseMemberResponse]
) -> LeaveGroupResponse:
    if version >= 3:
        return LeaveGroupResponse(error_code=error, members=members)
    # v0-2 carry one member and no per-member results: its error becomes the top-level error.
    if not error and members:
        error = members[0].error_code
    return LeaveGroupResponse(error_code=error)


def _log_append_failure(group_id: str, what: str) -> AfterAppend:
    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        if error:
            log.warning("group %s: failed to write %s: error %s", group_id, what, error)
        return CoordinatorResult()

    return after_append
