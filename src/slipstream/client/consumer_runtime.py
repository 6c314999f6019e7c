"""The poll consumers' asyncio runtime: their state and logic on one event loop.

:class:`ConsumerRuntime` is shared by the thread facade :class:`~.consumer.Consumer`
(on its network thread's loop) and :class:`~.aio_consumer.AIOConsumer` (on the
caller's loop). It owns the clients (:class:`~.consumer_clients.ConsumerClients`),
the subscription (topics, or a pattern matched here or by the broker), commits,
auto-commit and the ``max_poll_interval_ms`` watchdog (their timing:
:mod:`.consumer_poll_timers`). The membership awaits the rebalance hooks here; the
user's listener callbacks go through the facade's ``invoke``.

``poll``: auto-commit what earlier polls returned when due, make sure the membership
is active (joining or rejoining, within the timeout), then drain at most
``max_records`` buffered records; positions advance as records are handed out, so a
commit without offsets commits "everything poll returned". Before a rebalance,
auto-commit first waits until the application is back in the consumer (a barrier
through ``invoke``), so it never commits records still being processed. The watchdog
leaves the group when the application stays out of poll too long; the owned
partitions are then reported *lost*, and the next poll rejoins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..protocol.errors import KafkaError
from .assignors import TopicPartition
from .connection import ConnectionClosed
from .consumer_clients import ConsumerClients
from .consumer_config import ConsumerConfig
from .consumer_membership import ConsumerGroupMembership
from .consumer_messages import Message
from .consumer_poll_timers import AutoCommitSchedule, PollInterval
from .membership_factory import AnyMembership
from .membership_types import Generation
from .offsets import GroupOffsets, OffsetAndMetadata
from .rebalance_listener import RebalanceListener
from .serde import RecordDeserializers
from .statistics import ConsumerStatistics, StatisticsTracker
from .subscription import TopicPattern
from .tasks import deadline
from .transactions import ConsumerGroupMetadata

log = logging.getLogger(__name__)

__all__ = ["ConsumerRebalanceListener", "ConsumerRuntime", "UserCall"]


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


UserCall = Callable[[Callable[[], Any], bool], Awaitable[None]]
"""How the runtime runs a user callback: ``await invoke(fn, wait)``; ``wait=False``: don't block on it."""


def _nothing() -> None:
    return None


class _RebalanceHooks(RebalanceListener):
    """The membership's hooks, awaited on the runtime's loop."""

    def __init__(self, runtime: ConsumerRuntime) -> None:
        self.runtime = runtime

    async def on_join_prepare(self, generation: Generation | None) -> None:
        # Until the new assignment is in place the thread facade returns nothing
        # from its read-ahead without asking this loop (see Consumer.poll).
        self.runtime.rebalancing = True
        if self.runtime.config.enable_auto_commit and generation is not None:
            # Barrier: wait until the application is back in the consumer (it has
            # handled what the last poll returned), then commit those positions.
            await self.runtime.invoke(_nothing, True)
            await self.runtime.commit_quietly(generation, "before rejoining")

    async def on_revoke_prepare(self, revoked: list[TopicPartition]) -> None:
        """Consumer protocol, before a revocation: hand out nothing more of the revoked
        partitions, then (auto-commit) commit what the application has processed."""
        self.runtime.rebalancing = True
        self.runtime.fetcher.pause(revoked)
        m = self.runtime.membership
        await self.on_join_prepare(m.generation if m is not None else None)

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.runtime.rebalancing = True
        await self.runtime.user_hook("on_partitions_revoked", revoked)
        self.runtime.remove(revoked)

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.runtime.rebalancing = True
        await self.runtime.user_hook("on_partitions_lost", lost)
        self.runtime.remove(lost)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        runtime = self.runtime
        if assigned:
            try:
                committed = await runtime.offsets_client().fetch_committed(assigned)
            except Exception as exc:
                # Without positions the partitions can't be fetched: rejoin rather than stall.
                log.warning("could not read the committed offsets of %s: %s", assigned, exc)
                if runtime.membership is not None:
                    runtime.membership.request_rejoin("committed offsets could not be read")
                raise
            runtime.fetcher.add({tp: (om.offset if om else None) for tp, om in committed.items()})
        await runtime.user_hook("on_partitions_assigned", assigned)
        runtime.rebalancing = False
        runtime.stats.rebalanced()


class ConsumerRuntime:
    """A poll consumer's state and logic on one event loop (the asyncio side).

    Every method must run on that loop. ``invoke`` runs the user's rebalance
    listener callbacks (the thread facade ships them to the application thread);
    ``clock`` is the monotonic time the timers are fed.
    """

    def __init__(
        self, config: ConsumerConfig, invoke: UserCall, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.invoke = invoke
        self.clock = clock
        self.listener: Any = None
        self.subscribed: tuple[str, ...] = ()
        """The topics the member subscribes to (with a pattern: what it currently selects)."""
        self.pattern: TopicPattern | None = None
        self.pattern_task: asyncio.Task[None] | None = None
        self.broker_pattern: str | None = None
        """group_protocol="consumer": the subscribed regular expression, evaluated by the broker."""
        now = clock()
        self.poll_interval = PollInterval(config.max_poll_interval_ms, now)
        """The facades call ``enter``/``exit`` around each poll; the watchdog reads it."""
        self.left_for_poll_timeout = False
        self.leaving_for_poll_timeout = False
        self.auto_commit = AutoCommitSchedule(config.auto_commit_interval_ms, now)
        self.clients = clients = ConsumerClients.build(config, listener=_RebalanceHooks(self))
        self.cluster = clients.cluster
        self.fetcher = clients.fetcher
        self.membership: AnyMembership | None = None
        self.offsets: GroupOffsets | None = None
        if clients.group is not None:
            self.membership = clients.group.membership
            self.offsets = clients.group.offsets
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
            config.client_id, config.group_id, now, config.statistics_interval_ms / 1000.0
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
        return self.stats.snapshot(self.clock(), fetcher.assigned(), fetcher.position, fetcher.highwater)

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
        interval = self.poll_interval
        while True:
            await asyncio.sleep(interval.check_every_s)
            m = self.membership
            if (
                m is None
                or not self.in_group
                or self.left_for_poll_timeout
                or m.generation is None
                or not interval.exceeded(self.clock())
            ):
                continue
            log.warning(
                "consumer poll() was not called for %.0f ms (max_poll_interval_ms %d): "
                "leaving group %s; the next poll() rejoins",
                interval.idle_s(self.clock()) * 1000,
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
                await asyncio.sleep(self.config.retry_backoff().delay_s(attempt))
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
            # take() restarts the interval even when no commit can go out now.
            due = self.config.enable_auto_commit and self.auto_commit.take(self.clock())
            if due and m.generation is not None and not m.rejoin_needed:
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
            # The fetcher decodes straight into Message: no re-wrapping.
            drained = fetcher.drain_records(max_records)
            if drained:
                return drained
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
            await self.clients.close()
