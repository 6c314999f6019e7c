"""Consumer group handler API, modelled on sarama's ``ConsumerGroup`` (seed 000).

Usage::

    class Handler(ConsumerGroupHandler):
        async def consume_claim(self, session, claim):
            async for msg in claim.messages():
                print(msg.topic, msg.partition, msg.offset, msg.value)
                session.mark_message(msg)

    group = ConsumerGroup("127.0.0.1:9092", "my-group", auto_offset_reset="earliest")
    try:
        while not stopping:
            await group.consume(["orders"], Handler())   # one session per call
    finally:
        await group.close()

A *session*: :meth:`ConsumerGroup.consume` joins (or waits for the running
membership to be stable), then awaits ``handler.setup(session)``, runs
``handler.consume_claim(session, claim)`` concurrently, one task per claimed
partition, and when the session ends -- an eager rebalance starts (before this
member rejoins), partitions are lost, a ``consume_claim`` returns or raises on
its own (sarama does the same), or :meth:`ConsumerGroup.close` -- it stops
every claim's ``messages()`` iterator, waits for the ``consume_claim`` tasks (at
most the rebalance timeout, then cancels them), awaits
``handler.cleanup(session)`` and commits the marked offsets
(``enable_auto_commit``; they are also committed every
``auto_commit_interval_ms``). Then ``consume`` returns; the documented pattern
calls it in a loop.

EAGER assignors (range, roundrobin, sticky): one session per generation. The
session ends *before* the member sends JoinGroup (the membership awaits it in
``on_join_prepare``), so a partition is never consumed by two members at once
and offsets marked before the rebalance are committed before the new owner
reads them.

``group_protocol="consumer"`` (KIP-848, the broker assigns) behaves as
COOPERATIVE below: only revoked claims stop, kept ones run on, and the
revocation completes before the member acknowledges it to the broker, which
only then gives the partitions to their next owner.

COOPERATIVE assignors (cooperative-sticky, KIP-429): rebalances are
incremental and the session spans them (sarama's cooperative support does the
same). A rebalance that revokes some partitions stops just those claims --
``claim.revoked`` becomes true, their ``messages()`` iterator ends, and
``session.ended`` / ``wait_ended()`` read inside their ``consume_claim`` say
the claim is over -- waits for their ``consume_claim`` to return (at most the
rebalance timeout), commits the marked offsets (``enable_auto_commit``; without
it, commit in ``consume_claim`` after the iterator ends) and only then lets the
membership rejoin, so the new owner, which gets the partition in the second
round, starts after this member stopped and from its commit. The other claims
run on undisturbed (same claim, same iterator). Partitions assigned later get
new claims (from their committed offsets) in the same session; ``setup`` and
``cleanup`` are not called again. ``session.claims``, ``generation`` and
``generation_id`` follow the membership, and commits use the current generation.

Partitions reported *lost* (session expiry, fenced), under either protocol, end
the whole session and are not committed.

Wiring: one :class:`~.cluster.Cluster`, one
:class:`~.membership.CoordinatorLocator` shared by
:class:`~.membership.GroupMembership` (joins, heartbeats, the error handling
the seed lists) and :class:`~.offsets.GroupOffsets`; one
:class:`~.fetcher.Fetcher` (one fetch loop per broker). Backpressure comes from
the fetcher: a claim's iterator pulls from its partition's buffer only when the
handler asks for the next message, and a partition whose buffer is full (and
not drained for ``max_processing_time_ms``) is not fetched, without holding up
the others.

Errors: fatal membership errors (e.g. FENCED_INSTANCE_ID, configuration
errors) and exceptions raised by the handler end the session and are raised
from ``consume`` (after cleanup). ``close`` leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import operator
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import fields
from typing import Any, cast

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import MessageFields, Record
from . import logs
from .assignors import COOPERATIVE, TopicPartition
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .consumer_membership import ConsumerGroupMembership
from .coordinator_locator import CoordinatorLocator
from .fetcher import Fetcher
from .group_errors import FatalGroupError
from .membership_factory import new_group_offsets, new_membership
from .membership_types import Generation, MemberState
from .offsets import CommitFailedError, OffsetAndMetadata, reset_offsets
from .rebalance_listener import RebalanceListener
from .serde import RecordDeserializers
from .statistics import ConsumerStatistics, StatisticsTracker
from .tasks import deadline
from .transactions import ConsumerGroupMetadata

log = logging.getLogger(__name__)

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupClaim",
    "ConsumerGroupClosedError",
    "ConsumerGroupHandler",
    "ConsumerGroupSession",
    "ConsumerMessage",
]

# The claim whose consume_claim task (or a task it started) is running: lets
# ``session.ended`` answer per claim, so a revoked claim's iterator ends alone.
_CURRENT_CLAIM: contextvars.ContextVar[ConsumerGroupClaim | None] = contextvars.ContextVar(
    "slipstream_consumer_group_claim", default=None
)
_REJOINING = (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)
# A marked position as kept per partition: (offset, leader_epoch, metadata).
_Mark = tuple[int, int, str | None]
# Logged mark_message calls are folded into the marks at least this often: the log keeps
# at most about as many messages alive as one claim's iterator holds (max_poll_records).
_FOLD_AT = 512
# ConsumerMessage fields, in its tuple order (MessageFields): topic, partition / offset.
_TP_OF = operator.itemgetter(0, 1)
_OFFSET_OF = operator.itemgetter(2)


class ConsumerMessage(MessageFields):
    """One record of a claimed partition (sarama's ``ConsumerMessage``): ``topic``,
    ``partition``, ``offset``, ``key``, ``value``, ``headers``, ``timestamp``
    (milliseconds since the epoch: create or log-append time, see
    ``timestamp_type``), ``timestamp_type``, ``leader_epoch``.

    An immutable named tuple. The constructor takes the fields in the order above;
    the tuple itself (iteration, indexing, ``_replace``) has the consumer's common
    :class:`~slipstream.protocol.records.MessageFields` order, in which the fetcher
    decodes records straight into this type (one object per record, no re-wrapping).
    ``headers`` of a record without headers is one shared, read-only empty list
    (equal to ``[]``).
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: int = -1,
        timestamp_type: int = 0,
        leader_epoch: int = -1,
    ) -> ConsumerMessage:
        return tuple.__new__(
            cls,
            (
                topic,
                partition,
                offset,
                key,
                value,
                timestamp,
                [] if headers is None else headers,
                timestamp_type,
                leader_epoch,
            ),
        )

    @classmethod
    def from_record(cls, topic: str, partition: int, r: Record) -> ConsumerMessage:
        return cls(
            topic,
            partition,
            r.offset,
            r.key,
            r.value,
            r.headers,
            r.timestamp,
            r.timestamp_type,
            r.leader_epoch,
        )


class ConsumerGroupClosedError(RuntimeError):
    """``consume`` was called on a closed consumer group (sarama's ErrClosedConsumerGroup)."""


class ConsumerGroupHandler:
    """Subclass and override ``consume_claim`` (``setup`` and ``cleanup`` default to no-ops).

    Any object with these three coroutine methods works as well.
    """

    async def setup(self, session: ConsumerGroupSession) -> None:
        """Called at the start of a session, before any ``consume_claim``."""
        return None

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        """Called at the end of a session, after every ``consume_claim`` returned."""
        return None

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Process ``claim.messages()``; must return soon after the iterator ends."""
        raise NotImplementedError


class ConsumerGroupClaim:
    """One partition claimed by this member, from its assignment until it is revoked or the session ends."""

    def __init__(
        self, session: ConsumerGroupSession, topic: str, partition: int, initial_offset: int
    ) -> None:
        self.session = session
        self.topic = topic
        self.partition = partition
        self.initial_offset = initial_offset
        """The offset consumption started from (committed offset, or the reset position)."""
        self._high_watermark: int | None = None
        self._iterating = False
        self._stopped = asyncio.Event()
        # Mirrors _stopped as a plain attribute: messages() reads it once per message.
        self._over = False
        self.revoked = False
        """A cooperative rebalance revoked this claim alone; the session goes on without it."""

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def stopped(self) -> bool:
        """The claim is over (revoked, or its session ended): ``messages()`` ends, return soon."""
        return self._over or self.session._ended.is_set()

    def _stop(self) -> None:
        self._over = True
        self._stopped.set()

    async def wait_stopped(self) -> None:
        """Wait until the claim is revoked or its session ends."""
        await self._stopped.wait()

    @property
    def high_watermark_offset(self) -> int | None:
        """The partition's high watermark as of the latest fetch (None before the first)."""
        with contextlib.suppress(KeyError):
            hw = self.session._fetcher.highwater(self.tp)
            if hw is not None:
                self._high_watermark = hw
        return self._high_watermark

    async def messages(self) -> AsyncIterator[ConsumerMessage]:
        """The partition's messages in offset order; ends when the claim is revoked or
        the session ends (whichever task drives the iterator).

        Only pulls from the fetcher's buffer when the handler asks for the next
        message, so a slow handler stops its partition from being fetched.
        """
        if self._iterating:
            raise RuntimeError(f"{self.topic}-{self.partition}: messages() is already iterated")
        self._iterating = True
        session = self.session
        ended = session._ended
        fetcher = session._fetcher
        limit = session._config.max_poll_records
        deserializers = RecordDeserializers(session._config.key_deserializer, session._config.value_deserializer)
        tp = self.tp
        try:
            # The claim's own flag, not session.ended: that one answers per claim only
            # inside the claim's task (context variable), and costs a lookup per message.
            # An async generator over a local list is the cheapest per-message step
            # (measured below a hand-written __anext__, which must build an awaitable).
            while not (self._over or ended.is_set()):
                # One decoded batch at a time (at most max_poll_records of it): what
                # this iterator holds stays small, the rest stays counted in the
                # fetcher's buffer (and its backpressure). Records come decoded as
                # ConsumerMessage already.
                records = await fetcher.fetch_partition(
                    tp, limit, 0.5, message_type=ConsumerMessage, one_batch=True
                )
                if records:
                    session._group._handed_out(len(records))
                    if deserializers.active:
                        records = deserializers.apply_all(records)
                for msg in cast(list[ConsumerMessage], records):
                    if self._over:  # set with session end too (ConsumerGroupSession._end)
                        return
                    yield msg
        finally:
            self._iterating = False

    def __repr__(self) -> str:
        return f"ConsumerGroupClaim({self.topic}-{self.partition}, initial_offset={self.initial_offset})"


class ConsumerGroupSession:
    """This member's claims from ``setup`` to ``cleanup``, and the offsets it marked.

    With an EAGER protocol a session is one generation. With a COOPERATIVE one
    it spans generations: ``generation`` / ``generation_id`` follow the
    membership (commits use the current one) and ``claims`` changes as
    partitions are revoked and assigned incrementally.
    """

    def __init__(
        self,
        group: ConsumerGroup,
        generation: Generation,
    ) -> None:
        self._group = group
        self._config = group.config
        self._fetcher = group._fetcher
        self.generation = generation
        self.generation_id = generation.generation_id
        self.member_id = generation.member_id
        # Partitions the session holds: a revoked one leaves at once, an assigned one joins.
        self._owned: set[TopicPartition] = set(generation.assignment)
        # Live claims, including revoked ones still winding down (their marks still count).
        self._claims: dict[TopicPartition, ConsumerGroupClaim] = {}
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self.claims: dict[str, list[int]] = {}
        """topic -> the partitions this session holds now."""
        self._update_claims()
        # Raw marks (offset, leader_epoch, metadata): OffsetAndMetadata objects are only
        # built when read or committed, not once per marked message.
        self._marked: dict[TopicPartition, _Mark] = {}
        self._mark_log: list[ConsumerMessage] = []
        self._committed: dict[TopicPartition, _Mark] = {}
        # Serialises commits: offsets sent in mark order, never backwards.
        self._commit_lock = asyncio.Lock()
        self._ended = asyncio.Event()
        self._finished = asyncio.Event()
        self._setup_done = False
        self._handler: Any = None
        self._errors: list[BaseException] = []
        self._reaped: set[asyncio.Task[None]] = set()
        self.end_reason: str | None = None
        self.lost = False
        """The partitions were lost (not revoked): the final commit is skipped."""

    @property
    def ended(self) -> bool:
        """The session is ending: claims' iterators stop, handlers should return.

        Read inside a claim's ``consume_claim`` (or a task it started), it is
        also true once that claim alone is revoked by a cooperative rebalance.
        """
        if self._ended.is_set():
            return True
        claim = _CURRENT_CLAIM.get()
        return claim is not None and claim.session is self and claim._stopped.is_set()

    async def wait_ended(self) -> None:
        """Wait until the session ends (sarama's ``Context().Done()``); per claim as ``ended``."""
        claim = _CURRENT_CLAIM.get()
        if claim is not None and claim.session is self:
            await claim._stopped.wait()  # also set when the session ends
        else:
            await self._ended.wait()

    def _end(self, reason: str, *, lost: bool = False) -> None:
        if lost:
            self.lost = True
        if self._ended.is_set():
            return
        self.end_reason = reason
        log.debug(
            "group %s: session of generation %d ends: %s",
            self._group.group_id,
            self.generation_id,
            reason,
        )
        self._ended.set()
        for claim in self._claims.values():
            claim._stop()
        # Wake claims waiting in fetch_partition: removal makes it return [] at once.
        self._fetcher.remove(self._owned | set(self._claims))

    def _update_claims(self) -> None:
        claims: dict[str, list[int]] = {}
        for topic, partition in self._owned:
            claims.setdefault(topic, []).append(partition)
        self.claims = {t: sorted(ps) for t, ps in sorted(claims.items())}

    def _set_generation(self, generation: Generation | None) -> None:
        if generation is not None:
            self.generation = generation
            self.generation_id = generation.generation_id
            self.member_id = generation.member_id

    # ------------------------------------------------------------ offsets

    def mark_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Mark ``offset`` (the next offset to consume) for commit; lower offsets are ignored."""
        tp = (topic, partition)
        if tp not in self._claims:
            log.debug("group %s: ignoring mark of unclaimed %s-%d", self._group.group_id, *tp)
            return
        self._fold_marks()
        current = self._marked.get(tp)
        if current is None or offset > current[0]:
            self._marked[tp] = (offset, -1, metadata or None)

    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Mark ``msg`` as processed: its offset + 1 is committed (sarama's ``MarkMessage``)."""
        if metadata:
            self._fold_marks()
            self._mark(msg, metadata)
            return
        # Called once per message: only logged here, folded into the per-partition marks
        # (in C-level runs) when they are read, committed or the claims change.
        logged = self._mark_log
        logged.append(msg)
        if len(logged) >= _FOLD_AT:
            self._fold_marks()

    def _mark(self, msg: ConsumerMessage, metadata: str | None) -> None:
        tp = (msg.topic, msg.partition)
        if tp not in self._claims:
            return
        offset = msg.offset + 1
        current = self._marked.get(tp)
        if current is None or offset > current[0]:
            self._marked[tp] = (offset, msg.leader_epoch, metadata or None)

    def _fold_marks(self) -> None:
        """Apply the logged mark_message calls, as if each had been applied when made.

        Called before anything reads the marks and before ``_claims`` changes, so the
        claimed-partition check sees the claims the marks were made under.
        """
        logged = self._mark_log
        if not logged:
            return
        self._mark_log = []
        # Consecutive marks of one partition (a claim's loop) form one run: its highest
        # offset is found in C; Python work is per run, not per message.
        for _tp, run in itertools.groupby(logged, _TP_OF):
            self._mark(max(run, key=_OFFSET_OF), None)

    def marked(self) -> dict[TopicPartition, OffsetAndMetadata]:
        self._fold_marks()
        return {
            tp: OffsetAndMetadata(offset, metadata, epoch)
            for tp, (offset, epoch, metadata) in self._marked.items()
        }

    def pending_commits(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The marked offsets not committed yet (a copy): what :meth:`commit` would send now.

        Partitions leave it once committed, and when a revoked claim is handed
        over (its marks are committed first, if ``enable_auto_commit``).
        """
        return {
            tp: OffsetAndMetadata(mark[0], mark[2], mark[1])
            for tp, mark in self._pending().items()
        }

    def _pending(self) -> dict[TopicPartition, _Mark]:
        self._fold_marks()
        committed = self._committed
        return {tp: mark for tp, mark in self._marked.items() if committed.get(tp) != mark}

    async def commit(self) -> None:
        """Commit the offsets marked since the last commit, now.

        Commits of one session go out one at a time, in mark order. Raises
        CommitFailedError if the group rebalanced without this member's
        partitions (the session then ends), KafkaError / TimeoutError otherwise;
        KafkaError(REBALANCE_IN_PROGRESS) without sending anything while this
        member is rejoining (JoinGroup or SyncGroup outstanding; cooperative
        sessions go on meanwhile): the offsets stay pending for a later commit.
        """
        async with self._commit_lock:
            raw = self._pending()
            if not raw:
                return
            if self._group._membership.state in _REJOINING:
                # Doomed: behind the JoinGroup on the coordinator connection it meets a new
                # generation (ILLEGAL_GENERATION), between JoinGroup and SyncGroup a refusal
                # (REBALANCE_IN_PROGRESS) that the membership would take as a reason to
                # rebalance once more.
                raise KafkaError(
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    f"group {self._group.group_id!r} is rebalancing; "
                    "the marked offsets stay pending",
                )
            pending = {
                tp: OffsetAndMetadata(offset, metadata, epoch)
                for tp, (offset, epoch, metadata) in raw.items()
            }
            await self._group._offsets.commit(pending, self._group._commit_generation(self))
            self._committed.update(raw)

    async def _forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop handed-over partitions' marks, after any commit in flight."""
        async with self._commit_lock:
            self._fold_marks()
            for tp in partitions:
                self._marked.pop(tp, None)
                self._committed.pop(tp, None)

    def __repr__(self) -> str:
        return (
            f"ConsumerGroupSession(generation_id={self.generation_id}, "
            f"member_id={self.member_id!r}, claims={self.claims})"
        )


class _Listener(RebalanceListener):
    """Eager: ends the session before every rejoin. Cooperative: revokes and adds claims.

    Each hook is awaited by the membership, so a revocation completes (claims
    returned, offsets committed) before this member rejoins or syncs again.
    """

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = group

    async def on_join_prepare(self, generation: Generation | None) -> None:
        if not self.group._incremental():
            await self.group._end_session("the group is rebalancing")
        elif generation is not None:
            await self.group._commit_before_join()

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if not revoked:
            return
        if self.group._incremental():
            await self.group._revoke_claims(revoked)
        else:
            await self.group._end_session("partitions revoked")

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.group._stats.rebalanced()
        if self.group._incremental():
            await self.group._assign_claims(assigned)

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        await self.group._end_session("partitions lost", lost=True)


class ConsumerGroup:
    """A member of a consumer group running handler sessions (sarama's ConsumerGroup).

    ``ConsumerGroup(bootstrap_servers, group_id, config=None, **overrides)``:
    settings are :class:`~.consumer_config.ConsumerConfig` fields, given as a
    config object and/or keyword overrides. Not thread-safe: use from one event loop.

    Sessions and rebalances (see the module docstring for the whole story):

    - EAGER protocol: every rebalance ends the session before this member
      rejoins (claims stop, cleanup, final commit); ``consume`` returns and
      the next call starts a session for the new generation.
    - COOPERATIVE protocol (cooperative-sticky): the session survives
      rebalances. Revoked partitions: only their claims stop (``claim.revoked``,
      iterator ends, ``session.ended`` true inside their ``consume_claim``);
      the revocation completes after their ``consume_claim`` returned (or the
      rebalance timeout cancelled it) and, with ``enable_auto_commit``, after
      the session's marked offsets were committed -- the membership awaits all
      this before it rejoins, so the next owner starts later and from that
      commit. Kept claims go on untouched. Added partitions get new claims in
      the same session (no second ``setup``). ``session.claims`` and
      ``session.generation_id`` track the current assignment and generation.
      An exception from any ``consume_claim`` (revoked or not) ends the session
      and is raised from ``consume``; a ``consume_claim`` returning while its
      claim was not revoked ends the session, as in sarama.
    - Either protocol: lost partitions (session expiry, fencing, a fatal
      error) end the whole session without committing; ``close`` ends it
      with a final commit.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        group_id: str,
        config: ConsumerConfig | None = None,
        **overrides: Any,
    ) -> None:
        base = config or ConsumerConfig()
        names = {f.name for f in fields(ConsumerConfig)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown consumer setting(s): {', '.join(unknown)}")
        values = {f.name: getattr(base, f.name) for f in fields(ConsumerConfig)}
        values.update(overrides)
        values["bootstrap_servers"] = bootstrap_servers
        values["group_id"] = group_id
        self.config = ConsumerConfig(**values).validate()
        self.group_id = group_id
        self._cluster = Cluster(
            bootstrap_servers,
            client_id=self.config.client_id,
            request_timeout_s=self.config.request_timeout_ms / 1000.0,
            security=self.config.security(),
        )
        self._locator = CoordinatorLocator(self._cluster, self.config)
        # group_protocol="consumer" (KIP-848) is incremental like a cooperative assignor:
        # the session spans rebalances and only revoked claims stop.
        self._membership = new_membership(
            self._cluster, self.config, listener=_Listener(self), locator=self._locator
        )
        self._offsets = new_group_offsets(self._locator, self.config, self._membership)
        self._fetcher = Fetcher(self._cluster, self.config)
        self._session: ConsumerGroupSession | None = None
        self._consuming = False
        self._consume_task: asyncio.Task[Any] | None = None
        self._closed = False
        self._shut_down = False
        self._shutdown_deferred = False
        self.sessions = 0
        """Sessions started so far (for tests and metrics)."""
        self._stats = StatisticsTracker(
            self.config.client_id, group_id, time.monotonic(), self.config.statistics_interval_ms / 1000.0
        )

    # ------------------------------------------------------------ public API

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation, for ``AIOProducer.send_offsets_to_transaction``
        (the running session's generation; -1 before the first one)."""
        generation = self._membership.generation
        group_id = self.config.group_id or ""
        if generation is None:
            return ConsumerGroupMetadata(group_id, group_instance_id=self.config.group_instance_id)
        return ConsumerGroupMetadata(
            group_id, generation.generation_id, generation.member_id, self.config.group_instance_id
        )

    def statistics(self) -> ConsumerStatistics:
        """A snapshot (the poll consumers' shape): per-partition position, high watermark
        and lag of the partitions this member holds, records handed to its claims and
        their rate since the previous snapshot, and the rebalances (assignments received).
        With ``statistics_callback`` the group also calls it every
        ``statistics_interval_ms``, from a claim's ``messages()`` as records arrive."""
        fetcher = self._fetcher
        session = self._session
        held = set(session._owned) if session is not None else fetcher.assigned()

        def position(tp: TopicPartition) -> int | None:
            try:
                return fetcher.position(tp)
            except KeyError:  # revoked between the listing and now
                return None

        def high_watermark(tp: TopicPartition) -> int | None:
            try:
                return fetcher.highwater(tp)
            except KeyError:
                return None

        return self._stats.snapshot(time.monotonic(), held, position, high_watermark)

    def _handed_out(self, count: int) -> None:
        """Count records given to a claim; report statistics when an interval has passed."""
        stats = self._stats
        stats.consumed(count)
        callback = self.config.statistics_callback
        if callback is not None and stats.report_due(time.monotonic()):
            callback(self.statistics())

    @property
    def session(self) -> ConsumerGroupSession | None:
        """The running session, if any."""
        return self._session

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> ConsumerGroup:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def consume(
        self, topics: Iterable[str], handler: Any, *, join_timeout_s: float | None = None
    ) -> None:
        """Run one session of ``handler`` over this member's partitions of ``topics``.

        Joins the group if needed and returns when the session ends (a
        rebalance, a ``consume_claim`` returning, or close). Call it in a loop.
        Raises the handler's exception, or the membership's fatal error; with
        ``join_timeout_s``, a TimeoutError naming the group when joining takes longer
        (e.g. no broker answers).
        """
        if self._closed:
            raise ConsumerGroupClosedError("the consumer group is closed")
        if self._consuming:
            raise RuntimeError("consume() is already running on this consumer group")
        topic_list = list(topics)
        if not topic_list:
            raise ValueError("consume needs at least one topic")
        self._consuming = True
        logs.bind(self.config.client_id)  # the session's tasks log under this client's id
        try:
            self._membership.subscribe(topic_list)
            if join_timeout_s is None:
                generation = await self._active_generation()
            else:
                async with deadline(join_timeout_s, f"joining consumer group {self.group_id!r}"):
                    generation = await self._active_generation()
            if generation is not None:
                await self._run_session(generation, handler)
        finally:
            self._consuming = False
            self._consume_task = None
            if self._shutdown_deferred:
                self._shutdown_deferred = False
                await self._shutdown()

    async def _active_generation(self) -> Generation | None:
        """The stable generation to run a session in, or None once the group is closed."""
        while True:
            try:
                generation = await self._membership.ensure_active()
            except RuntimeError:
                if self._closed:
                    return None
                raise
            if self._closed:
                return None
            if self._membership.rejoin_needed or self._membership.generation != generation:
                continue
            return generation

    async def commit(self) -> None:
        """Commit the running session's marked offsets (no-op without a session)."""
        if self._session is not None:
            await self._session.commit()

    async def close(self) -> None:
        """End the session (cleanup, final commit), leave the group, close connections.

        Called from inside the session (a handler's ``consume_claim``, ``setup``
        or ``cleanup``) it only ends the session and returns; ``consume`` then
        finishes the session and the shutdown before it returns.
        """
        if self._closed:
            return
        self._closed = True
        session = self._session
        if session is not None:
            session._end("the consumer group is closing")
            if self._inside(session):
                self._shutdown_deferred = True
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._rebalance_timeout_s() + 5.0):
                    await session._finished.wait()
        await self._shutdown()

    # ------------------------------------------------------------ internals

    def _inside(self, session: ConsumerGroupSession) -> bool:
        """Whether the current task is one the session's teardown waits for."""
        current = asyncio.current_task()
        return current is not None and (
            current in session._tasks.values() or current is self._consume_task
        )

    def _commit_generation(self, session: ConsumerGroupSession) -> Generation:
        """The generation a session's commit carries.

        Classic: the session's own (a commit from an older generation must fail).
        Consumer protocol: the member's latest epoch, a fencing token that moves
        without the assignment changing (the Java client commits with it too).
        """
        if isinstance(self._membership, ConsumerGroupMembership):
            return self._membership.generation or session.generation
        return session.generation

    def _incremental(self) -> bool:
        """Cooperative protocol: rebalances revoke and add claims within the session."""
        return self._membership.protocol == COOPERATIVE

    async def _shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        try:
            await self._membership.close()
        finally:
            await self._fetcher.close()
            await self._locator.close()
            await self._cluster.close()

    def _rebalance_timeout_s(self) -> float:
        return self.config.effective_rebalance_timeout_ms / 1000.0

    async def _end_session(self, reason: str, *, lost: bool = False) -> None:
        session = self._session
        if session is None:
            return
        session._end(reason, lost=lost)
        if not self._inside(session):
            await session._finished.wait()

    async def _initial_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        committed = await self._offsets.fetch_committed(partitions)
        out = {tp: om.offset for tp, om in committed.items() if om is not None and om.offset >= 0}
        missing = [tp for tp in partitions if tp not in out]
        if missing:
            policy = self.config.auto_offset_reset
            out.update(
                await reset_offsets(self._cluster, {tp: policy for tp in missing}, self.config)
            )
        return out

    def _add_claims(self, session: ConsumerGroupSession, offsets: dict[TopicPartition, int]) -> None:
        """Create claims for the partitions the session still holds (a revocation may have won)."""
        offsets = {
            tp: o for tp, o in offsets.items() if tp in session._owned and tp not in session._claims
        }
        self._fetcher.add(offsets)
        session._fold_marks()  # before the claims change (see _fold_marks)
        for (topic, partition), offset in sorted(offsets.items()):
            claim = ConsumerGroupClaim(session, topic, partition, offset)
            session._claims[claim.tp] = claim
            if session._setup_done:
                self._start_claim(session, claim)

    def _start_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        if claim.tp in session._tasks or claim.stopped:
            return
        session._tasks[claim.tp] = asyncio.get_running_loop().create_task(
            self._run_claim(session, claim), name=f"claim-{claim.topic}-{claim.partition}"
        )

    async def _run_session(self, generation: Generation, handler: Any) -> None:
        session = ConsumerGroupSession(self, generation)
        session._handler = handler
        self._session = session
        self._consume_task = asyncio.current_task()
        self.sessions += 1
        errors = session._errors
        autocommit: asyncio.Task[None] | None = None
        try:
            partitions = sorted(session._owned)
            offsets = await self._initial_offsets(partitions) if partitions else {}
            if session.ended:
                return
            self._add_claims(session, offsets)
            await handler.setup(session)
            session._setup_done = True
            if session.ended:
                return
            for claim in list(session._claims.values()):
                self._start_claim(session, claim)
            loop = asyncio.get_running_loop()
            if self.config.enable_auto_commit:
                autocommit = loop.create_task(self._autocommit_loop(session), name="autocommit")
            while not session.ended:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.25):
                        await session._ended.wait()
                if self._membership.error is not None:
                    session._end(f"group membership failed: {self._membership.error}", lost=True)
        except BaseException as exc:
            errors.append(exc)
            session._end(f"session failed: {exc!r}")
        finally:
            await self._finish_session(session, autocommit)
        if errors:
            raise errors[0]
        if self._membership.error is not None:
            raise self._membership.error

    async def _run_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        _CURRENT_CLAIM.set(claim)  # this task's context only: session.ended answers per claim
        tp = f"{claim.topic}-{claim.partition}"
        try:
            await session._handler.consume_claim(session, claim)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            session._end(f"consume_claim of {tp} raised {exc!r}")
            raise
        if not claim.revoked:
            # sarama: the session ends as soon as the first claim's handler returns.
            session._end(f"consume_claim of {tp} returned")

    async def _wait_claims(
        self, session: ConsumerGroupSession, tasks: list[asyncio.Task[None]]
    ) -> None:
        """Wait for claim tasks (at most the rebalance timeout, then cancel); keep their errors."""
        _done, pending = await asyncio.wait(tasks, timeout=self._rebalance_timeout_s())
        for t in pending:
            log.warning(
                "group %s: %s did not return within the rebalance timeout; cancelling",
                self.group_id,
                t.get_name(),
            )
            t.cancel()
        if pending:
            await asyncio.wait(pending)
        for t in tasks:
            if t in session._reaped:
                continue
            session._reaped.add(t)
            if not t.cancelled() and t.exception() is not None:
                session._errors.append(t.exception())  # type: ignore[arg-type]

    def _park(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching and delivering ``partitions`` and wake their claims' iterators now.

        A fresh paused entry replaces each partition's fetch state: a waiting
        ``fetch_partition`` sees the swap and returns at once, and later calls
        wait instead of returning immediately (no busy loop for an iterator
        driven outside its claim's task) until the claim is gone.
        """
        for tp in partitions:
            try:
                position = self._fetcher.position(tp)
            except KeyError:
                position = None
            self._fetcher.remove([tp])
            if position is not None:
                self._fetcher.add({tp: position})
                self._fetcher.pause([tp])

    async def _revoke_claims(self, revoked: list[TopicPartition]) -> None:
        """Cooperative revocation: stop just these claims, commit, hand them over."""
        session = self._session
        if session is None:
            return
        session._set_generation(self._membership.generation)
        tps = sorted(tp for tp in set(revoked) if tp in session._owned or tp in session._claims)
        if not tps:
            return
        log.info(
            "group %s: generation %d revokes %s; the other claims go on",
            self.group_id,
            session.generation_id,
            [f"{t}-{p}" for t, p in tps],
        )
        session._owned.difference_update(tps)
        session._update_claims()
        for tp in tps:
            claim = session._claims.get(tp)
            if claim is not None:
                claim.revoked = True
                claim._stop()
        self._park(tps)
        tasks = [session._tasks[tp] for tp in tps if tp in session._tasks]
        try:
            if tasks:
                await self._wait_claims(session, tasks)
            if self.config.enable_auto_commit and not session.lost:
                try:
                    await session.commit()
                except Exception as exc:
                    log.warning("group %s: commit on revocation failed: %s", self.group_id, exc)
            await session._forget(tps)
        finally:
            session._fold_marks()  # before the claims change (see _fold_marks)
            for tp in tps:
                session._claims.pop(tp, None)
                session._tasks.pop(tp, None)
            self._fetcher.remove(tps)

    async def _assign_claims(self, assigned: list[TopicPartition]) -> None:
        """Cooperative assignment: carry the session into the new generation, add claims."""
        session = self._session
        if session is None or session.ended:
            return
        session._set_generation(self._membership.generation)
        new = sorted(tp for tp in set(assigned) if tp not in session._owned)
        if not new:
            return
        session._owned.update(new)
        session._update_claims()
        try:
            offsets = await self._initial_offsets(new)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            session._errors.append(exc)
            session._end(f"cannot start claims for newly assigned {new}: {exc!r}")
            return
        if session.ended:
            return
        log.info(
            "group %s: generation %d adds claims %s",
            self.group_id,
            session.generation_id,
            [f"{t}-{p}" for t, p in new],
        )
        self._add_claims(session, offsets)

    async def _commit_before_join(self) -> None:
        """Cooperative, auto-commit: commit before JoinGroup (the Java client does too),
        since commits are refused until the rebalance completes while claims go on."""
        session = self._session
        if session is None or session.ended or not self.config.enable_auto_commit:
            return
        try:
            await session.commit()
        except Exception as exc:
            log.warning("group %s: commit before rejoining failed: %s", self.group_id, exc)

    async def _autocommit_loop(self, session: ConsumerGroupSession) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not session.ended:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await session._ended.wait()
            if session.ended:
                return
            if self._membership.state is not MemberState.STABLE:
                # Mid-rebalance (cooperative: claims go on): the coordinator would answer
                # REBALANCE_IN_PROGRESS; the next tick commits.
                continue
            try:
                await session.commit()
            except CommitFailedError as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)
            except (ConnectionClosed, OSError, TimeoutError, FatalGroupError) as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)
            except Exception as exc:  # KafkaError and friends: keep going
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def _finish_session(
        self, session: ConsumerGroupSession, autocommit: asyncio.Task[None] | None
    ) -> None:
        errors = session._errors
        try:
            if autocommit is not None:
                autocommit.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await autocommit
            tasks = list(session._tasks.values())
            if tasks:
                await self._wait_claims(session, tasks)
            if session._setup_done:
                try:
                    await session._handler.cleanup(session)
                except Exception as exc:
                    errors.append(exc)
            if self.config.enable_auto_commit and not session.lost:
                try:
                    await session.commit()
                except (CommitFailedError, ConnectionClosed, OSError, TimeoutError) as exc:
                    log.warning("group %s: final commit failed: %s", self.group_id, exc)
                except Exception as exc:
                    log.warning("group %s: final commit failed: %s", self.group_id, exc)
        finally:
            self._fetcher.remove(session._owned | set(session._claims))
            if self._session is session:
                self._session = None
            session._ended.set()
            for claim in session._claims.values():
                claim._stop()
            session._finished.set()
