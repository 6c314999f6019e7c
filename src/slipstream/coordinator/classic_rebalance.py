"""The classic groups and the rebalance machinery every classic API shares.

Holds the groups by id and moves them through their states: preparing a
rebalance, the initial delay of a group leaving Empty, completing the join phase
(a new generation, the JoinGroup answers), the SyncGroup deadline, taking members
out, and what happens when a session ends. JoinGroup, SyncGroup, Heartbeat and
LeaveGroup (classic_join.py, classic_sync.py, group_manager.py) call into it.

Timers: ``heartbeat-<group>-<member>`` (session expiry, or a new member's join
timeout; classic_sessions.py), ``join-<group>`` (rebalance timeout / initial delay)
and ``sync-<group>`` (members that never send SyncGroup).

Initial delay: a group leaving Empty first waits a quarter of
group.initial.rebalance.delay.ms; a wait during which a member joined (or was
handed its member id, or a client looked up the group's coordinator), or at
whose end a member handed an id has not rejoined yet or more connections looked
the group up within the last delay than its members account for, is followed by
another full delay, never past the rebalance timeout. Kafka waits the full
delay from the start.
"""

from __future__ import annotations

import logging

from ..protocol.apis.join_group import JoinGroupResponseMember
from ..protocol.apis.sync_group import SyncGroupResponse
from ..protocol.errors import ErrorCode
from ..protocol.errors import name as error_name
from . import history as ev
from . import records as rec
from .classic_responses import join_response, log_append_failure
from .classic_sessions import SessionTimers
from .config import CoordinatorConfig
from .effects import Effects
from .group import ClassicGroup
from .history_moves import owners_of, partition_counts, partition_moves
from .lookups import RecentLookups
from .member import Member
from .result import CoordinatorResult
from .state import GroupState
from .timer import GuardedTimer

log = logging.getLogger("slipstream.coordinator")

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


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class ClassicRebalance:
    def __init__(self, config: CoordinatorConfig, timer: GuardedTimer) -> None:
        self.config = config
        self.timer = timer
        self.groups: dict[str, ClassicGroup] = {}
        self.lookups = RecentLookups(config.group_initial_rebalance_delay_ms)
        self.sessions = SessionTimers(timer, self._on_session_expired)

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    # ================================================================ groups

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
            self.sessions.cancel(group_id, member_id)
        self.timer.cancel(join_key(group_id))
        self.timer.cancel(sync_key(group_id))
        if group.state is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD, now_ms)

    def validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None, operation: str) -> int:
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

    def member_list(self, group: ClassicGroup) -> list[JoinGroupResponseMember]:
        protocol = group.protocol_name or ""
        return [
            JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata(protocol)
            )
            for m in group.members.values()
        ]

    # ================================================================ rebalancing

    def maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, fx: Effects, now_ms: int, reason: str, *, cause: str
    ) -> None:
        """``cause``: a ``history.RebalanceCause``, for the history; ``reason``: the words for it."""
        if group.can_rebalance():
            self.prepare_rebalance(group, fx, now_ms, reason, cause=cause)
        else:
            self.maybe_complete_join_phase(group, fx, now_ms)

    def maybe_complete_join_phase(self, group: ClassicGroup, fx: Effects, now_ms: int) -> None:
        # The initial rebalance (from Empty) completes only when its delay runs out.
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.has_all_members_joined()
            and not group.in_initial_delay
        ):
            self.complete_join(group, fx, now_ms)

    def prepare_rebalance(self, group: ClassicGroup, fx: Effects, now_ms: int, reason: str, *, cause: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, fx)
        self.remove_sync_expiration(group)
        initial = group.state is GroupState.EMPTY
        if initial:
            first = initial_wait_ms(self.config.group_initial_rebalance_delay_ms)
            group.new_member_added = False
            bound = now_ms + max(group.rebalance_timeout_ms(), first)
            self._schedule_initial_rebalance(group.group_id, first, bound)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        group.rebalance_started_ms = now_ms
        fx.event(
            ev.RebalanceStarted(
                group_id=group.group_id, at_ms=now_ms, generation=group.generation_id, cause=cause, reason=reason
            )
        )
        log.info(
            "group %s: preparing to rebalance (old generation %s; reason: %s)",
            group.group_id, group.generation_id, reason,
        )
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group, fx, now_ms)
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
            self.complete_join(group, fx, now_ms)
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
            self.complete_join(group, fx, now_ms)
        return fx.result()

    def complete_join(self, group: ClassicGroup, fx: Effects, now_ms: int) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next generation."""
        group_id = group.group_id
        self.timer.cancel(join_key(group_id))
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for m in gone:
            self.remove_member(group, m, fx)
        if gone:
            log.info("group %s: removed members that did not rejoin: %s", group_id, [m.member_id for m in gone])
            started = group.rebalance_started_ms
            fx.event(
                ev.RemovedAtRebalanceTimeout(
                    group_id=group_id,
                    at_ms=now_ms,
                    member_ids=tuple(m.member_id for m in gone),
                    waited_ms=0 if started is None else now_ms - started,
                )
            )

        if group.state is GroupState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members remain): wait another rebalance timeout,
            # until their sessions expire.
            log.error("group %s: cannot complete the rebalance because no member rejoined", group_id)
            self._schedule_join_completion(group_id, group.rebalance_timeout_ms())
            return

        votes = group.protocol_votes() if group.members else {}
        group.init_next_generation(now_ms)
        group.generation_started_ms = now_ms
        self._generation_events(group, fx, now_ms, votes)
        if group.state is GroupState.EMPTY:
            log.info("group %s: generation %s is empty", group_id, group.generation_id)
            fx.records.append(rec.group_metadata_record(self.partition_for(group_id), group, {}))
            fx.after.append(log_append_failure(group_id, "empty group metadata"))
            return

        log.info(
            "group %s: generation %s with %s members, protocol %s, leader %s",
            group_id, group.generation_id, group.num_members, group.protocol_name, group.leader_id,
        )
        members = self.member_list(group)
        for member in group.members.values():
            self.answer_join(
                member,
                fx,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id,
                members=members if group.is_leader(member.member_id) else [],
            )
            self.sessions.schedule(group_id, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    def _generation_events(
        self, group: ClassicGroup, fx: Effects, now_ms: int, votes: dict[str, int]
    ) -> None:
        group_id = group.group_id
        if group.protocol_name is not None:
            fx.event(ev.ProtocolSelected(group_id=group_id, at_ms=now_ms, protocol=group.protocol_name, votes=votes))
        leader = group.leader_id if group.members else None
        if leader is not None:
            # Every generation has its leader; ``previous`` is the last generation's.
            fx.event(
                ev.LeaderElected(group_id=group_id, at_ms=now_ms, member_id=leader, previous=group.generation_leader)
            )
        group.generation_leader = leader
        fx.event(
            ev.GenerationStarted(
                group_id=group_id,
                at_ms=now_ms,
                generation=group.generation_id,
                member_ids=tuple(group.members),
                protocol=group.protocol_name,
                leader=group.leader_id if group.members else None,
            )
        )
        if not group.members:
            # Nothing left to assign: the generation is complete as it starts.
            self._generation_completed(group, fx, now_ms)
            group.partition_owners = {}

    def assignment_events(self, group: ClassicGroup, fx: Effects, now_ms: int, assignment: dict[str, bytes]) -> None:
        """The assignment of the group's generation is durable and handed out: what moved, how long it took."""
        group_id = group.group_id
        owners = owners_of(assignment) if group.uses_consumer_protocol() else None
        if owners is None:
            fx.event(ev.AssignmentSent(group_id=group_id, at_ms=now_ms, generation=group.generation_id, decoded=False))
        else:
            fx.event(
                ev.AssignmentSent(
                    group_id=group_id,
                    at_ms=now_ms,
                    generation=group.generation_id,
                    decoded=True,
                    moves=partition_moves(group.partition_owners, owners),
                    partitions={m: 0 for m in group.members} | partition_counts(owners),
                )
            )
        group.partition_owners = owners
        self._generation_completed(group, fx, now_ms)

    @staticmethod
    def _generation_completed(group: ClassicGroup, fx: Effects, now_ms: int) -> None:
        started = group.rebalance_started_ms
        fx.event(
            ev.GenerationCompleted(
                group_id=group.group_id,
                at_ms=now_ms,
                generation=group.generation_id,
                duration_ms=0 if started is None else now_ms - started,
            )
        )

    @staticmethod
    def is_fence(error: int, member_id: str) -> bool:
        """Whether a refusal fences the requester: a stale generation, a replaced static
        instance, or a member id the group no longer has (a zombie whose session expired or
        that was dropped at the rebalance timeout). The history notes those."""
        if error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID):
            return True
        return error == ErrorCode.UNKNOWN_MEMBER_ID and bool(member_id)

    def fenced(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, api: str, error: int,
        request_generation: int | None, now_ms: int,
    ) -> ev.RequestFenced:
        """The event for a request refused for its generation or instance id."""
        return ev.RequestFenced(
            group_id=group.group_id,
            at_ms=now_ms,
            member_id=member_id,
            instance_id=instance_id,
            api=api,
            error=error_name(error),
            request_generation=request_generation,
            current_generation=group.generation_id,
        )

    def answer_join(
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

    # ================================================================ the sync phase

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
                    self.remove_member(group, member, fx)
            log.info("group %s: removed members that never sent SyncGroup: %s", group_id, missing)
            started = group.generation_started_ms
            fx.event(
                ev.RemovedAtSyncDeadline(
                    group_id=group_id,
                    at_ms=now_ms,
                    member_ids=tuple(missing),
                    generation=generation,
                    waited_ms=0 if started is None else now_ms - started,
                )
            )
            self.prepare_rebalance(
                group, fx, now_ms, f"removing {missing} on pending sync expiration", cause=ev.RebalanceCause.SYNC_DEADLINE
            )
        return fx.result()

    def remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(sync_key(group.group_id))

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if not group.pending_sync_members:
                self.timer.cancel(sync_key(group.group_id))
        else:
            self.timer.cancel(sync_key(group.group_id))

    def reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int, fx: Effects) -> None:
        if group.state is not GroupState.COMPLETING_REBALANCE:
            raise RuntimeError(f"group {group.group_id!r} must be CompletingRebalance, is {group.state}")
        for m in group.members.values():
            m.assignment = b""
        self.propagate_assignment(group, error, fx)

    def propagate_assignment(self, group: ClassicGroup, error: int, fx: Effects) -> None:
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
            self.sessions.extend(group.group_id, m.member_id, m.session_timeout_ms)

    # ================================================================ members and sessions

    def remove_member(self, group: ClassicGroup, member: Member, fx: Effects) -> None:
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
        self.sessions.cancel(group.group_id, member.member_id)

    def _on_session_expired(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult:
        fx = Effects()
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return fx.result()
        if group.is_pending_member(member_id):
            log.info("group %s: pending member %s expired before rejoining", group_id, member_id)
            group.remove(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self.complete_join(group, fx, now_ms)
            return fx.result()
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return fx.result()
        log.info("group %s: member %s session expired; removing it", group_id, member_id)
        fx.event(
            ev.SessionExpired(
                group_id=group_id,
                at_ms=now_ms,
                member_id=member_id,
                session_timeout_ms=member.session_timeout_ms,
                last_heartbeat_ms=member.last_heartbeat_ms,
            )
        )
        self.remove_member(group, member, fx)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(
                group, fx, now_ms, f"removing member {member_id} on heartbeat expiration",
                cause=ev.RebalanceCause.SESSION_EXPIRED,
            )
        elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_join(group, fx, now_ms)
        return fx.result()
