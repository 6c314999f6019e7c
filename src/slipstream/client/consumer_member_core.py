"""The consumer-protocol (KIP-848) member's state and decisions, without I/O
(:class:`ConsumerMemberCore`).

``group_protocol="consumer"``: one request, ConsumerGroupHeartbeat, replaces
JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the *broker* computes the
assignment. The core builds the heartbeats, reads their answers into an
:class:`~.membership_types.Outcome`, tracks the member epoch, the owned partitions
and the target assignment, and says what a reconciliation revokes and adds. Time is
passed in.

The protocol, as the member sees it (Kafka's ``AsyncKafkaConsumer``):

1. join: member epoch 0, the rebalance timeout (``max_poll_interval_ms``), the
   subscription (topic names, or a regular expression the broker evaluates,
   RE2 syntax, v1 only), the server assignor if configured, the instance id
   if static, and an *empty* list of owned partitions. v1 members generate
   their member id (a uuid4, once per consumer, kept across rejoins); v0
   members send an empty id and take the broker's.
2. every answer carries the member epoch (the "generation" of commits) and the
   heartbeat interval, which the broker shortens while the group changes. Later
   heartbeats send only what changed since the last one sent (null otherwise,
   rebalance timeout -1); after a failed heartbeat the next one is full.
3. an answer with an assignment (topic ids) sets the member's *target*. The
   member reconciles towards it, one reconciliation at a time, in order:
   revoked = owned - target: commit, ``on_partitions_revoked``; added = target -
   owned: ``on_partitions_assigned``; then it heartbeats at once with its new
   owned partitions, the acknowledgement the broker waits for before it hands
   the revoked partitions to their next owner. Kept partitions are untouched.
   Topic ids the metadata cannot name yet stay pending (metadata is refreshed).
4. FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the partitions are *lost* (no
   commit), and the member rejoins with epoch 0 and the same member id.
   Coordinator errors rediscover with backoff; UNRELEASED_INSTANCE_ID backs off;
   configuration errors are fatal and raised with the broker's message.
5. leaving: epoch -1, or -2 for a static member (the broker keeps its
   assignment until its session times out, so a restart gets it back).
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
)
from ..protocol.errors import ErrorCode, is_retriable
from ..protocol.errors import name as error_name
from .assignors import TopicPartition
from .consumer_config import ConsumerConfig
from .group_errors import FatalGroupError
from .membership_types import Action, Generation, MemberState, Outcome, PrepareResult

log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
REGEX_MIN_VERSION = 1
"""subscribed_topic_regex exists from ConsumerGroupHeartbeat v1."""
CLIENT_MEMBER_ID_VERSION = 1
"""From v1 the member generates its own member id (KIP-1082)."""

TopicIdPartitions = dict[uuid.UUID, frozenset[int]]

_GROUP_AUTHORIZATION_FAILED = 30
_TOPIC_AUTHORIZATION_FAILED = 29

# Answers that end this member for good: the configuration or the group is wrong.
_FATAL = frozenset(
    {
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_GROUP_ID,
        _GROUP_AUTHORIZATION_FAILED,
        _TOPIC_AUTHORIZATION_FAILED,
    }
)
_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class Phase(enum.Enum):
    """Where the member is in the protocol (finer than :class:`~.membership_types.MemberState`)."""

    UNJOINED = "unjoined"
    """Not in the group: before the first join, after leaving, or failed."""
    JOINING = "joining"
    """A heartbeat with epoch 0 is due or in flight."""
    MEMBER = "member"
    """Has a member epoch; heartbeats and reconciles towards its target."""
    FENCED = "fenced"
    """The broker fenced it: its partitions are lost, then it rejoins."""


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """One step towards the target: what to revoke, then what to add."""

    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]
    target: frozenset[TopicPartition]
    """The resolved target this step reaches (partitions of unknown topic ids left out)."""
    epoch: int
    """The member epoch when it started."""


@dataclass(slots=True)
class _SentFields:
    """What the last heartbeat sent carried: later ones send only what differs."""

    rebalance_timeout_ms: int | None = None
    topic_names: tuple[str, ...] | None = None
    topic_regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[TopicPartition] | None = None


def _ids_of(
    groups: Iterable[tuple[uuid.UUID, Iterable[int]]],
) -> TopicIdPartitions:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in groups:
        out[topic_id] = out.get(topic_id, frozenset()) | frozenset(partitions)
    return {t: ps for t, ps in out.items() if ps}


class ConsumerMemberCore:
    """The consumer-protocol member's state and decisions, without I/O.

    Drive it: ``time_to_next_heartbeat(now)``; when 0, ``heartbeat_request(now,
    version)`` -> send -> ``on_heartbeat_response(response, token, now)`` (or
    ``heartbeat_failed(now, delay_s)``). When ``reconcile_due``:
    ``start_reconciliation()`` -> hooks -> ``complete_reconciliation(step)``.
    """

    def __init__(self, config: ConsumerConfig, *, member_id: str | None = None) -> None:
        if not config.group_id:
            raise ValueError("group membership needs a group_id")
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = config.group_instance_id
        self.rebalance_timeout_ms = config.effective_rebalance_timeout_ms
        self.server_assignor = config.group_remote_assignor
        # One id for the consumer's lifetime (v1): a rejoin after fencing keeps it.
        self.client_member_id = member_id or str(uuid.uuid4())
        self.member_id = ""
        self.member_epoch = JOIN_EPOCH
        self.phase = Phase.UNJOINED
        self.subscription: tuple[str, ...] = ()
        self.subscription_regex: str | None = None
        self.owned: set[TopicPartition] = set()
        self.topic_names: dict[uuid.UUID, str] = {}
        self.target: TopicIdPartitions | None = None
        """The latest assignment from the broker (None: none received since joining)."""
        self.reconciling: Reconciliation | None = None
        self.reconcile_due = False
        self.reconcile_failed = False
        self.initial_reconcile_done = False
        self.heartbeat_interval_s = 0.0
        self.next_heartbeat_at: float | None = None
        self.heartbeat_now = False
        self.in_flight = False
        self._sent = _SentFields()
        self._incarnation = 0
        """Bumped on every (re)join and leave: answers to older requests are stale."""
        self.responses = 0

    # ------------------------------------------------------------ state views

    @property
    def state(self) -> MemberState:
        """The classic view: commits are refused by the facades while PREPARING_REBALANCE."""
        if self.phase is Phase.MEMBER:
            return MemberState.STABLE
        if self.phase is Phase.JOINING:
            return MemberState.PREPARING_REBALANCE
        return MemberState.UNJOINED

    @property
    def generation(self) -> Generation | None:
        """The member epoch as a generation (what commits carry), once the member has one."""
        if self.phase is not Phase.MEMBER or self.member_epoch <= 0:
            return None
        return Generation(
            self.member_epoch,
            self.member_id,
            self.server_assignor,
            "",
            tuple(sorted(self.owned)),
            self.group_instance_id,
        )

    @property
    def stable(self) -> bool:
        """In the group with its assignment in place: nothing to reconcile."""
        return (
            self.phase is Phase.MEMBER
            and self.initial_reconcile_done
            and self.reconciling is None
            and not self.reconcile_due
        )

    @property
    def subscribed(self) -> bool:
        return bool(self.subscription) or self.subscription_regex is not None

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to topic names; True when it changed (sent with the next heartbeat, now)."""
        new = tuple(sorted(set(topics)))
        if any(not t for t in new):
            raise ValueError("topic names must be non-empty")
        if new == self.subscription and self.subscription_regex is None:
            return False
        self.subscription, self.subscription_regex = new, None
        self._subscription_changed()
        return True

    def subscribe_pattern(self, regex: str) -> bool:
        """Subscribe to the topics the broker matches with ``regex`` (RE2, whole name)."""
        if not regex:
            raise ValueError("the subscription pattern must be non-empty")
        if regex == self.subscription_regex and not self.subscription:
            return False
        self.subscription, self.subscription_regex = (), regex
        self._subscription_changed()
        return True

    def _subscription_changed(self) -> None:
        if self.phase is Phase.UNJOINED:
            return
        # The broker answers with a new target; tell it at once rather than at the interval.
        self.heartbeat_now = True

    def join(self) -> None:
        """(Re)join: epoch 0, everything sent, nothing owned (the caller reported it lost)."""
        if not self.subscribed:
            raise ValueError("cannot join a group without a subscription")
        self._incarnation += 1
        self.phase = Phase.JOINING
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self.reconcile_due = False
        self.reconcile_failed = False
        self.initial_reconcile_done = False
        self.heartbeat_now = True
        self.in_flight = False
        self._sent = _SentFields()

    # ------------------------------------------------------------ heartbeats

    def time_to_next_heartbeat(self, now: float) -> float | None:
        """Seconds until the next heartbeat is due; None when none should be sent now."""
        if self.in_flight or self.phase not in (Phase.JOINING, Phase.MEMBER):
            return None
        if self.heartbeat_now or self.next_heartbeat_at is None:
            return 0.0
        return max(0.0, self.next_heartbeat_at - now)

    def heartbeat_request(self, now: float, version: int) -> tuple[ConsumerGroupHeartbeatRequest, int]:
        """The next heartbeat and a token for its answer (stale once the member rejoins)."""
        if self.subscription_regex is not None and version < REGEX_MIN_VERSION:
            raise FatalGroupError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"group {self.group_id!r}: a pattern subscription needs ConsumerGroupHeartbeat "
                f"v{REGEX_MIN_VERSION}, the broker supports v{version} only",
            )
        joining = self.phase is Phase.JOINING
        if version >= CLIENT_MEMBER_ID_VERSION:
            self.member_id = self.client_member_id
        # v0: the first join sends "" and the broker names the member; its id is kept after.
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.group_instance_id,  # always, when static (the Java client does too)
        )
        self._fill_changed_fields(request, full=joining)
        self.in_flight = True
        self.heartbeat_now = False
        self.next_heartbeat_at = None
        return request, self._incarnation

    def _fill_changed_fields(self, request: ConsumerGroupHeartbeatRequest, *, full: bool) -> None:
        sent = self._sent
        if full or sent.rebalance_timeout_ms != self.rebalance_timeout_ms:
            request.rebalance_timeout_ms = sent.rebalance_timeout_ms = self.rebalance_timeout_ms
        if full:
            request.rack_id = self.config.client_rack
        if self.subscription_regex is not None:
            if full or sent.topic_regex != self.subscription_regex:
                request.subscribed_topic_regex = self.subscription_regex
            sent.topic_regex, sent.topic_names = self.subscription_regex, None
        else:
            if full or sent.topic_names != self.subscription:
                request.subscribed_topic_names = list(self.subscription)
            sent.topic_names, sent.topic_regex = self.subscription, None
        if self.server_assignor is not None and (full or sent.server_assignor != self.server_assignor):
            request.server_assignor = sent.server_assignor = self.server_assignor
        if full and self.phase is Phase.JOINING:
            # Joining owns nothing: the broker requires an empty list, not null.
            request.topic_partitions = []
            sent.owned = frozenset()
            return
        owned = frozenset(self.owned)
        if full or sent.owned != owned:
            request.topic_partitions = self._owned_by_id()
            sent.owned = owned

    def _owned_by_id(self) -> list[ConsumerGroupHeartbeatRequestTopicPartitions]:
        ids = {name: topic_id for topic_id, name in self.topic_names.items()}
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic, partition in sorted(self.owned):
            topic_id = ids.get(topic)
            if topic_id is not None:  # owned partitions always came from a resolved id
                by_topic.setdefault(topic_id, []).append(partition)
        return [
            ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=t, partitions=ps)
            for t, ps in by_topic.items()
        ]

    def heartbeat_failed(self, now: float, retry_in_s: float) -> None:
        """No answer (connection lost, timeout) or a retriable error: a full heartbeat later."""
        self.in_flight = False
        self._sent = _SentFields()
        self.next_heartbeat_at = now + retry_in_s

    def on_heartbeat_response(
        self, response: ConsumerGroupHeartbeatResponse, token: int, now: float
    ) -> Outcome:
        self.in_flight = False
        if token != self._incarnation:
            return Outcome(Action.IGNORE, response.error_code, "answer to an earlier incarnation")
        code = response.error_code
        if code == ErrorCode.NONE:
            return self._on_success(response, now)
        reason = f"ConsumerGroupHeartbeat: {error_name(code)}" + (
            f" ({response.error_message})" if response.error_message else ""
        )
        self._sent = _SentFields()  # after any error the next heartbeat is full
        if code in _FENCED:
            self.fence(reason)
            return Outcome(Action.REJOIN, code, reason)
        if code in _REDISCOVER:
            return Outcome(Action.REDISCOVER, code, reason)
        if code in _FATAL or (not is_retriable(code) and code != ErrorCode.UNRELEASED_INSTANCE_ID):
            self.phase = Phase.UNJOINED
            return Outcome(Action.FATAL, code, response.error_message or reason)
        # COORDINATOR_LOAD_IN_PROGRESS, UNRELEASED_INSTANCE_ID, other retriable errors.
        return Outcome(Action.BACKOFF, code, reason)

    def _on_success(self, response: ConsumerGroupHeartbeatResponse, now: float) -> Outcome:
        self.responses += 1
        if response.member_id:
            self.member_id = response.member_id  # v0: the broker's; v1: ours, echoed
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_s = max(0, response.heartbeat_interval_ms) / 1000.0
        self.next_heartbeat_at = now + self.heartbeat_interval_s
        if self.phase is Phase.JOINING:
            log.info(
                "group %s: joined as %s with epoch %d (consumer protocol)",
                self.group_id,
                self.member_id,
                self.member_epoch,
            )
            self.phase = Phase.MEMBER
        if response.assignment is not None:
            self.target = _ids_of(
                (tp.topic_id, tp.partitions) for tp in response.assignment.topic_partitions
            )
            self.reconcile_due = True
        elif self.reconcile_failed or self.unresolved_topic_ids():
            # Retry what could not be done, at the pace of the heartbeats.
            self.reconcile_due = True
        return Outcome(Action.OK)

    def fence(self, reason: str) -> None:
        """The broker no longer knows this epoch: partitions lost, rejoin (same member id)."""
        log.info("group %s: member %s fenced: %s", self.group_id, self.member_id, reason)
        self.phase = Phase.FENCED
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self.reconcile_due = False
        self._sent = _SentFields()

    def on_commit_error(self, code: int, sent: tuple[int, str]) -> bool:
        """An OffsetCommit said the membership is gone; True when this member is now fenced."""
        if code not in _FENCED or self.phase is not Phase.MEMBER:
            return False
        if sent != (self.member_epoch, self.member_id):
            return False  # a commit of an older epoch: the heartbeats know better
        self.fence(f"OffsetCommit: {error_name(code)}")
        return True

    # ------------------------------------------------------------ reconciliation

    def learn_topic_ids(self, names: Mapping[uuid.UUID, str]) -> None:
        self.topic_names.update({t: n for t, n in names.items() if n})

    def unresolved_topic_ids(self) -> set[uuid.UUID]:
        if self.target is None:
            return set()
        return {t for t in self.target if t not in self.topic_names}

    def resolved_target(self) -> frozenset[TopicPartition]:
        assert self.target is not None
        return frozenset(
            (self.topic_names[t], p)
            for t, parts in self.target.items()
            if t in self.topic_names
            for p in parts
        )

    def start_reconciliation(self) -> Reconciliation | None:
        """The next step towards the target, or None (nothing to do, or one is running)."""
        if self.reconciling is not None or not self.reconcile_due:
            return None
        self.reconcile_due = False
        if self.phase is not Phase.MEMBER or self.target is None:
            return None
        target = self.resolved_target()
        revoked = tuple(sorted(self.owned - target))
        added = tuple(sorted(target - self.owned))
        if not revoked and not added and self.initial_reconcile_done and not self.reconcile_failed:
            return None
        self.reconcile_failed = False
        step = Reconciliation(revoked, added, target, self.member_epoch)
        self.reconciling = step
        return step

    def revocation_done(self, step: Reconciliation) -> None:
        """The revoke hook returned: the partitions are given up (acknowledged with the rest)."""
        self.owned.difference_update(step.revoked)

    def complete_reconciliation(self, step: Reconciliation) -> None:
        """The assign hook returned: own the new set and acknowledge it at once."""
        self.reconciling = None
        if self.reconcile_failed:
            # The assign hook could not take the partitions (e.g. no committed offsets):
            # they stay unowned, and the next heartbeat answer retries.
            log.info("group %s: reconciliation failed; retrying later", self.group_id)
        else:
            self.owned.update(step.added)
        if self.phase is Phase.MEMBER:
            self.initial_reconcile_done = True
            self.heartbeat_now = True  # the broker waits for this before moving revoked partitions

    def request_rejoin(self, reason: str) -> None:
        """The facade could not take an assignment: mark the running reconciliation failed."""
        if self.reconciling is not None:
            log.info("group %s: reconciliation fails: %s", self.group_id, reason)
            self.reconcile_failed = True

    # ------------------------------------------------------------ leaving

    def take_owned(self) -> tuple[TopicPartition, ...]:
        owned = tuple(sorted(self.owned))
        self.owned.clear()
        return owned

    def prepare_leave(self) -> PrepareResult:
        """What the application gives up on leaving: revoked while a member, else lost."""
        was_member = self.phase is Phase.MEMBER
        owned = self.take_owned()
        if not owned:
            return PrepareResult("")
        return PrepareResult("revoked" if was_member else "lost", owned)

    def leave_request(self) -> ConsumerGroupHeartbeatRequest | None:
        """The leave heartbeat (epoch -1, or -2 for a static member), or None if never joined."""
        in_group = self.phase is Phase.MEMBER or (
            self.phase is Phase.JOINING and self.responses > 0 and self.member_epoch > 0
        )
        self._incarnation += 1
        self.phase = Phase.UNJOINED
        self.target = None
        self.reconcile_due = False
        self.in_flight = False
        if not in_group or not self.member_id:
            return None
        epoch = LEAVE_EPOCH if self.group_instance_id is None else STATIC_LEAVE_EPOCH
        self.member_epoch = JOIN_EPOCH
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
        )

