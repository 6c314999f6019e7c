"""Consumer group membership, the member's side of the classic group protocol.

Two layers, as everywhere in the client (DESIGN.md principle 6):

- :class:`MemberCore` is a sans-I/O state object. It builds the JoinGroup,
  SyncGroup, Heartbeat and LeaveGroup requests, interprets their responses
  into an :class:`Outcome` (what to do next), runs the assignor when this
  member leads, and computes what a new assignment revokes and adds. Time is
  passed in (``now``, seconds on a monotonic clock), so every decision is
  testable without a socket or a sleep.
- :class:`GroupMembership` is the asyncio adapter: one task drives joins and
  rebalances, another sends heartbeats every ``heartbeat_interval_ms``; it
  awaits the facade's :class:`RebalanceListener` hooks in order around each
  join and surfaces fatal errors.

The rebalance (seed 000; Kafka's ``AbstractCoordinator`` / ``ConsumerCoordinator``):

1. discover the coordinator (FindCoordinator; COORDINATOR_NOT_AVAILABLE or
   NOT_COORDINATOR: back off and rediscover);
2. before JoinGroup: if the generation was reset (UNKNOWN_MEMBER_ID,
   ILLEGAL_GENERATION, session expiry) every owned partition is *lost*;
   otherwise an EAGER member *revokes* everything, a COOPERATIVE one only the
   partitions of topics it no longer subscribes to;
3. JoinGroup with one protocol per configured assignor, in preference order,
   each carrying a consumer-protocol subscription (v3: topics, assignor user
   data, owned partitions, generation, rack). MEMBER_ID_REQUIRED (KIP-394):
   rejoin at once with the id given;
4. the leader decodes the members' subscriptions, reads the partition counts
   of every topic any member subscribes to, runs the selected assignor and
   sends the result in its SyncGroup; followers send an empty SyncGroup;
5. on the assignment: revoked = owned - assigned, added = assigned - owned;
   ``on_partitions_revoked(revoked)`` then ``on_partitions_assigned(added)``.
   A COOPERATIVE member that revoked anything rejoins at once (KIP-429's
   second round, which hands the released partitions to their new owner).

Errors (join, sync, heartbeat): UNKNOWN_MEMBER_ID resets the member id and the
generation and rejoins at once; ILLEGAL_GENERATION resets the generation but
keeps the member id (the Java client does this: the id may still be valid, and
reusing it spares the group a wait for the old id to expire);
REBALANCE_IN_PROGRESS rejoins; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE
rediscover with backoff; FENCED_INSTANCE_ID and configuration errors
(INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, ...) are fatal and
surface to the user from :meth:`GroupMembership.ensure_active`.

Static membership (``group_instance_id``, KIP-345): the member sends its
instance id everywhere and does not send LeaveGroup on close, so a restart
within ``session_timeout_ms`` gets its old assignment without a rebalance.

The leader re-reads the partition counts of the group's topics every
``metadata_max_age_ms``; a change (or a topic appearing) makes it rejoin,
which rebalances the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..protocol.apis.find_coordinator import SPEC as FIND_COORDINATOR
from ..protocol.apis.find_coordinator import FindCoordinatorRequest
from ..protocol.apis.heartbeat import SPEC as HEARTBEAT
from ..protocol.apis.heartbeat import HeartbeatRequest, HeartbeatResponse
from ..protocol.apis.join_group import SPEC as JOIN_GROUP
from ..protocol.apis.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from ..protocol.apis.leave_group import SPEC as LEAVE_GROUP
from ..protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupRequestMemberIdentity
from ..protocol.apis.sync_group import SPEC as SYNC_GROUP
from ..protocol.apis.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from ..protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    SUBSCRIPTION_MAX_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ConsumerProtocolTopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from ..protocol.primitives import DecodeError
from .assignors import (
    COOPERATIVE,
    DEFAULT_GENERATION,
    EAGER,
    Assignor,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    cooperative_violations,
    select_rebalance_protocol,
)
from .cluster import BrokerNode, Cluster
from .connection import BrokerConnection, ConnectionClosed
from .consumer_config import ConsumerConfig
from .retry import backoff_s
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

NO_GENERATION = DEFAULT_GENERATION
UNKNOWN_MEMBER_ID = ""
JOIN_GROUP_TIMEOUT_LAPSE_S = 5.0
"""Added to the rebalance timeout for JoinGroup/SyncGroup, which block on the coordinator."""

Clock = Callable[[], float]


# ---------------------------------------------------------------------------- errors


class GroupError(KafkaError):
    """A group operation failed with a protocol error."""


class FatalGroupError(GroupError):
    """This member cannot continue in the group (configuration error, fenced, unauthorized)."""


class FencedInstanceError(FatalGroupError):
    """Another consumer with the same ``group_instance_id`` replaced this one (KIP-345)."""

    def __init__(self, group_instance_id: str | None, message: str | None = None) -> None:
        super().__init__(
            ErrorCode.FENCED_INSTANCE_ID,
            message
            or f"group instance id {group_instance_id!r} was fenced: another consumer joined "
            "the group with the same group_instance_id",
        )
        self.group_instance_id = group_instance_id


def fatal_error(
    code: int, group_id: str, group_instance_id: str | None, what: str
) -> FatalGroupError:
    if code == ErrorCode.FENCED_INSTANCE_ID:
        return FencedInstanceError(group_instance_id)
    hints = {
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL: (
            "the group's members have no partition assignor (or protocol type) in common"
        ),
        ErrorCode.INVALID_SESSION_TIMEOUT: (
            "session_timeout_ms is outside the broker's group.min/max.session.timeout.ms"
        ),
        ErrorCode.GROUP_MAX_SIZE_REACHED: f"group {group_id!r} already has group.max.size members",
        ErrorCode.UNSUPPORTED_VERSION: (
            "the broker does not support a request this member needs "
            "(group_instance_id needs JoinGroup v5, Kafka 2.3+)"
        ),
    }
    hint = hints.get(code, "")
    message = f"{what} for group {group_id!r} failed: {error_name(code)}" + (
        f" ({hint})" if hint else ""
    )
    return FatalGroupError(code, message)


# ---------------------------------------------------------------------------- data


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    """Not in the group (before the first join, or after a reset)."""
    PREPARING_REBALANCE = "preparing-rebalance"
    """JoinGroup sent, no answer yet."""
    COMPLETING_REBALANCE = "completing-rebalance"
    """Joined; waiting for the SyncGroup answer (the assignment)."""
    STABLE = "stable"
    """Has an assignment for the current generation and heartbeats."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One generation of the group as this member saw it: the "session" of sarama."""

    generation_id: int
    member_id: str
    protocol_name: str | None
    leader_id: str
    assignment: tuple[TopicPartition, ...] = ()
    """Every partition this member owns in this generation (sorted)."""
    group_instance_id: str | None = None

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id and bool(self.member_id)


class Action(enum.Enum):
    OK = "ok"
    REJOIN = "rejoin"
    """(Re)join the group at once."""
    REDISCOVER = "rediscover"
    """Forget the coordinator, back off, find it again."""
    BACKOFF = "backoff"
    """Retry after a backoff."""
    FATAL = "fatal"
    IGNORE = "ignore"
    """A stale answer (for an older generation): nothing to do."""


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    error: int = ErrorCode.NONE
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.action is Action.OK


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """What to tell the application before JoinGroup: ``kind`` is "lost", "revoked" or ""."""

    kind: str
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class AssignmentChange:
    assigned: tuple[TopicPartition, ...]
    """The full assignment received."""
    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    rejoin: bool
    """True when a COOPERATIVE member revoked something: the second round follows at once."""


def group_partitions(partitions: Iterable[TopicPartition]) -> list[ConsumerProtocolTopicPartition]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    return [ConsumerProtocolTopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()]


def flatten_partitions(groups: Iterable[ConsumerProtocolTopicPartition]) -> list[TopicPartition]:
    return sorted({(g.topic, p) for g in groups for p in g.partitions})


# Errors answered to JoinGroup / SyncGroup, and what they mean for the member.
_FATAL_JOIN_ERRORS = frozenset(
    {
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_GROUP_ID,
        30,  # GROUP_AUTHORIZATION_FAILED
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)


def classify_group_error(code: int) -> Action:
    """The action for an error answered to JoinGroup or SyncGroup (the table of seed 000)."""
    if code == ErrorCode.NONE:
        return Action.OK
    if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return Action.REDISCOVER
    if code in (
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.MEMBER_ID_REQUIRED,
        ErrorCode.REBALANCE_IN_PROGRESS,
    ):
        return Action.REJOIN
    if code in _FATAL_JOIN_ERRORS:
        return Action.FATAL
    return Action.BACKOFF if is_retriable(code) else Action.FATAL


# ---------------------------------------------------------------------------- sans-I/O core


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
        self.heartbeat_interval_s = config.heartbeat_interval_ms / 1000.0
        self.session_timeout_s = config.session_timeout_ms / 1000.0

        self.subscription: tuple[str, ...] = ()
        # The subscription the last JoinGroup carried (compared when its assignment arrives).
        self.joined_subscription: tuple[str, ...] = ()
        self.member_id: str = UNKNOWN_MEMBER_ID
        self.generation_id: int = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str = ""
        self.state = MemberState.UNJOINED
        self.owned: set[TopicPartition] = set()
        # The last assignment received and its generation: what sticky assignors put in
        # their user data, even after an EAGER member revoked it all before rejoining.
        self.last_assignment: tuple[TopicPartition, ...] = ()
        self.last_assignment_generation: int = NO_GENERATION
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self.needs_join_prepare = True
        self.skip_assignment = False
        self.join_members: list[JoinGroupResponseMember] = []
        # Partition counts the leader assigned with (topic -> count; 0 = topic missing).
        self.assigned_partition_counts: dict[str, int] = {}
        self.group_topics: tuple[str, ...] = ()

        # heartbeats
        self.last_heartbeat_send: float | None = None
        self.last_heartbeat_receive: float | None = None
        self.heartbeat_in_flight = False
        self.heartbeat_failed_at: float | None = None
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
            tuple(sorted(self.owned)),
            self.group_instance_id,
        )

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
        owned = tuple(sorted(self.owned))
        if self.generation_reset:
            if owned:
                self.owned.clear()
                return PrepareResult("lost", owned)
            return PrepareResult("")
        if self.protocol == EAGER:
            self.owned.clear()
            return PrepareResult("revoked", owned) if owned else PrepareResult("")
        gone = tuple(tp for tp in owned if tp[0] not in self.subscription)
        if gone:
            self.owned.difference_update(gone)
            return PrepareResult("revoked", gone)
        return PrepareResult("")

    def prepare_leave(self) -> PrepareResult:
        """What the application gives up when leaving (ConsumerCoordinator.onLeavePrepare)."""
        owned = tuple(sorted(self.owned))
        self.owned.clear()
        if not owned:
            return PrepareResult("")
        if self.generation_reset or self.state is not MemberState.STABLE:
            return PrepareResult("lost", owned)
        return PrepareResult("revoked", owned)

    # ------------------------------------------------------------ JoinGroup

    def subscription_metadata(self, assignor: Assignor) -> bytes:
        topics = list(self.subscription)
        sub = ConsumerProtocolSubscription(
            topics=topics,
            user_data=assignor.subscription_user_data(
                topics, self.last_assignment, self.last_assignment_generation
            ),
            owned_partitions=group_partitions(self.owned),
            generation_id=self.generation_id,
            rack_id=self.config.client_rack,
        )
        return encode_subscription(sub, SUBSCRIPTION_MAX_VERSION)

    def join_request(self) -> JoinGroupRequest:
        if not self.subscription:
            raise ValueError("cannot join a group without a subscription")
        self.state = MemberState.PREPARING_REBALANCE
        self.joined_subscription = self.subscription
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
            self.skip_assignment = bool(response.skip_assignment)
            self.join_members = list(response.members) if self.is_leader else []
            self.state = MemberState.COMPLETING_REBALANCE
            if now is not None:
                # The join may have taken longer than a session: count from its answer.
                self.last_heartbeat_send = self.last_heartbeat_receive = now
                self.heartbeat_failed_at = None
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

    def member_subscriptions(
        self, members: Sequence[JoinGroupResponseMember] | None = None
    ) -> dict[str, Subscription]:
        """Decode the members' subscriptions (leader only). Unreadable ones subscribe to nothing."""
        out: dict[str, Subscription] = {}
        for m in self.join_members if members is None else members:
            try:
                _version, sub = decode_subscription(m.metadata)
            except (DecodeError, ValueError) as exc:
                log.warning(
                    "group %s: member %s sent an unreadable subscription: %s",
                    self.group_id,
                    m.member_id,
                    exc,
                )
                out[m.member_id] = Subscription(topics=(), group_instance_id=m.group_instance_id)
                continue
            out[m.member_id] = Subscription(
                topics=tuple(sub.topics),
                user_data=sub.user_data,
                owned_partitions=flatten_partitions(sub.owned_partitions),
                generation_id=sub.generation_id,
                rack_id=sub.rack_id,
                group_instance_id=m.group_instance_id,
            )
        return out

    def subscription_versions(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.join_members:
            try:
                out[m.member_id] = decode_subscription(m.metadata)[0]
            except (DecodeError, ValueError):
                out[m.member_id] = 0
        return out

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
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        self.group_topics = tuple(topics)
        self.assigned_partition_counts = {t: int(partitions_per_topic.get(t, 0)) for t in topics}
        counts = {t: n for t, n in self.assigned_partition_counts.items() if n > 0}
        assignment = assignor.assign(counts, subscriptions)
        for member in subscriptions:
            assignment.setdefault(member, [])
        if self.protocol == COOPERATIVE:
            bad = cooperative_violations(subscriptions, assignment)
            if bad:
                # Never hand out a partition another member still owns: withhold it this round.
                log.error(
                    "group %s: assignor %s broke the cooperative protocol for %s; withholding them",
                    self.group_id,
                    assignor.name,
                    sorted(bad),
                )
                assignment = {
                    m: [tp for tp in tps if tp not in bad] for m, tps in assignment.items()
                }
        return assignment

    # ------------------------------------------------------------ SyncGroup

    def sync_request(
        self, assignment: Mapping[str, Iterable[TopicPartition]] | None
    ) -> SyncGroupRequest:
        assignments: list[SyncGroupRequestAssignment] = []
        if assignment:
            versions = self.subscription_versions()
            for member, tps in sorted(assignment.items()):
                version = min(versions.get(member, 0), SUBSCRIPTION_MAX_VERSION)
                data = encode_assignment(
                    ConsumerProtocolAssignment(
                        assigned_partitions=group_partitions(tps), user_data=None
                    ),
                    version,
                )
                assignments.append(SyncGroupRequestAssignment(member_id=member, assignment=data))
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
        revoked = tuple(sorted(self.owned - new))
        added = tuple(sorted(new - self.owned))
        self.owned = new
        self.last_assignment = tuple(sorted(new))
        self.last_assignment_generation = self.generation_id
        rejoin = self.protocol == COOPERATIVE and bool(revoked)
        if rejoin:
            self.request_rejoin(f"revoked {len(revoked)} partition(s): second cooperative round")
        if now is not None:
            self.last_heartbeat_send = now
            self.last_heartbeat_receive = now
            self.heartbeat_failed_at = None
        return AssignmentChange(tuple(sorted(new)), revoked, added, rejoin)

    # ------------------------------------------------------------ heartbeats

    def time_to_next_heartbeat(self, now: float) -> float | None:
        """Seconds until the next heartbeat is due; None when this member should not heartbeat."""
        if self.state not in (MemberState.STABLE, MemberState.COMPLETING_REBALANCE):
            return None
        if self.generation_reset or self.heartbeat_in_flight:
            return None
        if self.heartbeat_failed_at is not None:
            retry_at = self.heartbeat_failed_at + self.config.retry_backoff_ms / 1000.0
            return max(0.0, retry_at - now)
        if self.last_heartbeat_send is None:
            return 0.0
        return max(0.0, self.last_heartbeat_send + self.heartbeat_interval_s - now)

    def heartbeat_request(self, now: float) -> tuple[HeartbeatRequest, tuple[int, str]]:
        self.last_heartbeat_send = now
        self.heartbeat_in_flight = True
        self.heartbeat_sent_state = self.state
        if self.last_heartbeat_receive is None:
            self.last_heartbeat_receive = now
        request = HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
        )
        return request, self.generation_key

    def heartbeat_failed(self, now: float) -> None:
        """No answer (connection lost, timeout): retry after the backoff."""
        self.heartbeat_in_flight = False
        self.heartbeat_failed_at = now

    def session_expired(self, now: float) -> bool:
        """No successful heartbeat for a whole session timeout: the coordinator has dropped us."""
        return (
            self.last_heartbeat_receive is not None
            and now - self.last_heartbeat_receive > self.session_timeout_s
        )

    def on_heartbeat_response(
        self, response: HeartbeatResponse, sent: tuple[int, str], now: float
    ) -> Outcome:
        self.heartbeat_in_flight = False
        code = response.error_code
        if code == ErrorCode.NONE:
            self.last_heartbeat_receive = now
            self.heartbeat_failed_at = None
            return Outcome(Action.OK)
        reason = f"Heartbeat: {error_name(code)}"
        if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            self.heartbeat_failed_at = now
            return Outcome(Action.REDISCOVER, code, reason)
        # Every other answer proves the coordinator is alive.
        self.last_heartbeat_receive = now
        self.heartbeat_failed_at = None
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
        self.heartbeat_failed_at = now
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

    # ------------------------------------------------------------ leaving

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

    def metadata_changed(self, partitions_per_topic: Mapping[str, int]) -> list[str]:
        """Topics of the group whose partition count differs from the last assignment (leader)."""
        return sorted(
            t
            for t in self.group_topics
            if int(partitions_per_topic.get(t, 0)) != self.assigned_partition_counts.get(t, 0)
        )


# ---------------------------------------------------------------------------- coordinator discovery


class CoordinatorLocator:
    """Finds a group's coordinator and keeps a dedicated connection to it.

    The connection is separate from the cluster's per-broker ones (as the Java
    client's), so blocking JoinGroup/SyncGroup never queue behind fetches and
    vice versa. Shared by :class:`GroupMembership` and the offsets client.
    """

    def __init__(self, cluster: Cluster, config: ConsumerConfig) -> None:
        if not config.group_id:
            raise ValueError("a coordinator lookup needs a group_id")
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.group_id
        self.node: BrokerNode | None = None
        self._conn: BrokerConnection | None = None
        # Dropped by mark_unknown (sync, so it can only abort): closed later, awaited.
        self._dropped: set[BrokerConnection] = set()
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def known(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def mark_unknown(self, reason: str) -> None:
        if self._conn is not None:
            log.info(
                "group %s: coordinator %s marked unknown: %s", self.group_id, self.node, reason
            )
            conn, self._conn = self._conn, None
            self.node = None
            conn.abort(f"coordinator connection dropped: {reason}")
            self._dropped.add(conn)

    async def _reap_dropped(self) -> None:
        while self._dropped:
            with contextlib.suppress(Exception):
                await self._dropped.pop().close()

    async def connection(self) -> BrokerConnection:
        """The coordinator connection, discovering the coordinator (with backoff) if needed.

        Retries retriable failures forever; callers bound it with a timeout.
        Raises FatalGroupError for non-retriable FindCoordinator errors.
        """
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        async with self._lock:
            await self._reap_dropped()
            attempt = 0
            while True:
                if self._closed:
                    raise ConnectionClosed(f"group {self.group_id}: consumer closed")
                conn = self._conn
                if conn is not None and not conn.closed:
                    return conn
                try:
                    node = await self._find()
                    conn = BrokerConnection(
                        node.host,
                        node.port,
                        client_id=self.config.client_id,
                        request_timeout_s=self.config.request_timeout_ms / 1000.0,
                        security=self.cluster.security,
                    )
                    await conn.connect()
                    self.node, self._conn = node, conn
                    log.debug("group %s: coordinator is %s", self.group_id, node)
                    return conn
                except FatalGroupError:
                    raise
                except (ConnectionClosed, OSError, KafkaError) as exc:
                    if (
                        isinstance(exc, KafkaError)
                        and not exc.retriable
                        and not isinstance(exc, GroupError)
                    ):
                        raise
                    delay = backoff_s(
                        attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
                    )
                    attempt += 1
                    log.debug(
                        "group %s: coordinator lookup failed (%s); retrying in %.3fs",
                        self.group_id,
                        exc,
                        delay,
                    )
                    await asyncio.sleep(delay)

    async def _find(self) -> BrokerNode:
        conn = await self.cluster.any_connection()
        version = conn.version_for(FIND_COORDINATOR)
        request = FindCoordinatorRequest(
            key=self.group_id, key_type=0, coordinator_keys=[self.group_id]
        )
        response = await conn.request(FIND_COORDINATOR, request, version=version)
        if version >= 4:
            if not response.coordinators:
                raise GroupError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, "FindCoordinator answered no coordinator"
                )
            c = response.coordinators[0]
            code, node_id, host, port, message = (
                c.error_code,
                c.node_id,
                c.host,
                c.port,
                c.error_message,
            )
        else:
            code, node_id, host, port = (
                response.error_code,
                response.node_id,
                response.host,
                response.port,
            )
            message = getattr(response, "error_message", None)
        if code != ErrorCode.NONE:
            text = f"FindCoordinator for group {self.group_id!r}: {error_name(code)}" + (
                f" ({message})" if message else ""
            )
            if is_retriable(code):
                raise GroupError(code, text)
            raise FatalGroupError(code, text)
        return BrokerNode(node_id, host, port)

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        await self._reap_dropped()


# ---------------------------------------------------------------------------- asyncio adapter


class RebalanceListener:
    """Hooks a facade implements; each is awaited by the membership task, in order.

    Around a rebalance: ``on_join_prepare`` (e.g. commit), then
    ``on_partitions_lost`` or ``on_partitions_revoked`` (before JoinGroup), then
    after SyncGroup ``on_partitions_revoked`` (COOPERATIVE: what moved away) and
    ``on_partitions_assigned`` (what was added; always called, maybe empty).
    Heartbeats continue while a hook runs, but the whole rebalance must finish
    within the rebalance timeout (``max_poll_interval_ms``).
    """

    async def on_join_prepare(self, generation: Generation | None) -> None:
        return None

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        return None

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        """Partitions that may already belong to someone else: don't commit. Default: revoked."""
        await self.on_partitions_revoked(lost)


class _Retry(Exception):
    def __init__(self, reason: str, *, backoff: bool) -> None:
        super().__init__(reason)
        self.backoff = backoff


class GroupMembership:
    """This consumer's membership in one group, driven by background asyncio tasks.

    Typical use by a facade::

        m = GroupMembership(cluster, config, listener=my_listener)
        m.subscribe(["orders"])
        generation = await m.ensure_active()   # joined, assigned, hooks run
        ...                                     # rebalances happen in the background
        await m.close()                         # revoke hooks, LeaveGroup
    """

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        listener: RebalanceListener | None = None,
        locator: CoordinatorLocator | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        config.validate()
        self.cluster = cluster
        self.config = config
        self.core = MemberCore(config)
        self.listener = listener or RebalanceListener()
        self._own_locator = locator is None
        self.locator = locator or CoordinatorLocator(cluster, config)
        self.clock = clock
        self.error: FatalGroupError | None = None
        self.listener_error: BaseException | None = None
        self.rebalances = 0
        """Completed (re)joins: increases once per generation this member got an assignment in."""
        self._run_task: asyncio.Task[None] | None = None
        self._hb_task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._hb_wakeup = asyncio.Event()
        self._stable = asyncio.Event()
        self._closed = False
        self._attempt = 0
        self._next_metadata_check: float | None = None

    # ------------------------------------------------------------ public API

    @property
    def group_id(self) -> str:
        return self.core.group_id

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def state(self) -> MemberState:
        return self.core.state

    @property
    def generation(self) -> Generation | None:
        return self.core.generation

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.core.owned)

    @property
    def protocol(self) -> RebalanceProtocol:
        return self.core.protocol

    @property
    def subscription(self) -> tuple[str, ...]:
        return self.core.subscription

    @property
    def rejoin_needed(self) -> bool:
        """A rebalance is due or under way (the current assignment may be about to change)."""
        return self.core.rejoin_needed

    def subscribe(self, topics: Iterable[str]) -> None:
        """Set the topics to subscribe to; a change makes a running member rejoin."""
        topics = list(topics)
        if not topics:
            raise ValueError(
                "subscribe to at least one topic (to stop, use leave_group() or close())"
            )
        if self.core.subscribe(topics):
            self._stable.clear()
            self._wakeup.set()

    def request_rejoin(self, reason: str) -> None:
        self.core.request_rejoin(reason)
        self._stable.clear()
        self._wakeup.set()

    def on_commit_error(self, code: int, sent: tuple[int, str]) -> None:
        """Called by the offsets client when a commit says the membership is stale."""
        before = self.core.rejoin_needed
        self.core.on_commit_error(code, sent)
        if self.core.rejoin_needed and not before:
            self._stable.clear()
            self._wakeup.set()

    def start(self) -> None:
        """Start the background tasks (idempotent); ``ensure_active`` calls it."""
        if self._closed:
            raise RuntimeError("group membership is closed")
        if self.error is not None:
            raise self.error
        if not self.core.subscription:
            raise ValueError("subscribe to at least one topic before joining the group")
        loop = asyncio.get_running_loop()
        if self._run_task is None or self._run_task.done():
            self._run_task = loop.create_task(self._run(), name=f"group-{self.group_id}")
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = loop.create_task(
                self._heartbeat_loop(), name=f"heartbeat-{self.group_id}"
            )

    async def ensure_active(self, timeout_s: float | None = None) -> Generation:
        """Join (or finish rejoining) and return the stable generation.

        Raises the fatal error if the member failed, TimeoutError after ``timeout_s``.
        """
        self.start()
        async with asyncio.timeout(timeout_s):
            while True:
                if self.error is not None:
                    raise self.error
                gen = self.core.generation
                if gen is not None and not self.core.rejoin_needed and self._stable.is_set():
                    return gen
                run = self._run_task
                waiter = asyncio.ensure_future(self._stable.wait())
                try:
                    pending: set[asyncio.Future[object]] = {waiter}  # type: ignore[arg-type]
                    if run is not None:
                        pending.add(run)  # type: ignore[arg-type]
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                if run is not None and run.done() and self.error is None:
                    if self._closed:
                        raise RuntimeError("group membership is closed")
                    exc = run.exception() if not run.cancelled() else None
                    if exc is not None:
                        raise exc
                    self.start()

    async def leave_group(self, reason: str = "the consumer is leaving the group") -> None:
        """Leave the group now (e.g. max_poll_interval_ms passed); ``ensure_active`` rejoins.

        The owned partitions are reported lost (revoked if the member was
        stable). Static members send no LeaveGroup (KIP-345): they keep their
        place until the session times out.
        """
        await self._stop_tasks()
        await self._leave(reason)
        self.core.reset(reason, reset_member_id=True)
        self._stable.clear()

    async def close(
        self, *, leave: bool = True, reason: str = "the consumer is being closed"
    ) -> None:
        """Stop: the revoke (or lost) hook, then LeaveGroup (dynamic members), then the connection."""
        if self._closed:
            return
        await self._stop_tasks()
        self._closed = True
        try:
            if leave:
                await self._leave(reason)
            else:
                result = self.core.prepare_leave()
                await self._notify(result)
        finally:
            self._stable.clear()
            if self._own_locator:
                await self.locator.close()

    # ------------------------------------------------------------ internals

    async def _stop_tasks(self) -> None:
        tasks = [t for t in (self._run_task, self._hb_task) if t is not None]
        self._run_task = self._hb_task = None
        await cancel_and_wait(tasks)

    async def _leave(self, reason: str) -> None:
        result = self.core.prepare_leave()
        await self._notify(result)
        core = self.core
        if core.group_instance_id is None and core.member_id and self.locator.known:
            try:
                conn = await self.locator.connection()
                response = await conn.request(
                    LEAVE_GROUP,
                    core.leave_request(reason),
                    timeout_s=min(5.0, self.config.request_timeout_ms / 1000.0),
                )
                codes = [response.error_code] + [m.error_code for m in response.members]
                bad = [c for c in codes if c]
                if bad:
                    log.info("group %s: LeaveGroup answered %s", self.group_id, error_name(bad[0]))
                else:
                    log.info("group %s: member %s left (%s)", self.group_id, core.member_id, reason)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        core.state = MemberState.UNJOINED

    async def _call(self, hook: str, *args: object) -> None:
        try:
            await getattr(self.listener, hook)(*args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.listener_error = exc
            log.exception("group %s: rebalance listener %s failed", self.group_id, hook)

    async def _notify(self, result: PrepareResult) -> None:
        if result.kind == "lost":
            await self._call("on_partitions_lost", list(result.partitions))
        elif result.kind == "revoked":
            await self._call("on_partitions_revoked", list(result.partitions))

    async def _fail(self, exc: FatalGroupError) -> None:
        log.error("group %s: %s", self.group_id, exc)
        self.error = exc
        owned = sorted(self.core.owned)
        self.core.owned.clear()
        self.core.state = MemberState.UNJOINED
        if owned:
            await self._call("on_partitions_lost", owned)
        self._stable.set()  # wake ensure_active, which raises
        self._hb_wakeup.set()

    async def _run(self) -> None:
        try:
            while not self._closed and self.error is None:
                if self.core.rejoin_needed:
                    self._stable.clear()
                    try:
                        await self._join_once()
                        self._attempt = 0
                    except _Retry as retry:
                        if retry.backoff:
                            await self._backoff(str(retry))
                    except (ConnectionClosed, OSError) as exc:
                        self.locator.mark_unknown(str(exc))
                        self.core.state = MemberState.UNJOINED
                        await self._backoff(f"connection to the coordinator failed: {exc}")
                    except FatalGroupError:
                        raise
                    except KafkaError as exc:
                        if exc.code == ErrorCode.REQUEST_TIMED_OUT or exc.retriable:
                            self.locator.mark_unknown(str(exc))
                            self.core.state = MemberState.UNJOINED
                            self.core.request_rejoin(str(exc))
                            await self._backoff(str(exc))
                        else:
                            raise FatalGroupError(exc.code, str(exc)) from exc
                    continue
                self._stable.set()
                await self._idle()
        except FatalGroupError as exc:
            await self._fail(exc)

    async def _backoff(self, reason: str) -> None:
        delay = backoff_s(
            self._attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
        )
        self._attempt += 1
        log.debug("group %s: retrying in %.3fs: %s", self.group_id, delay, reason)
        await asyncio.sleep(delay)

    async def _idle(self) -> None:
        """Stable: wait for a rejoin request, checking metadata when leading."""
        timeout: float | None = None
        if self.core.is_leader:
            now = self.clock()
            if self._next_metadata_check is None:
                self._next_metadata_check = now + self.config.metadata_max_age_ms / 1000.0
            timeout = max(0.0, self._next_metadata_check - now)
        self._wakeup.clear()
        if self.core.rejoin_needed:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wakeup.wait()
        due = self._next_metadata_check
        if (
            self.core.is_leader
            and not self.core.rejoin_needed
            and due is not None
            and self.clock() >= due
        ):
            self._next_metadata_check = None
            await self._check_metadata()

    async def _check_metadata(self) -> None:
        topics = list(self.core.group_topics)
        if not topics:
            return
        try:
            infos = await self.cluster.refresh_metadata(topics)
        except (ConnectionClosed, OSError, KafkaError) as exc:
            log.debug("group %s: metadata refresh failed: %s", self.group_id, exc)
            return
        counts = {t: i.partition_count for t, i in infos.items() if i.error_code == 0}
        changed = self.core.metadata_changed(counts)
        if changed:
            self.request_rejoin(f"partition count of {changed} changed")

    async def _join_once(self) -> None:
        core = self.core
        conn = await self.locator.connection()
        if core.needs_join_prepare:
            core.needs_join_prepare = False
            await self._call("on_join_prepare", core.generation)
            await self._notify(core.prepare_join())
        if not core.rejoin_needed:
            return
        join_timeout = max(
            self.config.request_timeout_ms / 1000.0,
            core.rebalance_timeout_ms / 1000.0 + JOIN_GROUP_TIMEOUT_LAPSE_S,
        )
        request = core.join_request()
        sent_member = core.member_id
        response = await conn.request(JOIN_GROUP, request, timeout_s=join_timeout)
        outcome = core.on_join_response(response, sent_member, self.clock())
        self._hb_wakeup.set()
        self._check(outcome)
        assignment: dict[str, list[TopicPartition]] | None = None
        if core.is_leader and not core.skip_assignment:
            assignment = await self._lead()
        elif core.is_leader:
            # A static leader that rejoined a stable group (JoinGroup v9): keep the metadata watch.
            subs = core.member_subscriptions()
            core.group_topics = tuple(sorted({t for s in subs.values() for t in s.topics}))
            infos = await self.cluster.refresh_metadata(list(core.group_topics))
            core.assigned_partition_counts = {
                t: (infos[t].partition_count if t in infos and infos[t].error_code == 0 else 0)
                for t in core.group_topics
            }
        sent = core.generation_key
        response = await conn.request(
            SYNC_GROUP, core.sync_request(assignment), timeout_s=join_timeout
        )
        outcome, assigned = core.on_sync_response(response, sent)
        self._check(outcome)
        assert assigned is not None
        change = core.complete_assignment(assigned, self.clock())
        self.rebalances += 1
        self._next_metadata_check = None
        self._hb_wakeup.set()
        gen = core.generation
        log.info(
            "group %s: generation %d: member %s owns %d partition(s) (+%d -%d)%s",
            self.group_id,
            core.generation_id,
            core.member_id,
            len(change.assigned),
            len(change.added),
            len(change.revoked),
            "; rejoining for the second round" if change.rejoin else "",
        )
        if change.revoked:
            await self._call("on_partitions_revoked", list(change.revoked))
        await self._call("on_partitions_assigned", list(change.added))
        core.needs_join_prepare = True
        if gen is not None and not core.rejoin_needed:
            self._stable.set()

    def _check(self, outcome: Outcome) -> None:
        action = outcome.action
        if action is Action.OK:
            return
        if action is Action.FATAL:
            raise (
                fatal_error(
                    outcome.error, self.group_id, self.core.group_instance_id, outcome.reason
                )
                if outcome.error
                else FatalGroupError(ErrorCode.UNKNOWN_SERVER_ERROR, outcome.reason)
            )
        if action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
            raise _Retry(outcome.reason, backoff=True)
        raise _Retry(outcome.reason, backoff=action is Action.BACKOFF)

    async def _lead(self) -> dict[str, list[TopicPartition]]:
        core = self.core
        subs = core.member_subscriptions()
        topics = sorted({t for s in subs.values() for t in s.topics})
        infos = await self.cluster.refresh_metadata(topics) if topics else {}
        counts = {t: i.partition_count for t, i in infos.items() if i.error_code == 0}
        assignment = core.assign(counts, subs)
        log.info(
            "group %s: leader assigned %d partition(s) of %s to %d member(s) with %s",
            self.group_id,
            sum(len(v) for v in assignment.values()),
            topics,
            len(assignment),
            core.protocol_name,
        )
        return assignment

    async def _heartbeat_loop(self) -> None:
        core = self.core
        while not self._closed and self.error is None:
            now = self.clock()
            delay = core.time_to_next_heartbeat(now)
            if delay is None or delay > 0:
                self._hb_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._hb_wakeup.wait()
                continue
            if core.session_expired(now):
                self.locator.mark_unknown("no heartbeat answer within the session timeout")
            try:
                conn = await self.locator.connection()
            except FatalGroupError as exc:
                await self._fail(exc)
                return
            if core.time_to_next_heartbeat(self.clock()) != 0.0:
                continue
            request, sent = core.heartbeat_request(self.clock())
            try:
                response = await conn.request(
                    HEARTBEAT, request, timeout_s=self.config.request_timeout_ms / 1000.0
                )
            except asyncio.CancelledError:
                core.heartbeat_failed(self.clock())
                raise
            except (ConnectionClosed, OSError, KafkaError) as exc:
                core.heartbeat_failed(self.clock())
                self.locator.mark_unknown(f"heartbeat failed: {exc}")
                continue
            outcome = core.on_heartbeat_response(response, sent, self.clock())
            if outcome.action is Action.REDISCOVER:
                self.locator.mark_unknown(outcome.reason)
            elif outcome.action is Action.REJOIN:
                self._stable.clear()
                self._wakeup.set()
            elif outcome.action is Action.FATAL:
                if self._run_task is not None:
                    self._run_task.cancel()
                await self._fail(
                    fatal_error(
                        outcome.error, self.group_id, core.group_instance_id, outcome.reason
                    )
                )
                return
