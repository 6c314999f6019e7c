"""The asyncio-native poll consumer: the same runtime as :class:`~.consumer.Consumer`, on your loop.

::

    async with AIOConsumer("localhost:9092", group_id="g", auto_offset_reset="earliest") as c:
        c.subscribe(["orders"])
        async for msg in c:
            handle(msg)
            # enable_auto_commit (default) commits what the loop has finished with;
            # or: await c.commit()

There is no background thread: membership, heartbeats and fetching are tasks on
the running loop, and rebalance listener callbacks (plain functions or
coroutines) are called on it directly. ``max_poll_interval_ms`` counts the time
between ``getmany`` calls (``async for`` calls it whenever its local batch is
used up), so a body that blocks the loop or takes longer than that per batch
makes the member leave the group; the next iteration rejoins.

Positions: ``async for`` takes a batch of up to ``max_poll_records`` at a time
and yields it one message at a time; :meth:`AIOConsumer.commit` without offsets
commits only what has been yielded (not the rest of the batch).
"""

from __future__ import annotations

import collections
import inspect
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import logs
from .assignors import TopicPartition
from .consumer_config import consumer_config_from
from .consumer_messages import Message
from .consumer_runtime import ConsumerRuntime
from .statistics import ConsumerStatistics
from .subscription import TopicPattern
from .transactions import ConsumerGroupMetadata

__all__ = ["AIOConsumer"]


class AIOConsumer:
    """``AIOConsumer(bootstrap_servers, group_id=None, **config)``; any ConsumerConfig field."""

    def __init__(
        self, bootstrap_servers: str | list[str], *, group_id: str | None = None, **config: Any
    ) -> None:
        self.config = consumer_config_from(bootstrap_servers, group_id, config)
        self._runtime: ConsumerRuntime | None = None
        self._batch: collections.deque[Message] = collections.deque()
        self._closed = False

    async def start(self) -> AIOConsumer:
        logs.bind(self.config.client_id)  # tasks made from here on log under this client's id
        if self._runtime is None:
            runtime = ConsumerRuntime(self.config, self._invoke)
            runtime.consumed_positions = self._consumed
            runtime.on_removed = self._drop_batch
            self._runtime = runtime
        return self

    async def __aenter__(self) -> AIOConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def runtime(self) -> ConsumerRuntime:
        if self._closed:
            raise RuntimeError("the consumer is closed")
        if self._runtime is None:
            raise RuntimeError("start the consumer first (async with AIOConsumer(...) as c)")
        return self._runtime

    @staticmethod
    async def _invoke(fn: Callable[[], Any], wait: bool) -> None:
        result = fn()
        if inspect.isawaitable(result):
            await result

    # ------------------------------------------------------------ subscription

    def subscribe(
        self, topics: Iterable[str] | re.Pattern[str], listener: Any = None
    ) -> None:
        """Join the group for ``topics`` at the next ``getmany``; listener methods may be async.

        A compiled regular expression subscribes to the non-internal topics whose
        whole name matches, re-checked on each metadata refresh (see ``Consumer``).
        """
        if isinstance(topics, re.Pattern):
            self.runtime.subscribe(TopicPattern(topics), listener)
            return
        names = list(topics)
        if not names:
            raise ValueError("subscribe to at least one topic (to stop: unsubscribe())")
        self.runtime.subscribe(names, listener)

    async def unsubscribe(self) -> None:
        self._batch.clear()
        await self.runtime.unsubscribe()

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        await self.runtime.assign({(t, int(p)) for t, p in partitions})

    def assignment(self) -> set[TopicPartition]:
        return self.runtime.fetcher.assigned()

    # ------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._drop_batch([tp])
        self.runtime.fetcher.seek(tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        self._drop_batch(parts)
        self.runtime.fetcher.seek_to_beginning(parts)

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        self._drop_batch(parts)
        self.runtime.fetcher.seek_to_end(parts)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float = 30.0
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset with a record timestamp at or after the time
        given (ms), or None when no record is that recent (see Consumer.offsets_for_times)."""
        return await self.runtime.offsets_for_times(dict(timestamps), timeout_s)

    def statistics(self) -> ConsumerStatistics:
        """Per-partition position, high watermark and lag; fetch rate; rebalance count."""
        return self.runtime.statistics()

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.runtime.fetcher.pause(list(partitions))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.runtime.fetcher.resume(list(partitions))

    def paused(self) -> set[TopicPartition]:
        return self.runtime.fetcher.paused()

    async def position(self, tp: TopicPartition, timeout_s: float = 30.0) -> int:
        first = next((m.offset for m in self._batch if (m.topic, m.partition) == tp), None)
        if first is not None:
            return first
        return await self.runtime.position(tp, timeout_s)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation, for ``AIOProducer.send_offsets_to_transaction``."""
        return self.runtime.group_metadata()

    async def committed(
        self, partitions: Iterable[TopicPartition], timeout_s: float = 30.0
    ) -> dict[TopicPartition, int | None]:
        return await self.runtime.committed(list(partitions), timeout_s)

    def _drop_batch(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        self._batch = collections.deque(
            m for m in self._batch if (m.topic, m.partition) not in gone
        )

    def _consumed(self) -> dict[TopicPartition, int]:
        """Positions after what was handed out (not counting the undelivered batch)."""
        assert self._runtime is not None
        positions = self._runtime.fetcher.positions()
        for m in self._batch:
            tp = (m.topic, m.partition)
            if tp in positions and m.offset < positions[tp]:
                positions[tp] = m.offset
        return positions

    # ------------------------------------------------------------ consuming

    async def getmany(
        self, timeout_s: float = 1.0, max_records: int | None = None
    ) -> list[Message]:
        """Up to ``max_records`` (default ``max_poll_records``) messages; [] after ``timeout_s``."""
        runtime = self.runtime
        limit = max_records or self.config.max_poll_records
        if self._batch:
            out = [self._batch.popleft() for _ in range(min(limit, len(self._batch)))]
            return out
        logs.bind(self.config.client_id)  # joining starts tasks from this call
        runtime.poll_interval.enter(runtime.clock())
        try:
            msgs = runtime.hand_out(await runtime.poll(timeout_s, limit))
        finally:
            runtime.poll_interval.exit(runtime.clock())
        callback = self.config.statistics_callback
        if callback is not None and runtime.stats.report_due(time.monotonic()):
            callback(runtime.statistics())
        return msgs

    async def getone(self, timeout_s: float | None = None) -> Message:
        """The next message (waits; TimeoutError after ``timeout_s`` if given)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._batch:
            wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            self._batch.extend(await self.getmany(wait))
            if not self._batch and deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("no message arrived in time")
        return self._batch.popleft()

    def __aiter__(self) -> AIOConsumer:
        return self

    async def __anext__(self) -> Message:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._batch:
                return self._batch.popleft()
            self._batch.extend(await self.getmany(1.0))

    # ------------------------------------------------------------ commits and close

    async def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, timeout_s: float = 30.0
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (default: after every message handed out); returns what was committed."""
        return await self.runtime.commit(offsets, timeout_s)

    async def close(self, timeout_s: float = 30.0) -> None:
        """Commit (with auto-commit), run the revoke callback, leave the group."""
        if self._closed or self._runtime is None:
            self._closed = True
            return
        self._closed = True
        logs.bind(self.config.client_id)  # the LeaveGroup and final commit log as this client
        await self._runtime.close(timeout_s)  # commits self._consumed() with auto-commit
        self._batch.clear()
