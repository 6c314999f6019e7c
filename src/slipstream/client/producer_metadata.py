"""The producer's metadata: one shared refresh for every topic in use, the background
refresh the sender asks for, and ``send``'s wait for a topic that is not known yet."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .cluster import Cluster
from .retry import Backoff

log = logging.getLogger("slipstream.client.producer")


def monotonic_ms() -> float:
    return time.monotonic() * 1000


class ProducerMetadata:
    """Which topics the producer uses and when their metadata was last refreshed.

    ``wanted`` is set by whoever saw a sign of stale metadata (a lost connection, a
    retriable error); ``poll`` starts a refresh when it is wanted, when a batch has no
    leader, or when the metadata is older than ``max_age_ms``.
    """

    def __init__(
        self,
        cluster: Cluster,
        backoff: Backoff,
        *,
        max_age_ms: float,
        max_block_ms: float,
        topic_propagation_ms: float,
        wake: Callable[[], None],
        spawn: Callable[[Coroutine[Any, Any, Any]], Any],
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``clock`` (seconds; default: the running loop's) and ``sleep`` are for tests."""
        self.cluster = cluster
        self.backoff = backoff
        self.max_age_ms = max_age_ms
        self.max_block_ms = max_block_ms
        self.topic_propagation_ms = topic_propagation_ms
        self._wake = wake
        self._spawn = spawn
        self._clock = clock
        self._sleep = sleep
        self.topics: set[str] = set()
        self.task: asyncio.Task[Any] | None = None
        self._task_topics: frozenset[str] = frozenset()
        self.refreshed_at = 0.0
        self._retry_at = 0.0
        self._failures = 0
        self.wanted = False
        self._topic_errors: dict[str, int] = {}

    def leader_of(self, topic: str, partition: int) -> int:
        info = self.cluster.topics.get(topic)
        if info is None:
            return -1
        return info.leaders.get(partition, -1)

    async def refresh(self, extra: str | None = None) -> None:
        """One shared metadata refresh for every topic in use (plus ``extra``)."""
        if extra is not None:
            self.topics.add(extra)
        task = self.task
        if task is not None and not task.done() and (extra is None or extra in self._task_topics):
            await asyncio.shield(task)
            return
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
        topics = frozenset(self.topics)
        self._task_topics = topics
        task = asyncio.get_running_loop().create_task(self._fetch(topics))
        self.task = task
        try:
            await asyncio.shield(task)
            self.refreshed_at = monotonic_ms()
            self._failures = 0
        finally:
            self._wake()

    async def _fetch(self, topics: frozenset[str]) -> None:
        result = await self.cluster.refresh_metadata(sorted(topics), allow_auto_create=True)
        # Cluster drops topics with errors from its cache; keep their codes for send().
        for name, info in result.items():
            if info.error_code:
                self._topic_errors[name] = info.error_code
            else:
                self._topic_errors.pop(name, None)

    def _last_topic_error(self, topic: str) -> int:
        return self._topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    async def wait_for_topic(self, topic: str, partition: int | None, deadline: float) -> None:
        """Refresh metadata until ``topic`` (and ``partition``) is known, with backoff.
        ``deadline`` is on ``clock`` (the loop's).

        A topic the brokers keep reporting as unknown for topic_metadata_propagation_max_ms
        fails with UNKNOWN_TOPIC_OR_PARTITION; other retriable trouble waits until max_block_ms.
        """
        clock = self._clock or asyncio.get_running_loop().time
        first_unknown: float | None = None
        attempt = 0
        last = ""
        refreshed = False
        while True:
            info = self.cluster.topics.get(topic)
            if info is not None and info.leaders:
                if partition is None or partition in info.leaders:
                    return
                if refreshed:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {topic!r} has {len(info.leaders)} partitions; "
                        f"partition {partition} does not exist",
                    )
            code = 0
            try:
                await self.refresh(topic)
                refreshed = True
            except (ConnectionError, OSError) as exc:
                last = str(exc)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last = str(exc)
            else:
                info = self.cluster.topics.get(topic)
                if info is not None and info.leaders:
                    continue
                code = self._last_topic_error(topic)
                last = error_name(code) if code else "the topic has no partitions yet"
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                now = clock()
                first_unknown = now if first_unknown is None else first_unknown
                if (now - first_unknown) * 1000 >= self.topic_propagation_ms:
                    raise KafkaError(
                        code, f"topic {topic!r} does not exist (and the broker did not create it)"
                    )
            elif code and not is_retriable(code):
                raise KafkaError(code, f"cannot produce to topic {topic!r}: {error_name(code)}")
            if clock() >= deadline:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"topic {topic!r} not present in metadata after {self.max_block_ms:.0f} ms ({last})",
                )
            await self._sleep(min(self.backoff.delay_s(attempt), max(0.0, deadline - clock())))
            attempt += 1

    def poll(self, now: float, leaderless: bool) -> float:
        """The sender's turn: start a refresh if one is due; returns when to look again."""
        if leaderless or self.wanted or (self.topics and now - self.refreshed_at >= self.max_age_ms):
            return self._background(now)
        if self.topics:
            return self.refreshed_at + self.max_age_ms
        return float("inf")

    def _background(self, now: float) -> float:
        """Start a refresh when wanted and not backing off; returns when to look again."""
        task = self.task
        if task is not None and not task.done():
            return float("inf")  # its completion wakes the sender
        if now < self._retry_at:
            return self._retry_at
        self.wanted = False
        self._spawn(self._refresh_in_background())
        return float("inf")

    async def _refresh_in_background(self) -> None:
        try:
            await self.refresh()
        except Exception as exc:
            self._failures += 1
            delay = self.backoff.delay_ms(self._failures - 1)
            self._retry_at = monotonic_ms() + delay
            log.debug("metadata refresh failed (retrying in %.0f ms): %s", delay, exc)
        else:
            self._retry_at = monotonic_ms() + self.backoff.initial_ms
