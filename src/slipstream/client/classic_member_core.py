"""The classic group member's state and decisions, without I/O (:class:`MemberCore`).

It builds the JoinGroup, SyncGroup, Heartbeat and LeaveGroup requests, reads their
answers into an :class:`~.membership_types.Outcome` (what to do next), runs the
assignor when this member leads, and computes what a new assignment revokes and adds.
Time is passed in (``now``, seconds on a monotonic clock).

The rebalance (Kafka's ``AbstractCoordinator`` / ``ConsumerCoordinator``):

1. before JoinGroup: if the generation was reset (UNKNOWN_MEMBER_ID,
   ILLEGAL_GENERATION, session expiry) every owned partition is *lost*;
   otherwise an EAGER member *revokes* everything, a COOPERATIVE one only the
   partitions of topics it no longer subscribes to;
2. JoinGroup with one protocol per configured assignor, in preference order,
   each carrying a consumer-protocol subscription (v3: topics, assignor user
   data, owned partitions, generation, rack). MEMBER_ID_REQUIRED (KIP-394):
   rejoin at once with the id given;
3. the leader decodes the members' subscriptions, reads the partition counts
   of every topic any member subscribes to, runs the selected assignor and
   sends the result in its SyncGroup; followers send an empty SyncGroup;
4. on the assignment: revoked = owned - assigned, added = assigned - owned
   (the adapter runs the revoke hook, then the assign hook). A COOPERATIVE
   member that revoked anything rejoins at once (KIP-429's second round,
   which hands the released partitions to their new owner).

Errors (join, sync, heartbeat): UNKNOWN_MEMBER_ID resets the member id and the
generation and rejoins at once; ILLEGAL_GENERATION resets the generation but
keeps the member id (the Java client does this: the id may still be valid, and
reusing it spares the group a wait for the old id to expire);
REBALANCE_IN_PROGRESS rejoins; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE
rediscover with backoff; FENCED_INSTANCE_ID and configuration errors
(INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, ...) are fatal.

Static membership (``group_instance_id``, KIP-345): the member sends its
instance id everywhere and does not send LeaveGroup on close, so a restart
within ``session_timeout_ms`` gets its old assignment without a rebalance.

The leader re-reads the partition counts of the group's topics every
``metadata_max_age_ms``; a change (or a topic appearing) makes it rejoin,
which rebalances the group. A static leader told to skip the assignment (JoinGroup
v9) first checks the assignment it inherited: ``assignment_check_due`` after its
SyncGroup, ``describe_request()`` -> send -> ``on_describe_response()`` -> read the
counts of its ``topics`` -> ``check_assignment()``, which rejoins when the
assignment misses something (Kafka's Java client skips this check, and a partition
added while its leader was away stays unowned until the next rebalance). A static
follower checks its first assignment after it starts the same way: Kafka gives it back
its old one without a rebalance even when its subscription changed meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..protocol.apis.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
)
from ..protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupRequestMemberIdentity
from ..protocol.apis.sync_group import SyncGroupRequest, SyncGroupResponse
from ..protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    SUBSCRIPTION_MAX_VERSION,
    ConsumerProtocolSubscription,
    decode_assignment,
    encode_subscription,
)
from ..protocol.errors import ErrorCode, is_retriable
from ..protocol.errors import name as error_name
from ..protocol.primitives import DecodeError
from .assignors import (
    COOPERATIVE,
    DEFAULT_GENERATION,
    Assignor,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    select_rebalance_protocol,
)
from .classic_leader import (
    DescribedAssignment,
    GenerationLeader,
    assignment_gaps,
    flatten_partitions,
    group_partitions,
    read_described_group,
    subscribed_topics,
)
from .classic_ownership import OwnedPartitions
from .consumer_config import ConsumerConfig
from .group_errors import FatalGroupError, classify_group_error
from .heartbeat_timer import HeartbeatTimer
from .membership_types import Action, Generation, MemberState, Outcome, PrepareResult

log = logging.getLogger(__name__)

NO_GENERATION = DEFAULT_GENERATION
UNKNOWN_MEMBER_ID = ""


@dataclass(frozen=True, slots=True)
class AssignmentChange:
    assigned: tuple[TopicPartition, ...]
    """The full assignment received."""
    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    rejoin: bool
    """True when a COOPERATIVE member revoked something: the second round follows at once."""


class MemberCore:
    """The member's state and decisions, without I/O.

    Callers drive it: ``join_request()`` -> send -> ``on_join_response()``;
    if leader ``assign()``; ``sync_request()`` -> send -> ``on_sync_response()``
    -> ``complete_assignment()``. Heartbeats: ``time_to_next_heartbeat(now)``,
    ``heartbeat_request(now)`` -> send -> ``on_heartbeat_response()``.
    """

    def __init__(self, config: ConsumerConfig, assignors: Sequence[Assignor] | None = None) -> None:
        if not config.group_id:
            raise ValueError("group membership needs a group_id")
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = config.group_instance_id
        self.assignors: list[Assignor] = (
            list(assignors) if assignors is not None else config.assignors()
        )
        if not self.assignors:
            raise ValueError("group membership needs at least one partition assignor")
        self.protocol: RebalanceProtocol = select_rebalance_protocol(self.assignors)
        self.session_timeout_ms = config.session_timeout_ms
        self.rebalance_timeout_ms = config.effective_rebalance_timeout_ms

        self.subscription: tuple[str, ...] = ()
        # The subscription the last JoinGroup carried (compared when its assignment arrives).
        self.joined_subscription: tuple[str, ...] = ()
        self.member_id: str = UNKNOWN_MEMBER_ID
        self.generation_id: int = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str = ""
        self.state = MemberState.UNJOINED
        self.ownership = OwnedPartitions()
        """What it owns, and the last assignment it received."""
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self.needs_join_prepare = True
        self.leader = GenerationLeader(self.group_id, config.metadata_max_age_ms / 1000.0)
        """The leader's state and metadata watch (members empty while following)."""
        self.assignment_unchecked = False
        """A static leader skipped the assignment: the one it inherited is not checked yet."""
        self.first_static_sync = config.group_instance_id is not None
        """A static member's first assignment since it started may be one made before it left:
        Kafka hands a static member back its old assignment in a Stable group without a
        rebalance even when its subscription changed (only a change of the selected protocol
        rebalances), so a topic it newly subscribes to would stay unowned. Checked once."""

        self.heartbeats = HeartbeatTimer(
            config.heartbeat_interval_ms / 1000.0,
            config.retry_backoff_ms / 1000.0,
            config.session_timeout_ms / 1000.0,
        )
        # The state the last heartbeat was sent in: REBALANCE_IN_PROGRESS answering one sent
        # while the member completed its join is not news.
        self.heartbeat_sent_state = MemberState.UNJOINED

    # ------------------------------------------------------------ subscription / state

    @property
    def generation(self) -> Generation | None:
        """The current generation once stable, else None."""
        if self.state is not MemberState.STABLE or self.generation_id < 0:
            return None
        return Generation(
            self.generation_id,
            self.member_id,
            self.protocol_name,
            self.leader_id,
            tuple(sorted(self.ownership.partitions)),
            self.group_instance_id,
        )

    @property
    def owned(self) -> set[TopicPartition]:
        return self.ownership.partitions

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    @property
    def generation_key(self) -> tuple[int, str]:
        return self.generation_id, self.member_id

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Set the subscribed topics; True (and a rejoin is requested) when they changed."""
        new = tuple(sorted(set(topics)))
        if any(not t for t in new):
            raise ValueError("topic names must be non-empty")
        if new == self.subscription:
            return False
        self.subscription = new
        self.request_rejoin(f"subscription changed to {list(new)}")
        return True

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info(
                "group %s: member %s requests a rejoin: %s", self.group_id, self.member_id, reason
            )
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def reset(self, reason: str, *, reset_member_id: bool) -> None:
        """Forget the generation (and the member id): the next join starts over (partitions lost)."""
        log.info(
            "group %s: resetting generation%s: %s",
            self.group_id,
            " and member id" if reset_member_id else "",
            reason,
        )
        self.state = MemberState.UNJOINED
        self.generation_id = NO_GENERATION
        self.protocol_name = None
        self.leader_id = ""
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.needs_join_prepare = True
        self.request_rejoin(reason)

    @property
    def generation_reset(self) -> bool:
        return self.generation_id == NO_GENERATION or not self.member_id

    # ------------------------------------------------------------ before joining

    def prepare_join(self) -> PrepareResult:
        """What the application gives up before JoinGroup (ConsumerCoordinator.onJoinPrepare)."""
        return self.ownership.before_join(
            generation_reset=self.generation_reset,
            protocol=self.protocol,
            subscription=self.subscription,
        )

    def prepare_leave(self) -> PrepareResult:
        """What the application gives up when leaving (ConsumerCoordinator.onLeavePrepare)."""
        lost = self.generation_reset or self.state is not MemberState.STABLE
        return self.ownership.give_up("lost" if lost else "revoked")

    # ------------------------------------------------------------ JoinGroup

    def subscription_metadata(self, assignor: Assignor) -> bytes:
        topics = list(self.subscription)
        sub = ConsumerProtocolSubscription(
            topics=topics,
            user_data=assignor.subscription_user_data(
                topics,
                self.ownership.last_assignment,
                self.ownership.last_assignment_generation,
            ),
            owned_partitions=group_partitions(self.ownership.partitions),
            generation_id=self.generation_id,
            rack_id=self.config.client_rack,
        )
        return encode_subscription(sub, SUBSCRIPTION_MAX_VERSION)

    def join_request(self) -> JoinGroupRequest:
        if not self.subscription:
            raise ValueError("cannot join a group without a subscription")
        self.state = MemberState.PREPARING_REBALANCE
        self.joined_subscription = self.subscription
        self.assignment_unchecked = False
        return JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                JoinGroupRequestProtocol(name=a.name, metadata=self.subscription_metadata(a))
                for a in self.assignors
            ],
            reason=self.rejoin_reason[:255] if self.rejoin_reason else None,
        )

    def on_join_response(
        self,
        response: JoinGroupResponse,
        sent_member_id: str | None = None,
        now: float | None = None,
    ) -> Outcome:
        """Interpret a JoinGroup answer; ``now`` restarts the session clock (the coordinator is alive)."""
        code = response.error_code
        sent = self.member_id if sent_member_id is None else sent_member_id
        if code == ErrorCode.NONE:
            if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
                self.state = MemberState.UNJOINED
                return Outcome(
                    Action.FATAL,
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"group protocol type is {response.protocol_type!r}, not {PROTOCOL_TYPE!r}",
                )
            if self.state is not MemberState.PREPARING_REBALANCE:
                return Outcome(Action.REJOIN, ErrorCode.NONE, "join answer arrived after a reset")
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            self.protocol_name = response.protocol_name
            self.leader_id = response.leader
            self.leader.joined(
                response.members if self.is_leader else [], bool(response.skip_assignment)
            )
            self.state = MemberState.COMPLETING_REBALANCE
            if now is not None:
                # The join may have taken longer than a session: count from its answer.
                self.heartbeats.restart(now)
            log.info(
                "group %s: joined generation %d as %s (%s, protocol %s)",
                self.group_id,
                self.generation_id,
                self.member_id,
                "leader" if self.is_leader else "follower",
                self.protocol_name,
            )
            return Outcome(Action.OK)
        action = classify_group_error(code)
        reason = f"JoinGroup: {error_name(code)}"
        self.state = MemberState.UNJOINED
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self.generation_id = NO_GENERATION
            self.request_rejoin(f"need to rejoin with the given member id {response.member_id}")
        elif code == ErrorCode.UNKNOWN_MEMBER_ID:
            if sent == self.member_id:
                self.reset(reason, reset_member_id=True)
        elif code == ErrorCode.ILLEGAL_GENERATION:
            if sent == self.member_id:
                self.reset(reason, reset_member_id=False)
        elif action is not Action.FATAL:
            self.request_rejoin(reason)
        return Outcome(action, code, reason)

    # ------------------------------------------------------------ leader

    def selected_assignor(self) -> Assignor:
        for a in self.assignors:
            if a.name == self.protocol_name:
                return a
        raise FatalGroupError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"the coordinator selected assignor {self.protocol_name!r}, which this member does not have",
        )

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """Run the selected assignor (leader); remembers the counts for the metadata watch."""
        assignor = self.selected_assignor()
        return self.leader.assign(assignor, self.protocol, partitions_per_topic, subscriptions)

    def leader_topics(self) -> list[str]:
        """Topics whose partition counts the leader needs after its JoinGroup (none for a follower)."""
        if not self.is_leader:
            return []
        return list(subscribed_topics(self.leader.subscriptions().values()))

    def leader_assignment(
        self, partitions_per_topic: Mapping[str, int]
    ) -> dict[str, list[TopicPartition]] | None:
        """What the SyncGroup carries: the leader's assignment, or None (a follower; or a static
        leader back in a Stable group, JoinGroup v9 ``skip_assignment``, which takes the current
        counts as the baseline of its metadata watch and checks the inherited assignment once
        its SyncGroup is answered: ``assignment_check_due``)."""
        if not self.is_leader:
            return None
        subscriptions = self.leader.subscriptions()
        if not self.leader.skip_assignment:
            return self.assign(partitions_per_topic, subscriptions)
        self.leader.remember_counts(partitions_per_topic, subscriptions)
        self.assignment_unchecked = True
        return None

    # ------------------------------------------------------------ SyncGroup

    def sync_request(
        self, assignment: Mapping[str, Iterable[TopicPartition]] | None
    ) -> SyncGroupRequest:
        assignments = self.leader.encode(assignment) if assignment else []
        return SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            assignments=assignments,
        )

    def on_sync_response(
        self, response: SyncGroupResponse, sent: tuple[int, str]
    ) -> tuple[Outcome, list[TopicPartition] | None]:
        code = response.error_code
        if code == ErrorCode.NONE:
            if self.state is not MemberState.COMPLETING_REBALANCE or self.generation_key != sent:
                # A heartbeat reset the generation meanwhile: this assignment is void.
                self.request_rejoin("generation reset before the assignment arrived")
                return Outcome(
                    Action.REJOIN, ErrorCode.ILLEGAL_GENERATION, "stale SyncGroup answer"
                ), None
            if response.protocol_type is not None and response.protocol_type != PROTOCOL_TYPE:
                return Outcome(
                    Action.FATAL,
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"group protocol type is {response.protocol_type!r}",
                ), None
            if response.protocol_name is not None and response.protocol_name != self.protocol_name:
                return Outcome(
                    Action.FATAL,
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"SyncGroup names protocol {response.protocol_name!r}, "
                    f"JoinGroup named {self.protocol_name!r}",
                ), None
            assigned: list[TopicPartition] = []
            if response.assignment:
                try:
                    _v, asg = decode_assignment(response.assignment)
                except (DecodeError, ValueError) as exc:
                    self.request_rejoin("unreadable assignment")
                    return Outcome(
                        Action.BACKOFF, ErrorCode.NONE, f"unreadable assignment: {exc}"
                    ), None
                assigned = flatten_partitions(asg.assigned_partitions)
            self.state = MemberState.STABLE
            self.rejoin_needed = False
            self.rejoin_reason = ""
            if self.first_static_sync:
                self.first_static_sync = False
                if not self.is_leader:
                    # (A leader that assigned made a fresh one; one that skipped is checked.)
                    self.assignment_unchecked = True
            if self.subscription != self.joined_subscription:
                # The subscription changed while this join was in flight: the assignment is
                # for the old one (as the Java client, rejoin once it is taken).
                self.request_rejoin(f"subscription changed to {list(self.subscription)} during the rebalance")
            return Outcome(Action.OK), assigned
        action = classify_group_error(code)
        reason = f"SyncGroup: {error_name(code)}"
        if self.generation_key == sent:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.reset(reason, reset_member_id=True)
            elif code == ErrorCode.ILLEGAL_GENERATION:
                self.reset(reason, reset_member_id=False)
            else:
                self.state = MemberState.UNJOINED
                if action is not Action.FATAL:
                    self.request_rejoin(reason)
        return Outcome(action, code, reason), None

    def complete_assignment(
        self, assigned: Iterable[TopicPartition], now: float | None = None
    ) -> AssignmentChange:
        """Apply a new assignment (ConsumerCoordinator.onJoinComplete)."""
        new = set(assigned)
        foreign = sorted(tp for tp in new if tp[0] not in self.subscription)
        if foreign:
            # Subscription changed during the rebalance (or a confused leader): rejoin.
            log.warning(
                "group %s: assigned partitions of unsubscribed topics %s; rejoining",
                self.group_id,
                foreign,
            )
            new.difference_update(foreign)
            self.request_rejoin("assignment does not match the subscription")
        revoked, added = self.ownership.assign(new, self.generation_id)
        rejoin = self.protocol == COOPERATIVE and bool(revoked)
        if rejoin:
            self.request_rejoin(f"revoked {len(revoked)} partition(s): second cooperative round")
        self.leader.next_check = None  # a new assignment: the watch starts over
        self.needs_join_prepare = True  # the next rebalance tells the application first
        if now is not None:
            self.heartbeats.restart(now)
        return AssignmentChange(tuple(sorted(new)), revoked, added, rejoin)

    # ------------------------------------------------------------ heartbeats

    def time_to_next_heartbeat(self, now: float) -> float | None:
        """Seconds until the next heartbeat is due; None when this member should not heartbeat."""
        if self.state not in (MemberState.STABLE, MemberState.COMPLETING_REBALANCE):
            return None
        if self.generation_reset:
            return None
        return self.heartbeats.time_to_next(now)

    def heartbeat_request(self, now: float) -> tuple[HeartbeatRequest, tuple[int, str]]:
        self.heartbeats.sent(now)
        self.heartbeat_sent_state = self.state
        request = HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
        )
        return request, self.generation_key

    def heartbeat_failed(self, now: float) -> None:
        """No answer (connection lost, timeout): retry after the backoff."""
        self.heartbeats.failed(now)

    def session_expired(self, now: float) -> bool:
        """No successful heartbeat for a whole session timeout: the coordinator has dropped us."""
        return self.heartbeats.session_expired(now)

    @property
    def last_heartbeat_receive(self) -> float | None:
        """When the coordinator last answered a heartbeat, join or sync."""
        return self.heartbeats.last_receive

    def on_heartbeat_response(
        self, response: HeartbeatResponse, sent: tuple[int, str], now: float
    ) -> Outcome:
        code = response.error_code
        if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            self.heartbeats.failed(now)
            return Outcome(Action.REDISCOVER, code, f"Heartbeat: {error_name(code)}")
        # Every other answer proves the coordinator is alive.
        self.heartbeats.answered(now)
        if code == ErrorCode.NONE:
            return Outcome(Action.OK)
        reason = f"Heartbeat: {error_name(code)}"
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            if (
                self.state is MemberState.STABLE
                and self.heartbeat_sent_state is MemberState.STABLE
                and sent == self.generation_key
            ):
                self.request_rejoin("the group is rebalancing")
                return Outcome(Action.REJOIN, code, reason)
            return Outcome(Action.IGNORE, code, reason)
        if code in (
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.FENCED_INSTANCE_ID,
        ):
            if sent != self.generation_key:
                return Outcome(Action.IGNORE, code, reason + " (for an older generation)")
            if code == ErrorCode.FENCED_INSTANCE_ID:
                return Outcome(Action.FATAL, code, reason)
            self.reset(reason, reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            return Outcome(Action.REJOIN, code, reason)
        if code == 30 or not is_retriable(code):  # GROUP_AUTHORIZATION_FAILED, unexpected errors
            return Outcome(Action.FATAL, code, reason)
        self.heartbeats.failed(now)
        return Outcome(Action.BACKOFF, code, reason)

    def on_commit_error(self, code: int, sent: tuple[int, str]) -> None:
        """An OffsetCommit answer that says the membership is stale (Kafka does the same)."""
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("OffsetCommit: the group is rebalancing")
        elif (
            code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)
            and sent == self.generation_key
        ):
            self.reset(
                f"OffsetCommit: {error_name(code)}",
                reset_member_id=code == ErrorCode.UNKNOWN_MEMBER_ID,
            )

    # ------------------------------------------------------------ the leader's metadata watch

    def time_to_metadata_check(self, now: float) -> float | None:
        """Seconds until the leader re-reads the partition counts (armed on first ask); None
        when there is nothing to watch (a follower, or a rejoin is already due)."""
        if not self.is_leader or self.rejoin_needed:
            return None
        return self.leader.time_to_check(now)

    def metadata_check_due(self, now: float) -> bool:
        """True (once) when the leader should re-read the group's partition counts now."""
        if not self.is_leader or self.rejoin_needed:
            return False
        return self.leader.check_due(now)

    def on_metadata(self, partitions_per_topic: Mapping[str, int]) -> list[str]:
        """The counts the leader read: a change (or a topic appearing) rejoins, which rebalances."""
        changed = self.leader.changed_topics(partitions_per_topic)
        if changed:
            self.request_rejoin(f"partition count of {changed} changed")
        return changed

    # ------------------------------------------------------------ a static leader's inherited assignment

    @property
    def assignment_check_due(self) -> bool:
        """A static leader has its inherited assignment and should check it now."""
        return self.assignment_unchecked and self._checking(self.generation_key)

    def describe_request(self) -> tuple[DescribeGroupsRequest, tuple[int, str]]:
        """DescribeGroups for this group (the check of an inherited assignment), and the
        generation it checks for."""
        self.assignment_unchecked = False
        return DescribeGroupsRequest(groups=[self.group_id]), self.generation_key

    def on_describe_response(
        self, response: DescribeGroupsResponse, sent: tuple[int, str]
    ) -> DescribedAssignment | None:
        """The inherited assignment to check against the counts of its ``topics``; None when
        there is nothing to check (the generation moved on) or it cannot be trusted, which
        rejoins: a rebalance is the safe way to be sure every partition has an owner."""
        if not self._checking(sent):
            return None
        described = read_described_group(response, self.group_id, PROTOCOL_TYPE, self.member_id)
        if isinstance(described, str):
            self.request_rejoin(f"cannot check the inherited assignment: {described}")
            return None
        return described

    def check_assignment(
        self,
        described: DescribedAssignment,
        partitions_per_topic: Mapping[str, int],
        sent: tuple[int, str],
    ) -> list[str]:
        """Topics the inherited assignment does not cover as they are now; any rejoins (a
        rebalance). None: a leader's metadata watch goes on from these counts."""
        if not self._checking(sent):
            return []
        gaps = assignment_gaps(described, partitions_per_topic)
        if gaps:
            self.request_rejoin(f"the inherited assignment does not cover {gaps} as they are now")
        elif self.is_leader:
            self.leader.remember_counts(
                partitions_per_topic,
                {m: Subscription(topics=topics) for m, topics in described.subscriptions.items()},
            )
        return gaps

    def assignment_check_failed(self, reason: str, sent: tuple[int, str]) -> None:
        """No answer to the DescribeGroups: unchecked, so rebalance."""
        if self._checking(sent):
            self.request_rejoin(f"cannot check the inherited assignment: {reason}")

    def _checking(self, sent: tuple[int, str]) -> bool:
        """Still in the generation the check was sent for, and nothing else due."""
        return self.state is MemberState.STABLE and self.generation_key == sent and not self.rejoin_needed

    # ------------------------------------------------------------ failures

    def join_failed(self, reason: str) -> None:
        """JoinGroup/SyncGroup got no answer (connection lost, timeout): join again later."""
        self.state = MemberState.UNJOINED
        self.request_rejoin(reason)

    def fail(self) -> tuple[TopicPartition, ...]:
        """A fatal error: out of the group for good; returns the partitions now lost."""
        self.state = MemberState.UNJOINED
        return self.ownership.take_all()

    # ------------------------------------------------------------ leaving

    @property
    def sends_leave_group(self) -> bool:
        """Dynamic members that have an id send LeaveGroup; static ones keep their place (KIP-345)."""
        return self.group_instance_id is None and bool(self.member_id)

    def left(self) -> None:
        self.state = MemberState.UNJOINED

    def leave_request(self, reason: str) -> LeaveGroupRequest:
        return LeaveGroupRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            members=[
                LeaveGroupRequestMemberIdentity(
                    member_id=self.member_id,
                    group_instance_id=self.group_instance_id,
                    reason=reason[:255],
                )
            ],
        )

