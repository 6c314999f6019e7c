"""Consumer group membership, the member's side of the consumer group protocol (KIP-848).

``group_protocol="consumer"``: one request, ConsumerGroupHeartbeat, replaces
JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the *broker* computes the
assignment. Two layers, as for the classic protocol in :mod:`.membership`:

- :class:`ConsumerMemberCore` is sans-I/O: it builds the heartbeats, reads
  their answers into an :class:`~.membership.Outcome`, tracks the member epoch,
  the owned partitions and the target assignment, and says what a
  reconciliation revokes and adds. Time is passed in.
- :class:`ConsumerGroupMembership` is the asyncio adapter with the public
  surface of :class:`~.membership.GroupMembership`, so the facades pick one or
  the other and nothing else changes.

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

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..protocol.apis.consumer_group_heartbeat import SPEC as CONSUMER_GROUP_HEARTBEAT
from ..protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
)
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .assignors import COOPERATIVE, RebalanceProtocol, TopicPartition
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .membership import (
    Action,
    Clock,
    CoordinatorLocator,
    FatalGroupError,
    FencedInstanceError,
    Generation,
    GroupMembership,
    MemberState,
    Outcome,
    PrepareResult,
    RebalanceListener,
)
from .offsets import GroupOffsets
from .retry import backoff_s
from .tasks import cancel_and_wait

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

_HINTS = {
    ErrorCode.GROUP_ID_NOT_FOUND: (
        "the group may be a classic group with active members: a group changes protocol "
        "only once it is empty"
    ),
    ErrorCode.UNSUPPORTED_ASSIGNOR: "group_remote_assignor names an assignor the broker lacks",
    ErrorCode.INVALID_REGULAR_EXPRESSION: "the subscription pattern is not valid RE2 syntax",
    ErrorCode.UNSUPPORTED_VERSION: (
        "the broker does not support this request version (group_protocol='consumer' needs "
        "Kafka 4.0+; pattern subscriptions need ConsumerGroupHeartbeat v1)"
    ),
}


def consumer_fatal_error(
    code: int, group_id: str, instance_id: str | None, message: str | None
) -> FatalGroupError:
    """The error raised to the application, with the broker's own explanation."""
    if code == ErrorCode.FENCED_INSTANCE_ID:
        return FencedInstanceError(instance_id, message)
    text = f"ConsumerGroupHeartbeat for group {group_id!r} failed: {error_name(code)}"
    if message:
        text += f": {message}"
    hint = _HINTS.get(code)
    if hint:
        text += f" ({hint})"
    return FatalGroupError(code, text)


# ---------------------------------------------------------------------------- data


class Phase(enum.Enum):
    """Where the member is in the protocol (finer than :class:`~.membership.MemberState`)."""

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


# ---------------------------------------------------------------------------- sans-I/O core


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


# ---------------------------------------------------------------------------- asyncio adapter


class ConsumerGroupMembership:
    """This consumer's membership in a consumer-protocol group, driven by asyncio tasks.

    Same surface as :class:`~.membership.GroupMembership`. One task heartbeats;
    it starts a reconciliation task whenever an answer changes the target, and
    never two at once, so hooks run in order while heartbeats go on (a slow
    hook must not cost the member its session).
    """

    protocol: RebalanceProtocol = COOPERATIVE
    """Incremental: kept partitions are never interrupted (facades act as for cooperative)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        listener: RebalanceListener | None = None,
        locator: CoordinatorLocator | None = None,
        clock: Clock = time.monotonic,
        member_id: str | None = None,
    ) -> None:
        config.validate()
        self.cluster = cluster
        self.config = config
        self.core = ConsumerMemberCore(config, member_id=member_id)
        self.listener = listener or RebalanceListener()
        self._own_locator = locator is None
        self.locator = locator or CoordinatorLocator(cluster, config)
        self.clock = clock
        self.error: FatalGroupError | None = None
        self.listener_error: BaseException | None = None
        self.rebalances = 0
        """Completed reconciliations (each one ran the assign hook)."""
        self._task: asyncio.Task[None] | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._stable = asyncio.Event()
        self._answered = asyncio.Event()
        self._closed = False
        self._attempt = 0

    # ------------------------------------------------------------ public API

    @property
    def group_id(self) -> str:
        return self.core.group_id

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def member_epoch(self) -> int:
        return self.core.member_epoch

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
    def subscription(self) -> tuple[str, ...]:
        return self.core.subscription

    @property
    def rejoin_needed(self) -> bool:
        """Joining, fenced or reconciling: the assignment may be about to change."""
        return not self.core.stable

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = list(topics)
        if not topics:
            raise ValueError(
                "subscribe to at least one topic (to stop, use leave_group() or close())"
            )
        if self.core.subscribe(topics):
            self._wakeup.set()

    def subscribe_pattern(self, regex: str) -> None:
        """Subscribe to what the broker's regular expression (RE2) matches (v1 brokers)."""
        if self.core.subscribe_pattern(regex):
            self._wakeup.set()

    def request_rejoin(self, reason: str) -> None:
        self.core.request_rejoin(reason)

    def on_commit_error(self, code: int, sent: tuple[int, str]) -> None:
        """Called by the offsets client when a commit says the member is gone."""
        if self.core.on_commit_error(code, sent):
            self._stable.clear()
            self._wakeup.set()

    async def next_generation(self, stale_epoch: int) -> Generation | None:
        """After STALE_MEMBER_EPOCH: the generation of the next heartbeat answer (None: left)."""
        running = self._task is not None and not self._task.done()
        if self.core.member_epoch == stale_epoch and running and self.error is None:
            self._answered.clear()
            self.core.heartbeat_now = True
            self._wakeup.set()
            await self._answered.wait()
        return self.core.generation

    def start(self) -> None:
        """Start the heartbeat task (idempotent); ``ensure_active`` calls it."""
        if self._closed:
            raise RuntimeError("group membership is closed")
        if self.error is not None:
            raise self.error
        if not self.core.subscribed:
            raise ValueError("subscribe to at least one topic before joining the group")
        if self.core.phase is Phase.UNJOINED:
            self.core.join()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"consumer-group-{self.group_id}"
            )

    async def ensure_active(self, timeout_s: float | None = None) -> Generation:
        """Join (or finish reconciling) and return the member's generation.

        Raises the fatal error if the member failed, TimeoutError after ``timeout_s``.
        """
        self.start()
        async with asyncio.timeout(timeout_s):
            while True:
                if self.error is not None:
                    raise self.error
                gen = self.core.generation
                if gen is not None and self.core.stable and self._stable.is_set():
                    return gen
                task = self._task
                waiter = asyncio.ensure_future(self._stable.wait())
                try:
                    pending: set[asyncio.Future[object]] = {waiter}  # type: ignore[arg-type]
                    if task is not None:
                        pending.add(task)  # type: ignore[arg-type]
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                if self._stable.is_set() and not self.core.stable and self.error is None:
                    self._stable.clear()
                if task is not None and task.done() and self.error is None:
                    if self._closed:
                        raise RuntimeError("group membership is closed")
                    exc = task.exception() if not task.cancelled() else None
                    if exc is not None:
                        raise exc
                    self.start()

    async def leave_group(self, reason: str = "the consumer is leaving the group") -> None:
        """Leave now (e.g. max_poll_interval_ms passed); ``ensure_active`` rejoins, same id."""
        await self._stop_tasks()
        await self._leave(reason)
        self._stable.clear()

    async def close(
        self, *, leave: bool = True, reason: str = "the consumer is being closed"
    ) -> None:
        """Stop: the revoke (or lost) hook, then the leave heartbeat, then the connection."""
        if self._closed:
            return
        await self._stop_tasks()
        self._closed = True
        self._answered.set()
        try:
            if leave:
                await self._leave(reason)
            else:
                await self._notify(self.core.prepare_leave())
        finally:
            self._stable.clear()
            if self._own_locator:
                await self.locator.close()

    # ------------------------------------------------------------ internals: hooks

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
        self.core.phase = Phase.UNJOINED
        self._answered.set()  # a commit waiting for a new epoch gives up (no deadlock below)
        await self._finish_reconciliation()
        owned = self.core.take_owned()
        if owned:
            await self._call("on_partitions_lost", list(owned))
        self._stable.set()  # wake ensure_active, which raises
        self._answered.set()

    # ------------------------------------------------------------ internals: tasks

    async def _stop_tasks(self) -> None:
        tasks = [t for t in (self._task, self._reconcile_task) if t is not None]
        self._task = self._reconcile_task = None
        await cancel_and_wait(tasks)
        self.core.reconciling = None

    async def _leave(self, reason: str) -> None:
        await self._notify(self.core.prepare_leave())
        request = self.core.leave_request()
        if request is None or not self.locator.known:
            return
        try:
            conn = await self.locator.connection()
            response = await conn.request(
                CONSUMER_GROUP_HEARTBEAT,
                request,
                timeout_s=min(5.0, self.config.request_timeout_ms / 1000.0),
            )
            if response.error_code:
                log.info(
                    "group %s: leave heartbeat answered %s",
                    self.group_id,
                    error_name(response.error_code),
                )
            else:
                log.info(
                    "group %s: member %s left with epoch %d (%s)",
                    self.group_id,
                    request.member_id,
                    request.member_epoch,
                    reason,
                )
        except (ConnectionClosed, OSError, KafkaError) as exc:
            log.info("group %s: leave heartbeat failed: %s", self.group_id, exc)

    async def _run(self) -> None:
        core = self.core
        try:
            while not self._closed and self.error is None:
                if core.phase is Phase.FENCED:
                    await self._rejoin_after_fencing()
                    continue
                self._maybe_reconcile()
                self._update_stable()
                delay = core.time_to_next_heartbeat(self.clock())
                if delay is None or delay > 0:
                    self._wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await self._wakeup.wait()
                    continue
                await self._heartbeat_once()
        except FatalGroupError as exc:
            await self._fail(exc)

    def _update_stable(self) -> None:
        if self.core.stable:
            self._stable.set()
        else:
            self._stable.clear()

    async def _heartbeat_once(self) -> None:
        core = self.core
        conn = await self.locator.connection()  # FatalGroupError propagates
        try:
            version = conn.version_for(CONSUMER_GROUP_HEARTBEAT)
        except KafkaError as exc:
            raise FatalGroupError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"group {self.group_id!r}: group_protocol='consumer' needs a broker with "
                f"ConsumerGroupHeartbeat (Kafka 4.0+): {exc}",
            ) from exc
        request, token = core.heartbeat_request(self.clock(), version)
        try:
            response = await conn.request(
                CONSUMER_GROUP_HEARTBEAT,
                request,
                version=version,
                timeout_s=self.config.request_timeout_ms / 1000.0,
            )
        except asyncio.CancelledError:
            core.heartbeat_failed(self.clock(), 0.0)
            raise
        except (ConnectionClosed, OSError, KafkaError) as exc:
            self.locator.mark_unknown(f"heartbeat failed: {exc}")
            core.heartbeat_failed(self.clock(), self._next_backoff())
            return
        outcome = core.on_heartbeat_response(response, token, self.clock())
        self._answered.set()
        self._act(outcome)

    def _act(self, outcome: Outcome) -> None:
        core = self.core
        action = outcome.action
        if action is Action.OK:
            self._attempt = 0
        elif action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
            core.heartbeat_failed(self.clock(), self._next_backoff())
        elif action is Action.BACKOFF:
            log.info("group %s: %s; retrying", self.group_id, outcome.reason)
            core.heartbeat_failed(self.clock(), self._next_backoff())
        elif action is Action.REJOIN:
            self._stable.clear()
        elif action is Action.FATAL:
            raise consumer_fatal_error(
                outcome.error, self.group_id, core.group_instance_id, outcome.reason
            )

    def _next_backoff(self) -> float:
        delay = backoff_s(
            self._attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
        )
        self._attempt += 1
        return delay

    async def _finish_reconciliation(self) -> None:
        """Let a running reconciliation's hooks finish (they may be committing)."""
        task = self._reconcile_task
        if task is not None and task is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._reconcile_task = None

    async def _rejoin_after_fencing(self) -> None:
        """Fenced: the partitions may already be someone else's: report them lost, rejoin."""
        self._stable.clear()
        await self._finish_reconciliation()
        lost = self.core.take_owned()
        if lost:
            await self._call("on_partitions_lost", list(lost))
        if self._closed or self.error is not None:
            return
        self.core.join()

    def _maybe_reconcile(self) -> None:
        running = self._reconcile_task
        if running is not None and not running.done():
            return
        if self.core.reconcile_due:
            self._reconcile_task = asyncio.get_running_loop().create_task(
                self._reconcile(), name=f"reconcile-{self.group_id}"
            )

    async def _reconcile(self) -> None:
        core = self.core
        try:
            if core.unresolved_topic_ids():
                await self._refresh_topic_ids()
            step = core.start_reconciliation()
            if step is None:
                return
            await self._apply(step)
        finally:
            self._wakeup.set()

    async def _refresh_topic_ids(self) -> None:
        try:
            await self.cluster.refresh_metadata(None)
        except (ConnectionClosed, OSError, KafkaError) as exc:
            log.debug("group %s: metadata refresh for topic ids failed: %s", self.group_id, exc)
        self.core.learn_topic_ids({i.topic_id: n for n, i in self.cluster.topics.items()})
        missing = self.core.unresolved_topic_ids()
        if missing:
            log.info(
                "group %s: assigned topic ids %s are not in the metadata yet; kept pending",
                self.group_id,
                sorted(str(t) for t in missing),
            )

    async def _apply(self, step: Reconciliation) -> None:
        """Revoke (commit first), then assign, then acknowledge: never two owners at once."""
        core = self.core
        log.info(
            "group %s: epoch %d: member %s reconciles to %d partition(s) (+%d -%d)",
            self.group_id,
            core.member_epoch,
            core.member_id,
            len(step.target),
            len(step.added),
            len(step.revoked),
        )
        try:
            if step.revoked:
                await self._prepare_revoke(list(step.revoked))
                await self._call("on_partitions_revoked", list(step.revoked))
            core.revocation_done(step)
            await self._call("on_partitions_assigned", list(step.added))
            self.rebalances += 1
        finally:
            core.complete_reconciliation(step)

    async def _prepare_revoke(self, revoked: list[TopicPartition]) -> None:
        """Before revoking: the facade stops handing out those records and commits."""
        hook = getattr(self.listener, "on_revoke_prepare", None)
        if hook is not None:
            await self._call("on_revoke_prepare", revoked)
        else:
            await self._call("on_join_prepare", self.core.generation)


# ---------------------------------------------------------------------------- facade wiring

AnyMembership = GroupMembership | ConsumerGroupMembership
"""What the facades drive: the classic member or the consumer-protocol one."""


def new_membership(
    cluster: Cluster,
    config: ConsumerConfig,
    *,
    listener: RebalanceListener,
    locator: CoordinatorLocator,
) -> AnyMembership:
    """The member for ``config.group_protocol``."""
    if config.group_protocol == "consumer":
        return ConsumerGroupMembership(cluster, config, listener=listener, locator=locator)
    return GroupMembership(cluster, config, listener=listener, locator=locator)


def new_group_offsets(
    locator: CoordinatorLocator, config: ConsumerConfig, membership: AnyMembership
) -> GroupOffsets:
    """The offsets client wired to ``membership`` (member epochs with the consumer protocol)."""
    if isinstance(membership, ConsumerGroupMembership):
        m = membership

        def identity() -> tuple[str, int] | None:
            gen = m.generation
            return None if gen is None else (gen.member_id, gen.generation_id)

        return GroupOffsets(
            locator,
            config,
            on_membership_error=m.on_commit_error,
            next_generation=m.next_generation,
            member_identity=identity,
        )
    return GroupOffsets(locator, config, on_membership_error=membership.on_commit_error)
