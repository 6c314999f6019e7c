"""The poll consumer: a blocking facade over a background network thread (seed 002).

Modelled on Kafka's ``AsyncKafkaConsumer``: a background thread runs an asyncio
loop that owns every socket and the group membership. The state and logic on
that loop live in :class:`ConsumerCore` (:class:`GroupMembership`, or
:class:`~.consumer_membership.ConsumerGroupMembership` with ``group_protocol="consumer"``,
:class:`Fetcher`, :class:`GroupOffsets`, the ``max_poll_interval_ms`` watchdog);
the asyncio-native :class:`~.aio_consumer.AIOConsumer` runs the same core on the
caller's loop. The application thread talks to the network thread by submitting
coroutines to its loop (application events) and by draining a queue of
*background events* the network thread sends back:

- rebalance listener callbacks (``on_partitions_revoked`` / ``_assigned`` /
  ``_lost``): the membership awaits its hook on the network loop; the hook
  queues the user's callback for the application thread and waits for it to
  finish, so user callbacks run on the application thread, inside
  :meth:`Consumer.poll` (or whichever blocking consumer call is waiting), as
  in Java. Heartbeats keep going meanwhile; the rebalance must finish within
  the rebalance timeout (``max_poll_interval_ms``), so keep polling;
- ``commit_async`` completions: callbacks are queued in completion order
  (commits go out one at a time, in call order) and run during ``poll`` /
  ``commit_sync`` / ``close``.

``poll(timeout_s)``: run due callbacks, auto-commit the positions of what
earlier polls returned (every ``auto_commit_interval_ms``), make sure the group
membership is active (joining or rejoining, bounded by the timeout), then wait
for buffered data and drain at most ``max_poll_records``. Positions advance as
records are handed to the application, so ``commit_sync()`` with no argument
commits "everything poll returned".

Read-ahead: after a poll returns, the network thread drains the next polls'
records (decoded; up to ``_READ_AHEAD_POLLS`` x ``max_poll_records``, and past the
first poll's worth only while the batches it used up total less than
``max_partition_fetch_bytes``) while the application works, and the next polls
take them (at most ``max_poll_records`` each) without a round trip through the
network loop -- a hand-off between the threads costs about as much as decoding
dozens of records, so there is one per few polls, not one per poll --
only while no group is involved or the membership is stable (no rebalance in
progress, no error, no auto-commit due); otherwise poll goes through the loop
as described above. Whatever was read ahead is given back to the fetcher
(positions move back to it) before any other operation runs on the loop -- a
commit, seek, pause, position, a revocation -- so read-ahead records are never
counted as consumed, paused partitions keep theirs, and a seek drops them.

Auto-commit before a rebalance (``on_join_prepare``) first waits until the
application is back inside the consumer (a barrier event), so it never commits
records the application is still processing.

``max_poll_interval_ms``: a watchdog task on the network loop leaves the group
when the application has not called ``poll`` for that long, without waiting
for the application: the owned partitions are reported *lost* at the next
poll, which also rejoins.

Not thread-safe, by design: every public method checks that no other thread is
inside the consumer at the time and raises :class:`ConcurrentModificationError`
if one is (Java's ``acquire()``; re-entry from a listener callback on the same
thread is fine).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import queue
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import fields
from typing import Any, TypeVar, cast

from ..protocol.errors import KafkaError
from ..protocol.records import MessageFields
from . import logs
from .assignors import TopicPartition
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .consumer_membership import ConsumerGroupMembership
from .coordinator_locator import CoordinatorLocator
from .fetcher import Fetcher
from .membership_factory import AnyMembership, new_group_offsets, new_membership
from .membership_types import Generation
from .offsets import GroupOffsets, OffsetAndMetadata
from .rebalance_listener import RebalanceListener
from .retry import backoff_s
from .serde import RecordDeserializers
from .statistics import ConsumerStatistics, StatisticsTracker
from .subscription import TopicPattern
from .tasks import deadline
from .transactions import ConsumerGroupMetadata

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "ConcurrentModificationError",
    "Consumer",
    "ConsumerCore",
    "ConsumerRebalanceListener",
    "Message",
    "WakeupError",
]


class ConcurrentModificationError(RuntimeError):
    """The consumer was used from two threads at once (it is not thread-safe)."""


class WakeupError(Exception):
    """``poll`` was interrupted by ``wakeup()`` (Java's WakeupException).

    Raised in the polling thread, by the poll that was blocked when ``wakeup()`` was
    called, or by the next poll if none was. Nothing is lost: records are counted as
    consumed only when a poll returns them.
    """


class Message(MessageFields):
    """One consumed record: ``topic``, ``partition``, ``offset``, ``key``, ``value``,
    ``timestamp``, ``headers``, ``timestamp_type``, ``leader_epoch``.

    An immutable named tuple (fields in that order; ``_replace`` makes a changed
    copy). The fetcher decodes records straight into this type, one object per
    record: a frozen dataclass cost more per record than decoding it. ``headers``
    is a list of (key, value); for records without headers it is one shared,
    read-only empty list (equal to ``[]``; copy it with ``list()`` to add to it).
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp_type: int = 0,
        leader_epoch: int = -1,
    ) -> Message:
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


class ConsumerRebalanceListener:
    """Base for ``subscribe(listener=...)``; any object with some of these methods works.

    The methods run on the application thread during ``poll`` (and ``close`` /
    ``unsubscribe``; with :class:`~.aio_consumer.AIOConsumer`, on the loop and
    they may be coroutines). ``on_partitions_lost`` defaults to revoked when
    the listener does not define it.
    """

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        return None

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        return None


CommitCallback = Callable[[Mapping[TopicPartition, int], BaseException | None], None]


UserCall = Callable[[Callable[[], Any], bool], Awaitable[None]]
"""How the core runs a user callback: ``await invoke(fn, wait)``; ``wait=False``: don't block on it."""


def config_from(
    bootstrap_servers: str | list[str], group_id: str | None, settings: Mapping[str, Any]
) -> ConsumerConfig:
    known = {f.name for f in fields(ConsumerConfig)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"unknown consumer settings: {unknown}")
    return ConsumerConfig(
        bootstrap_servers=bootstrap_servers, group_id=group_id, **settings
    ).validate()


def _nothing() -> None:
    return None


class _Hooks(RebalanceListener):
    """The membership's hooks, awaited on the core's loop."""

    def __init__(self, core: ConsumerCore) -> None:
        self.core = core

    async def on_join_prepare(self, generation: Generation | None) -> None:
        # Until the new assignment is in place the thread facade returns nothing
        # from its read-ahead without asking this loop (see Consumer.poll).
        self.core.rebalancing = True
        if self.core.config.enable_auto_commit and generation is not None:
            # Barrier: wait until the application is back in the consumer (it has
            # handled what the last poll returned), then commit those positions.
            await self.core.invoke(_nothing, True)
            await self.core.commit_quietly(generation, "before rejoining")

    async def on_revoke_prepare(self, revoked: list[TopicPartition]) -> None:
        """Consumer protocol, before a revocation: hand out nothing more of the revoked
        partitions, then (auto-commit) commit what the application has processed."""
        self.core.rebalancing = True
        self.core.fetcher.pause(revoked)
        m = self.core.membership
        await self.on_join_prepare(m.generation if m is not None else None)

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.core.rebalancing = True
        await self.core.user_hook("on_partitions_revoked", revoked)
        self.core.remove(revoked)

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.core.rebalancing = True
        await self.core.user_hook("on_partitions_lost", lost)
        self.core.remove(lost)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        core = self.core
        if assigned:
            try:
                committed = await core.offsets_client().fetch_committed(assigned)
            except Exception as exc:
                # Without positions the partitions can't be fetched: rejoin rather than stall.
                log.warning("could not read the committed offsets of %s: %s", assigned, exc)
                if core.membership is not None:
                    core.membership.request_rejoin("committed offsets could not be read")
                raise
            core.fetcher.add({tp: (om.offset if om else None) for tp, om in committed.items()})
        await core.user_hook("on_partitions_assigned", assigned)
        core.rebalancing = False
        core.stats.rebalanced()


class ConsumerCore:
    """The consumer's state and logic on one event loop, shared by :class:`Consumer`
    (a background thread's loop) and :class:`~.aio_consumer.AIOConsumer` (the caller's loop).

    Every method must run on that loop. ``invoke`` runs the user's rebalance
    listener callbacks (the thread facade ships them to the application thread).
    """

    def __init__(self, config: ConsumerConfig, invoke: UserCall) -> None:
        self.config = config
        self.invoke = invoke
        self.listener: Any = None
        self.subscribed: tuple[str, ...] = ()
        """The topics the member subscribes to (with a pattern: what it currently selects)."""
        self.pattern: TopicPattern | None = None
        self.pattern_task: asyncio.Task[None] | None = None
        self.broker_pattern: str | None = None
        """group_protocol="consumer": the subscribed regular expression, evaluated by the broker."""
        self.last_poll = time.monotonic()
        self.in_poll = False
        self.left_for_poll_timeout = False
        self.leaving_for_poll_timeout = False
        self.next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000.0
        self.cluster = Cluster(
            config.bootstrap_servers,
            client_id=config.client_id,
            request_timeout_s=config.request_timeout_ms / 1000.0,
            security=config.security(),
        )
        self.fetcher = Fetcher(self.cluster, config, message_type=Message)
        self.locator: CoordinatorLocator | None = None
        self.membership: AnyMembership | None = None
        self.offsets: GroupOffsets | None = None
        if config.group_id is not None:
            self.locator = CoordinatorLocator(self.cluster, config)
            self.membership = new_membership(
                self.cluster, config, listener=_Hooks(self), locator=self.locator
            )
            self.offsets = new_group_offsets(self.locator, config, self.membership)
        self.consumed_positions: Callable[[], dict[TopicPartition, int]] = self.fetcher.positions
        """What a default commit commits: the positions after what the application got."""
        self.on_removed: Callable[[list[TopicPartition]], None] | None = None
        """Called after partitions are revoked or lost (a facade drops what it holds of them)."""
        self.commit_tasks: set[asyncio.Task[None]] = set()
        self.rebalancing = False
        """Between ``on_join_prepare`` (or a revocation) and the end of ``on_partitions_assigned``."""
        self.watchdog = asyncio.get_running_loop().create_task(self._poll_watchdog())
        self.closed = False
        self.deserializers = RecordDeserializers(config.key_deserializer, config.value_deserializer)
        self.stats = StatisticsTracker(
            config.client_id, config.group_id, time.monotonic(), config.statistics_interval_ms / 1000.0
        )

    # ------------------------------------------------------------ what the application gets

    def hand_out(self, msgs: list[Message]) -> list[Message]:
        """Count (statistics) and deserialize what a poll returns; runs on the caller's side."""
        if msgs:
            self.stats.consumed(len(msgs))
            if self.deserializers.active:
                return self.deserializers.apply_all(msgs)
        return msgs

    def statistics(self) -> ConsumerStatistics:
        fetcher = self.fetcher
        return self.stats.snapshot(time.monotonic(), fetcher.assigned(), fetcher.position, fetcher.highwater)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, int | None]:
        """For each partition the first offset whose record timestamp is at or after the
        given time (ms), or None when no record is that recent."""
        from .admin import Admin  # the admin client's ListOffsets routing, on our cluster

        admin = Admin(self.cluster, retry_timeout_s=timeout_s)
        out: dict[TopicPartition, int | None] = {}
        by_time: dict[int, list[TopicPartition]] = {}
        for tp, when in timestamps.items():
            if when < 0:
                raise ValueError(f"offsets_for_times needs times >= 0, got {when} for {tp}")
            by_time.setdefault(when, []).append(tp)
        async with asyncio.timeout(timeout_s):
            for when, tps in by_time.items():
                for tp, found in (await admin.log_offsets(tps, when)).items():
                    if isinstance(found, KafkaError):
                        raise found
                    out[tp] = None if found < 0 else found
        return out

    # ------------------------------------------------------------ helpers

    def offsets_client(self) -> GroupOffsets:
        if self.offsets is None:
            raise RuntimeError("this needs a group_id (committed offsets belong to a group)")
        return self.offsets

    @property
    def in_group(self) -> bool:
        """Subscribed through the group: to topics, or to a pattern the broker evaluates."""
        return bool(self.subscribed) or self.broker_pattern is not None

    def generation(self) -> Generation | None:
        m = self.membership
        return m.generation if (m is not None and self.in_group) else None

    def group_metadata(self) -> ConsumerGroupMetadata:
        """What a transactional producer's ``send_offsets_to_transaction`` needs: the group,
        and this member's id and generation (-1/"" outside a generation)."""
        if self.config.group_id is None:
            raise RuntimeError("group_metadata() needs a group_id")
        generation = self.generation()
        if generation is None:
            return ConsumerGroupMetadata(self.config.group_id, group_instance_id=self.config.group_instance_id)
        return ConsumerGroupMetadata(
            self.config.group_id, generation.generation_id, generation.member_id, self.config.group_instance_id
        )

    def remove(self, partitions: list[TopicPartition]) -> None:
        self.fetcher.remove(partitions)
        if self.on_removed is not None:
            self.on_removed(partitions)

    def track(self, task: asyncio.Task[None]) -> None:
        self.commit_tasks.add(task)
        task.add_done_callback(self.commit_tasks.discard)

    async def user_hook(self, hook: str, partitions: list[TopicPartition]) -> None:
        no_wait = self.leaving_for_poll_timeout
        if no_wait and hook == "on_partitions_revoked":
            # Left because poll() was not called: by the time the application
            # sees this the partitions may belong to another member (Java: lost).
            hook = "on_partitions_lost"
        listener = self.listener
        fn = getattr(listener, hook, None) if listener is not None else None
        if fn is None and hook == "on_partitions_lost" and listener is not None:
            fn = getattr(listener, "on_partitions_revoked", None)
        if fn is None:
            return
        parts = sorted(partitions)
        await self.invoke(lambda: fn(parts), not no_wait)

    async def commit_quietly(self, generation: Generation | None, why: str) -> None:
        positions = self.consumed_positions()
        if not positions or self.offsets is None:
            return
        try:
            await self.offsets.commit(positions, generation)
        except Exception as exc:
            log.warning("auto-commit %s failed: %s", why, exc)

    async def _poll_watchdog(self) -> None:
        limit = self.config.max_poll_interval_ms / 1000.0
        while True:
            await asyncio.sleep(min(0.1, limit / 4))
            m = self.membership
            if (
                m is None
                or not self.in_group
                or self.in_poll
                or self.left_for_poll_timeout
                or m.generation is None
                or time.monotonic() - self.last_poll <= limit
            ):
                continue
            log.warning(
                "consumer poll() was not called for %.0f ms (max_poll_interval_ms %d): "
                "leaving group %s; the next poll() rejoins",
                (time.monotonic() - self.last_poll) * 1000,
                self.config.max_poll_interval_ms,
                m.group_id,
            )
            self.left_for_poll_timeout = True
            self.leaving_for_poll_timeout = True
            try:
                await m.leave_group("max_poll_interval_ms passed without a poll()")
            finally:
                self.leaving_for_poll_timeout = False

    # ------------------------------------------------------------ operations

    def subscribe(self, topics: list[str] | TopicPattern, listener: Any) -> None:
        if self.membership is None:
            raise RuntimeError("subscribe() needs a group_id; use assign() without one")
        if not self.in_group and self.pattern is None and self.fetcher.assigned():
            self.fetcher.remove(self.fetcher.assigned())
        self.listener = listener
        if isinstance(topics, TopicPattern) and self.config.group_protocol == "consumer":
            # KIP-848: the broker matches the pattern (RE2 syntax) against its topics and
            # follows topics created or deleted later; no metadata loop here.
            self.stop_pattern()
            regex = topics.regex.pattern
            assert isinstance(self.membership, ConsumerGroupMembership)
            self.membership.subscribe_pattern(regex)
            self.broker_pattern = regex
            self.subscribed = ()
            return
        if isinstance(topics, TopicPattern):
            # The refresh loop subscribes the member once the pattern selects topics.
            self.stop_pattern()
            self.pattern = topics
            self.pattern_task = asyncio.get_running_loop().create_task(
                self._pattern_loop(topics), name=f"pattern-{topics.regex.pattern}"
            )
            return
        self.stop_pattern()
        self.membership.subscribe(topics)
        self.subscribed = tuple(topics)
        self.broker_pattern = None

    def stop_pattern(self) -> None:
        self.pattern = None
        if self.pattern_task is not None:
            self.pattern_task.cancel()
            self.pattern_task = None

    async def _pattern_loop(self, pattern: TopicPattern) -> None:
        """Re-match the pattern on every metadata refresh (``metadata_max_age_ms``)."""
        attempt = 0
        while True:
            try:
                topics = await self.cluster.refresh_metadata(None)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                log.debug("pattern %s: metadata refresh failed: %s", pattern, exc)
                await asyncio.sleep(
                    backoff_s(attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms)
                )
                attempt += 1
                continue
            attempt = 0
            matched = pattern.select_from(topics)
            if matched != self.subscribed:
                await self._apply_pattern(matched)
            await asyncio.sleep(self.config.metadata_max_age_ms / 1000.0)

    async def _apply_pattern(self, matched: tuple[str, ...]) -> None:
        m = self.membership
        assert m is not None
        log.info("pattern subscription now selects %s", list(matched))
        if not matched:
            # Nothing left to consume: leave until a matching topic appears.
            await self._leave_subscription("no topic matches the subscribed pattern")
            return
        m.subscribe(matched)
        self.subscribed = matched
        if not self.closed and m.error is None:
            m.start()

    async def _leave_subscription(self, reason: str) -> None:
        m = self.membership
        if self.in_group and m is not None:
            if self.config.enable_auto_commit:
                await self.commit_quietly(m.generation, "on unsubscribe")
            await m.leave_group(reason)
        self.remove(sorted(self.fetcher.assigned()))
        self.subscribed = ()
        self.broker_pattern = None

    async def unsubscribe(self) -> None:
        self.stop_pattern()
        await self._leave_subscription("the consumer unsubscribed")

    async def assign(self, wanted: set[TopicPartition]) -> None:
        if self.in_group or self.pattern is not None:
            raise RuntimeError("cannot assign() while subscribed; unsubscribe() first")
        current = self.fetcher.assigned()
        self.fetcher.remove(current - wanted)
        new = sorted(wanted - current)
        committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
        if new and self.offsets is not None:
            committed = await self.offsets.fetch_committed(new)
        positions: dict[TopicPartition, int | None] = {}
        for tp in new:
            om = committed.get(tp)
            positions[tp] = om.offset if om is not None else None
        self.fetcher.add(positions)

    async def position(self, tp: TopicPartition, timeout_s: float) -> int:
        async with deadline(timeout_s, f"finding the position of {tp[0]}-{tp[1]}"):
            while True:
                pos = self.fetcher.position(tp)
                if pos is not None:
                    return pos
                await asyncio.sleep(0.01)

    async def committed(
        self, parts: list[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, int | None]:
        got = await self.offsets_client().fetch_committed(parts, timeout_s=timeout_s)
        return {tp: (om.offset if om is not None else None) for tp, om in got.items()}

    async def poll(self, timeout_s: float, max_records: int) -> list[Message]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_s)
        m = self.membership
        if self.in_group and m is not None:
            if self.config.enable_auto_commit and time.monotonic() >= self.next_auto_commit:
                self.next_auto_commit = (
                    time.monotonic() + self.config.auto_commit_interval_ms / 1000.0
                )
                if m.generation is not None and not m.rejoin_needed:
                    # the positions after what earlier polls returned (processed by now)
                    self.commit_in_background(None, None)
            self.left_for_poll_timeout = False
            if m.error is not None:
                raise m.error
            if m.generation is None or m.rejoin_needed:
                with contextlib.suppress(TimeoutError):
                    await m.ensure_active(max(0.0, deadline - loop.time()))
            else:
                m.start()
        fetcher = self.fetcher
        waited = False
        while True:
            # The fetcher decodes straight into Message (its message_type): no re-wrapping.
            drained = fetcher.drain_records(max_records)
            if drained:
                return cast(list[Message], drained)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            if waited:
                # Data was announced but none was deliverable (only control batches, say).
                await asyncio.sleep(0.001)
            if not await fetcher.wait_for_data(max(0.0, deadline - loop.time())):
                return []
            waited = True

    async def commit(
        self, offsets: Mapping[TopicPartition, int] | None, timeout_s: float
    ) -> dict[TopicPartition, int]:
        to_commit = dict(offsets) if offsets is not None else self.consumed_positions()
        await self.offsets_client().commit(to_commit, self.generation(), timeout_s=timeout_s)
        return to_commit

    def commit_in_background(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        on_done: Callable[[dict[TopicPartition, int], BaseException | None], None] | None,
    ) -> None:
        """Start a commit (in order after earlier ones); ``on_done`` is called on the loop."""
        client = self.offsets_client()
        to_commit = dict(offsets) if offsets is not None else self.consumed_positions()
        task = asyncio.get_running_loop().create_task(client.commit(to_commit, self.generation()))

        def done(t: asyncio.Task[None]) -> None:
            exc = None if t.cancelled() else t.exception()
            if exc is not None:
                log.info("asynchronous commit failed: %s", exc)
            if on_done is not None:
                on_done(to_commit, exc)

        task.add_done_callback(done)
        self.track(task)

    async def close(self, timeout_s: float) -> None:
        if self.closed:
            return
        self.closed = True
        self.watchdog.cancel()
        self.stop_pattern()
        m = self.membership
        try:
            async with asyncio.timeout(timeout_s):
                if m is not None and self.in_group:
                    if self.config.enable_auto_commit:
                        await self.commit_quietly(m.generation, "on close")
                    await m.close(leave=True)
                elif self.config.enable_auto_commit and self.offsets is not None:
                    await self.commit_quietly(None, "on close")
                if self.commit_tasks:  # pending asynchronous commits finish first
                    await asyncio.wait(list(self.commit_tasks))
        finally:
            with contextlib.suppress(asyncio.CancelledError):
                await self.watchdog
            await self.fetcher.close()
            if self.locator is not None:
                await self.locator.close()
            await self.cluster.close()


# ---------------------------------------------------------------------------- thread facade


class _Wake:
    pass


class _WakeupCall:
    """Queued by ``Consumer.wakeup()`` to interrupt a blocked poll."""


# How long poll waits for a read-ahead in progress before asking the network loop.
_READ_AHEAD_WAIT_S = 0.05
# Polls' worth of records the network thread reads ahead (see the module docstring).
_READ_AHEAD_POLLS = 4


_WAKE = _Wake()
_WAKEUP = _WakeupCall()


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class Consumer:
    """A Kafka consumer for blocking code; see the module docstring.

    ``Consumer(bootstrap_servers, group_id="g", **config)`` takes any
    :class:`ConsumerConfig` field as a keyword. Use it from one thread.
    """

    def __init__(
        self, bootstrap_servers: str | list[str], *, group_id: str | None = None, **config: Any
    ) -> None:
        self.config = config_from(bootstrap_servers, group_id, config)
        self._owner: int | None = None
        self._depth = 0
        self._guard = threading.Lock()
        self._closed = False
        self._events: queue.SimpleQueue[Callable[[], Any] | _Wake | _WakeupCall] = queue.SimpleQueue()
        self._commit_callbacks: collections.deque[Callable[[], None]] = collections.deque()
        self._listener_error: BaseException | None = None
        # Read-ahead: the next polls' records (in drain order), drained on the network
        # thread so polls can take them without a round trip (see poll()).
        self._ready: list[Message] = []
        self._ready_lock = threading.Lock()
        self._refill_pending = False
        self._refilled = threading.Event()
        """Set when no read-ahead is being made (the last refill finished)."""
        self._refilled.set()
        self._wakeup = threading.Event()
        """Set by wakeup(): the blocked (or next) poll raises WakeupError."""
        self._poll_task: asyncio.Task[list[Message]] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=logs.run_as(self.config.client_id, self._loop.run_forever),
            name=f"slipstream-consumer-{self.config.client_id}",
            daemon=True,
        )
        self._thread.start()
        try:
            self._core = self._submit(self._setup()).result(timeout=10)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            raise

    async def _setup(self) -> ConsumerCore:
        core = ConsumerCore(self.config, self._invoke)
        core.consumed_positions = self._consumed_positions
        core.on_removed = self._on_removed
        return core

    # ------------------------------------------------------------ read-ahead

    def _read_ahead_ok(self, core: ConsumerCore) -> bool:
        """Whether records may be read ahead / handed out without the network loop's
        poll logic: always without a group; with one only while the membership is
        stable (no rebalance, error or left group: those go through ``core.poll``)."""
        if not core.in_group and core.pattern is None:
            return True
        m = core.membership
        return not (
            m is None
            or core.rebalancing
            or core.left_for_poll_timeout
            or m.error is not None
            or m.generation is None
            or m.rejoin_needed
        )

    def _take_ready(self, core: ConsumerCore) -> list[Message] | None:
        """On the application thread: the read-ahead, if it may be handed out now."""
        if not self._ready or not self._read_ahead_ok(core):
            return None
        if (
            self.config.enable_auto_commit
            and core.in_group
            and time.monotonic() >= core.next_auto_commit
        ):
            return None  # the auto-commit is due: core.poll does it
        limit = self.config.max_poll_records
        with self._ready_lock:
            ready = self._ready
            if len(ready) <= limit:
                msgs, self._ready = ready, []
            else:
                msgs, self._ready = ready[:limit], ready[limit:]
            left = len(self._ready)
        if left < limit * (_READ_AHEAD_POLLS // 2):
            # Top up while the application works through what is left.
            self._schedule_refill()
        return msgs or None

    def _schedule_refill(self) -> None:
        if not self._refill_pending:
            self._refill_pending = True
            self._refilled.clear()
            self._loop.call_soon_threadsafe(self._refill)

    def _refill(self) -> None:
        """On the network loop: drain the next poll's records while the application works."""
        try:
            core = self._core
            if core.closed or not self._read_ahead_ok(core):
                return
            fetcher = core.fetcher
            limit = self.config.max_poll_records
            want = _READ_AHEAD_POLLS * limit - len(self._ready)
            drained: list[MessageFields] = []
            released = 0
            cap = self.config.max_partition_fetch_bytes
            # One drain per poll's worth, as polls would (same partition rotation). Past
            # the first, only while the batches used up (their bytes leave the fetcher's
            # buffer, which may then fetch more) stay under the cap: bounded memory.
            while want >= limit and (not drained or released < cap):
                if fetcher.has_error():
                    break  # errors are raised by a later poll's own drain
                before = fetcher.buffered_bytes()
                got = fetcher.drain_records(limit)
                if not got:
                    break
                released += before - fetcher.buffered_bytes()
                drained += got
                want -= len(got)
            # Not pending any more before publishing: a poll that takes these schedules
            # the next read-ahead.
            self._refill_pending = False
            if drained:
                fresh = cast(list[Message], drained)
                with self._ready_lock:
                    ready = self._ready
                    # The application may have taken some meanwhile: append behind the rest.
                    self._ready = ready + fresh if ready else fresh
        finally:
            self._refill_pending = False
            self._refilled.set()

    def _unread(self) -> None:
        """On the network loop: give the read-ahead back to the fetcher (positions move
        back to it), so nothing else ever sees a read-ahead record as consumed."""
        with self._ready_lock:
            ready, self._ready = self._ready, []
        if ready:
            self._core.fetcher.unread(ready)

    def _consumed_positions(self) -> dict[TopicPartition, int]:
        self._unread()
        return self._core.fetcher.positions()

    def _on_removed(self, _partitions: list[TopicPartition]) -> None:
        self._unread()  # records of removed partitions are dropped

    async def _unread_then(self, coro: Coroutine[Any, Any, T]) -> T:
        self._unread()
        return await coro

    async def _poll_on_loop(self, core: ConsumerCore, timeout_s: float) -> list[Message]:
        if self._wakeup.is_set():
            raise WakeupError("poll was woken up by wakeup()")
        # A task of its own, so wakeup() can cancel the wait (and only the wait: records
        # leave the fetcher in the step that returns them, with no await after it).
        task = asyncio.get_running_loop().create_task(core.poll(timeout_s, self.config.max_poll_records))
        self._poll_task = task
        try:
            msgs = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and self._wakeup.is_set() and not (current and current.cancelling()):
                raise WakeupError("poll was woken up by wakeup()") from None
            raise
        finally:
            self._poll_task = None
        if msgs and not self._refill_pending:
            # After the result is handed over: read the next poll's records ahead.
            self._refill_pending = True
            self._refilled.clear()
            asyncio.get_running_loop().call_soon(self._refill)
        return msgs

    async def _invoke(self, fn: Callable[[], Any], wait: bool) -> None:
        """On the network loop: run ``fn`` on the application thread (and wait for it)."""
        if not wait:
            self._events.put(fn)
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                fn()
            finally:
                loop.call_soon_threadsafe(_finish, done)

        self._events.put(run)
        await done

    # ------------------------------------------------------------ thread plumbing

    def _acquire(self) -> None:
        me = threading.get_ident()
        with self._guard:
            if self._owner is not None and self._owner != me:
                raise ConcurrentModificationError(
                    "the consumer is not safe for multi-threaded access: another thread is "
                    "using it right now (use one consumer per thread)"
                )
            self._owner = me
            self._depth += 1

    def _release(self) -> None:
        with self._guard:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None

    @contextlib.contextmanager
    def _use(self) -> Iterator[ConsumerCore]:
        self._acquire()
        try:
            if self._closed:
                raise RuntimeError("the consumer is closed")
            yield self._core
        finally:
            self._release()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the network loop; run listener callbacks while waiting.

        The read-ahead is given back to the fetcher first: every operation then sees
        exactly the positions of what poll returned.
        """
        fut = self._submit(self._unread_then(coro))
        fut.add_done_callback(lambda _f: self._events.put(_WAKE))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s + 5.0
        while not fut.done():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                fut.cancel()
                raise TimeoutError("the consumer's network thread did not answer in time")
            try:
                item = self._events.get(timeout=remaining)
            except queue.Empty:
                continue
            self._run_event(item)
        return fut.result()

    def _do(self, fn: Callable[[], T]) -> T:
        async def go() -> T:
            return fn()

        return self._call(go())

    def _run_event(self, item: Callable[[], Any] | _Wake | _WakeupCall) -> None:
        if isinstance(item, (_Wake, _WakeupCall)):
            return
        try:
            item()
        except Exception as exc:  # surfaced from poll()
            log.exception("consumer rebalance listener failed")
            if self._listener_error is None:
                self._listener_error = exc

    def _run_pending(self, *, commit_callbacks: bool) -> None:
        while True:
            try:
                item = self._events.get_nowait()
            except queue.Empty:
                break
            self._run_event(item)
        while commit_callbacks and self._commit_callbacks:
            cb = self._commit_callbacks.popleft()
            try:
                cb()
            except Exception:
                log.exception("commit_async callback failed")
        err, self._listener_error = self._listener_error, None
        if err is not None:
            raise err

    # ------------------------------------------------------------ subscription

    def subscribe(
        self, topics: Iterable[str] | re.Pattern[str], listener: Any = None
    ) -> None:
        """Join the group (at the next poll) for ``topics``; ``listener`` gets rebalance callbacks.

        ``topics`` may be a compiled regular expression: the consumer then subscribes
        to every non-internal topic whose whole name matches, re-checked on each
        metadata refresh (``metadata_max_age_ms``), so matching topics created later
        are picked up with a rebalance. With ``group_protocol="consumer"`` the broker
        evaluates the pattern instead (RE2 syntax, whole names) and follows new topics
        itself; ``subscription()`` is then empty.
        """
        if isinstance(topics, re.Pattern):
            pattern = TopicPattern(topics)
            with self._use() as core:
                self._do(lambda: core.subscribe(pattern, listener))
            return
        names = list(topics)
        if not names:
            self.unsubscribe()
            return
        with self._use() as core:
            self._do(lambda: core.subscribe(names, listener))

    def unsubscribe(self) -> None:
        """Leave the group (committing first with auto-commit) or drop a manual assignment."""
        with self._use() as core:
            self._call(core.unsubscribe())
            self._run_pending(commit_callbacks=False)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume ``partitions`` without a group (from committed offsets if a group_id is set)."""
        wanted = {(t, int(p)) for t, p in partitions}
        with self._use() as core:
            self._call(core.assign(wanted))

    def assignment(self) -> set[TopicPartition]:
        with self._use() as core:
            return self._do(core.fetcher.assigned)

    def subscription(self) -> tuple[str, ...]:
        return self._core.subscribed

    # ------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._use() as core:
            self._do(lambda: core.fetcher.seek(tp, offset))

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        with self._use() as core:
            self._do(lambda: core.fetcher.seek_to_beginning(parts))

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        with self._use() as core:
            self._do(lambda: core.fetcher.seek_to_end(parts))

    def position(self, tp: TopicPartition, timeout_s: float = 30.0) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (waits for an offset reset)."""
        with self._use() as core:
            return self._call(core.position(tp, timeout_s), timeout_s)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation, for ``Producer.send_offsets_to_transaction``."""
        with self._use() as core:
            return core.group_metadata()

    def committed(
        self, partitions: Iterable[TopicPartition], timeout_s: float = 30.0
    ) -> dict[TopicPartition, int | None]:
        parts = list(partitions)
        with self._use() as core:
            return self._call(core.committed(parts, timeout_s), timeout_s)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning (and fetching) ``partitions``; what is buffered is kept."""
        parts = list(partitions)
        with self._use() as core:
            self._do(lambda: core.fetcher.pause(parts))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        with self._use() as core:
            self._do(lambda: core.fetcher.resume(parts))

    def paused(self) -> set[TopicPartition]:
        with self._use() as core:
            return self._do(core.fetcher.paused)

    # ------------------------------------------------------------ poll and commits

    def poll(self, timeout_s: float = 1.0) -> list[Message]:
        """At most ``max_poll_records`` messages; [] if none arrived within ``timeout_s``.

        Raises WakeupError if ``wakeup()`` was called while it waited (or before it).
        Messages come deserialized when key/value deserializers are configured.
        """
        with self._use() as core:
            core.last_poll = time.monotonic()
            core.in_poll = True
            try:
                self._check_wakeup()
                self._run_pending(commit_callbacks=True)
                msgs = self._take_ready(core)
                if msgs is None and self._refill_pending and timeout_s > 0:
                    # A read-ahead is being made (about one poll's decoding): waiting
                    # for it is cheaper than a round trip through the network loop.
                    self._refilled.wait(min(timeout_s, _READ_AHEAD_WAIT_S))
                    msgs = self._take_ready(core)
                if msgs is None:
                    try:
                        msgs = self._call(self._poll_on_loop(core, timeout_s), timeout_s)
                    except WakeupError:
                        self._wakeup.clear()
                        raise
                self._run_pending(commit_callbacks=True)
                msgs = core.hand_out(msgs)
                self._report_statistics(core)
                return msgs
            finally:
                core.last_poll = time.monotonic()
                core.in_poll = False

    def wakeup(self) -> None:
        """Interrupt a blocked ``poll`` from any thread: it raises WakeupError in the
        polling thread. With no poll blocked, the next poll raises it at once."""
        self._wakeup.set()
        self._events.put(_WAKEUP)  # ends a wait for a read-ahead or a listener callback
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to interrupt
            self._loop.call_soon_threadsafe(self._interrupt_poll)

    def _interrupt_poll(self) -> None:
        """On the network loop: cancel the poll's wait, if it is still waiting."""
        task = self._poll_task
        if task is not None and not task.done():
            task.cancel()

    def _check_wakeup(self) -> None:
        if self._wakeup.is_set():
            self._wakeup.clear()
            raise WakeupError("poll was woken up by wakeup()")

    def statistics(self) -> ConsumerStatistics:
        """Per-partition position, high watermark and lag; fetch rate; rebalance count."""
        with self._use() as core:
            return self._do(core.statistics)

    def _report_statistics(self, core: ConsumerCore) -> None:
        callback = self.config.statistics_callback
        if callback is not None and core.stats.report_due(time.monotonic()):
            callback(self._do(core.statistics))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float = 30.0
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset with a record timestamp at or after the time
        given (ms since the epoch), or None when no record is that recent. Feed the
        result to ``seek`` to start reading at a point in time."""
        wanted = dict(timestamps)
        with self._use() as core:
            return self._call(core.offsets_for_times(wanted, timeout_s), timeout_s)

    def commit_sync(
        self, offsets: Mapping[TopicPartition, int] | None = None, timeout_s: float = 30.0
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (default: the positions after what poll returned); returns them."""
        with self._use() as core:
            core.offsets_client()
            self._run_pending(commit_callbacks=True)
            result = self._call(core.commit(offsets, timeout_s), timeout_s)
            self._run_pending(commit_callbacks=True)
            return result

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit without waiting. Commits complete in call order; ``callback(offsets, error)``
        runs on this thread during a later ``poll`` / ``commit_sync`` / ``close``."""
        with self._use() as core:
            core.offsets_client()
            fixed = dict(offsets) if offsets is not None else None
            on_done = None
            if callback is not None:
                cb = callback

                def on_done(o: dict[TopicPartition, int], e: BaseException | None) -> None:
                    self._commit_callbacks.append(lambda: cb(o, e))

            self._loop.call_soon_threadsafe(core.commit_in_background, fixed, on_done)

    # ------------------------------------------------------------ close

    def close(self, timeout_s: float = 30.0) -> None:
        """Commit (with auto-commit), run the revoke callback, leave the group, stop the thread."""
        if self._closed:
            return
        with self._use() as core:
            try:
                self._call(core.close(timeout_s), timeout_s)
                self._run_pending(commit_callbacks=True)
            finally:
                self._closed = True
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=5)
                if not self._thread.is_alive():
                    self._loop.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
