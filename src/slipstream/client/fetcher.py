"""Fetch multiplexing: one asyncio loop and connection per broker leading assigned partitions.

The loops send the Fetch requests that :class:`~.fetch_core.FetchCore` builds and hand
its answers' decisions on (offset resets, metadata refreshes); consumers wait here for
data. See docs/architecture/fetcher.md. Call every method on the fetcher's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

# Every fetched batch's CRC is checked (check_crcs): load the crc32c package with the
# client, not in the middle of the first fetch (its import reads package metadata, tens
# of ms; protocol.record_batch imports it lazily for the broker's start-up).
import crc32c  # noqa: F401

from ..protocol.apis.fetch import SPEC as FETCH
from ..protocol.apis.fetch import FetchResponse
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from .assignors import TopicPartition
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .consumer_messages import Message
from .dedicated_connections import DedicatedConnections
from .fetch_core import (
    FIRST_FETCH_VERSION,
    FetchCore,
    FetchError,
    OffsetOutOfRangeError,
    PartitionState,
    Sent,
    complete_batches,
    is_fetchable,
)
from .offsets import reset_offsets
from .retry import Backoff
from .tasks import cancel_and_wait

__all__ = [
    "FetchError",
    "Fetcher",
    "OffsetOutOfRangeError",
    "PartitionState",
    "complete_batches",
    "is_fetchable",
]

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class Fetcher:
    """Fetches the assigned partitions, one loop per leader broker (docs/architecture/fetcher.md).

    Consumer side: :meth:`drain` (poll style, many partitions) or
    :meth:`fetch_partition` (one partition, awaits data). Both advance the
    position past what they return.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        clock: Clock = time.monotonic,
    ) -> None:
        config.validate()
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.core = FetchCore(config)
        """The sans-I/O fetch state: partitions, requests, responses, decoding."""
        self._parts = self.core.parts
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._node_wakeup: dict[int, asyncio.Event] = {}
        self.connections = DedicatedConnections(
            cluster, client_id=config.client_id, request_timeout_s=config.request_timeout_ms / 1000.0
        )
        """The fetch connections, one per broker, apart from the cluster's."""
        self._data_event = asyncio.Event()
        self._metadata_needed = asyncio.Event()
        self._reset_needed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self._retry_backoff = config.retry_backoff()
        """Before retrying a metadata or offset lookup, and after a failed fetch."""
        self._restart_backoff = Backoff(
            config.retry_backoff_ms, max(config.retry_backoff_max_ms, 1000)
        )
        """After a lost connection or a crashed loop: grows to a second at least."""
        self.fetch_requests: Counter[int] = Counter()
        """Fetch requests sent, per broker node id (for tests and metrics)."""

    # ------------------------------------------------------------ assignment

    def start(self) -> None:
        if self._closed:
            raise RuntimeError("the fetcher is closed")
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(
                    self._guarded("metadata", self._metadata_loop), name="fetcher-metadata"
                ),
                loop.create_task(
                    self._guarded("offset reset", self._reset_loop), name="fetcher-reset"
                ),
            ]

    def assigned(self) -> set[TopicPartition]:
        return set(self._parts)

    def add(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        """Start fetching ``partitions``; a None position resets by ``auto_offset_reset``.

        Partitions already assigned keep their state (use :meth:`seek` to move them).
        """
        self.start()
        for tp, position in partitions.items():
            if tp in self._parts:
                continue
            st = PartitionState(tp)
            self._parts[tp] = st
            if position is None:
                self._set_reset(st, self.config.auto_offset_reset)
            else:
                st.set_position(position)
            self._route(st)

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and drop the buffered data of ``partitions``."""
        for tp in partitions:
            st = self._parts.pop(tp, None)
            if st is not None:
                st.clear()
                st.ready.set()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Deliver from ``offset`` next; drops buffered data and unblocks an errored partition."""
        if offset < 0:
            raise ValueError(f"cannot seek {tp[0]}-{tp[1]} to negative offset {offset}")
        st = self._state(tp)
        st.clear()
        st.set_position(offset)
        self._wake(st)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._state(tp)
            st.clear()
            self._set_reset(st, "earliest")

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._state(tp)
            st.clear()
            self._set_reset(st, "latest")

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and delivering; buffered data is kept for :meth:`resume`."""
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._state(tp)
            if st.paused:
                st.paused = False
                if st.has_buffered:
                    st.waiting_since = self.clock()
                    st.ready.set()
                    self._data_event.set()
                self._wake(st)

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._parts.items() if st.paused}

    def position(self, tp: TopicPartition) -> int | None:
        """Offset of the next record the consumer will get (None while being reset)."""
        return self._state(tp).position

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self._parts.items() if st.position is not None}

    def highwater(self, tp: TopicPartition) -> int | None:
        hw = self._state(tp).high_watermark
        return None if hw < 0 else hw

    def lag(self, tp: TopicPartition) -> int | None:
        """Records between the position and the end a reader can reach: the high
        watermark, or under read_committed the last stable offset (as the Java client)."""
        st = self._state(tp)
        end = st.high_watermark
        if self.config.isolation_level_code == 1 and st.last_stable_offset >= 0:
            end = st.last_stable_offset
        if end < 0 or st.position is None:
            return None
        return max(0, end - st.position)

    def buffered_bytes(self, tp: TopicPartition | None = None) -> int:
        if tp is not None:
            return self._state(tp).buffered_bytes
        return sum(st.buffered_bytes for st in self._parts.values())

    def partition_fetches(self, tp: TopicPartition) -> int:
        """How many fetch requests included ``tp`` (for tests and metrics)."""
        return self._state(tp).fetches

    def _state(self, tp: TopicPartition) -> PartitionState:
        return self.core.state(tp)

    def _set_reset(self, st: PartitionState, policy: str) -> None:
        if self.core.set_reset(st, policy):
            self._reset_needed.set()
        else:
            self._data_event.set()

    # ------------------------------------------------------------ consuming

    def drain(
        self, max_records: int, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, list[Message]]:
        """Take up to ``max_records`` buffered records, without waiting.

        Rotates over the non-paused partitions (all, or ``partitions``) so none
        starves. If a partition has an error and nothing was taken yet, raises
        it (once; the partition then waits for a seek).
        """
        out: dict[TopicPartition, list[Message]] = {}
        for st, records in self._drain(max_records, partitions):
            out[st.tp] = records
        return out

    def drain_records(self, max_records: int) -> list[Message]:
        """:meth:`drain` as one list (partition after partition): what a poll returns."""
        out: list[Message] = []
        for _st, records in self._drain(max_records, None):
            if out:
                out += records
            else:
                out = records
        return out

    def _drain(
        self, max_records: int, partitions: Iterable[TopicPartition] | None
    ) -> list[tuple[PartitionState, list[Message]]]:
        try:
            return cast(
                list[tuple[PartitionState, list[Message]]],
                self.core.drain(max_records, partitions, Message, self.clock()),
            )
        finally:
            self._wake_nodes()

    def has_error(self) -> bool:
        """Whether some non-paused partition has an error waiting to be raised by a drain."""
        return any(st.error is not None and not st.paused for st in self._parts.values())

    def unread(self, records: Iterable[Message]) -> None:
        """Put records taken by a drain back in front of their partitions' buffers
        (see :meth:`FetchCore.unread`)."""
        if self.core.unread(records):
            self._data_event.set()

    def drain_partition(
        self,
        tp: TopicPartition,
        max_records: int,
        *,
        one_batch: bool = False,
    ) -> list[Message]:
        """Take up to ``max_records`` buffered records of one partition (raises its error).

        ``one_batch``: stop at the end of the decoded batch (decode at most one more),
        so a caller holding what it took holds at most one batch beyond the buffer.
        """
        st = self._parts.get(tp)
        if st is None or st.paused:
            return []
        if st.error is not None:
            self.core.raise_error(st)
        records = self._take(st, max_records, one_batch)
        if not records and st.error is not None:
            self.core.raise_error(st)
        return records

    async def wait_for_data(
        self, timeout_s: float | None, partitions: Iterable[TopicPartition] | None = None
    ) -> bool:
        """Wait until some (non-paused) partition has records or an error buffered."""
        wanted = None if partitions is None else set(partitions)
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            for tp, st in self._parts.items():
                if (wanted is None or tp in wanted) and st.deliverable:
                    return True
            self._data_event.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that arrives as the wait completes.
            try:
                async with asyncio.timeout(remaining):
                    await self._data_event.wait()
            except TimeoutError:
                return False

    async def fetch_partition(
        self,
        tp: TopicPartition,
        max_records: int,
        timeout_s: float | None = None,
        *,
        one_batch: bool = False,
    ) -> list[Message]:
        """Records of one partition, waiting up to ``timeout_s`` for some; [] on timeout or removal.

        ``one_batch``: as for :meth:`drain_partition`.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            st = self._parts.get(tp)
            if st is None:
                return []
            records = self.drain_partition(tp, max_records, one_batch=one_batch)
            if records:
                return records
            st.ready.clear()
            if st.deliverable:
                continue
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return []
            try:
                async with asyncio.timeout(remaining):  # not wait_for: see wait_for_data
                    await st.ready.wait()
            except TimeoutError:
                return []
            if self._parts.get(tp) is not st:
                return []

    # ------------------------------------------------------------ routing

    def _route(self, st: PartitionState) -> None:
        info = self.cluster.topics.get(st.tp[0])
        leader = -1 if info is None else info.leaders.get(st.tp[1], -1)
        if leader >= 0 and leader in self.cluster.brokers:
            st.leader = leader
            self._ensure_loop(leader)
            self._wake(st)
        else:
            st.leader = None
            self._metadata_needed.set()

    def _ensure_loop(self, node_id: int) -> None:
        task = self._loops.get(node_id)
        if task is None or task.done():
            self._node_wakeup.setdefault(node_id, asyncio.Event())
            self._loops[node_id] = asyncio.get_running_loop().create_task(
                self._broker_loop(node_id), name=f"fetch-broker-{node_id}"
            )

    def _wake(self, st: PartitionState) -> None:
        if st.leader is not None:
            event = self._node_wakeup.get(st.leader)
            if event is not None:
                event.set()

    def _lose_leader(self, st: PartitionState, reason: str) -> None:
        log.debug("%s-%d: %s; refreshing metadata", st.tp[0], st.tp[1], reason)
        st.leader = None
        self._metadata_needed.set()

    async def _metadata_loop(self) -> None:
        attempt = 0
        while not self._closed:
            await self._metadata_needed.wait()
            self._metadata_needed.clear()
            topics = sorted({tp[0] for tp, st in self._parts.items() if st.leader is None})
            if not topics:
                continue
            failed = False
            try:
                await self.cluster.refresh_metadata(topics)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                log.debug("fetcher metadata refresh failed: %s", exc)
                failed = True
            unresolved = False
            for st in list(self._parts.values()):
                if st.leader is None:
                    self._route(st)
                    unresolved = unresolved or st.leader is None
            self._metadata_needed.clear()
            if failed or unresolved:
                await asyncio.sleep(self._retry_backoff.delay_s(attempt))
                attempt += 1
                self._metadata_needed.set()
            else:
                attempt = 0

    async def _reset_loop(self) -> None:
        attempt = 0
        while not self._closed:
            await self._reset_needed.wait()
            self._reset_needed.clear()
            pending = self.core.resets_pending()
            if not pending:
                continue
            policies = {tp: policy for tp, (_st, _epoch, policy) in pending.items()}
            try:
                offsets = await reset_offsets(self.cluster, policies, self.config)
            except (ConnectionClosed, OSError, TimeoutError, KafkaError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    self.core.resets_failed(pending, exc)
                    self._data_event.set()
                    continue
                log.debug("offset reset failed (%s); retrying", exc)
                await asyncio.sleep(self._retry_backoff.delay_s(attempt))
                attempt += 1
                self._reset_needed.set()
                continue
            attempt = 0
            for st in self.core.resets_done(pending, offsets):
                self._wake(st)

    def _take(
        self,
        st: PartitionState,
        limit: int,
        one_batch: bool = False,
    ) -> list[Message]:
        taken = cast(list[Message], self.core.take(st, limit, Message, self.clock(), one_batch))
        self._wake_nodes()
        return taken

    def _wake_nodes(self) -> None:
        """Wake the loops of the brokers whose partitions the consumer drained."""
        nodes = self.core.wake_nodes
        if nodes:
            for node_id in nodes:
                event = self._node_wakeup.get(node_id)
                if event is not None:
                    event.set()
            nodes.clear()

    # ------------------------------------------------------------ broker loops

    def _fetchable(self, node_id: int) -> list[PartitionState]:
        return self.core.fetchable(node_id, self.clock())

    async def _guarded(self, name: str, body: Callable[[], Any]) -> None:
        """Run a background loop; an unexpected error is logged and the loop restarted."""
        attempt = 0
        while not self._closed:
            try:
                await body()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher %s failed; restarting it", name)
                await asyncio.sleep(self._restart_backoff.delay_s(attempt))
                attempt += 1

    async def _broker_loop(self, node_id: int) -> None:
        await self._guarded(f"loop for broker {node_id}", lambda: self._broker_loop_body(node_id))

    async def _broker_loop_body(self, node_id: int) -> None:
        wakeup = self._node_wakeup[node_id]
        failures = 0
        while not self._closed:
            parts = self._fetchable(node_id)
            if not parts:
                wakeup.clear()
                parts = self._fetchable(node_id)
                if not parts:
                    await wakeup.wait()
                    continue
            try:
                conn = await self.connections.get(node_id)
                version = conn.version_for(FETCH, self.core.max_version(parts, self.cluster.topics))
                if version < FIRST_FETCH_VERSION:
                    raise KafkaError(
                        ErrorCode.UNSUPPORTED_VERSION,
                        f"broker {node_id} only serves Fetch v{version} (record format v0/v1)",
                    )
                request, sent = self.core.build_request(node_id, parts, self.cluster.topics)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                failures = await self._connection_failed(node_id, parts, exc, failures)
                continue
            for st in parts:
                st.in_flight = True
                st.fetches += 1
            self.fetch_requests[node_id] += 1
            timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000.0
            try:
                response: FetchResponse = await conn.request(
                    FETCH, request, version=version, timeout_s=timeout
                )
            except (ConnectionClosed, OSError, KafkaError) as exc:
                for st in parts:
                    st.in_flight = False
                failures = await self._connection_failed(node_id, parts, exc, failures)
                continue
            finally:
                for st in parts:
                    st.in_flight = False
            failures = 0
            error_code = response.error_code
            if not error_code:
                self.handle_response(node_id, response, sent, version)
            # Release the response (up to fetch_max_bytes) now: the batches were copied
            # out, and the loop may wait a long time for the next fetch.
            del response
            if error_code:
                log.warning("Fetch from broker %d failed: %s", node_id, error_name(error_code))
                await asyncio.sleep(self._retry_backoff.delay_s(0))

    async def _connection_failed(
        self, node_id: int, parts: list[PartitionState], exc: BaseException, failures: int
    ) -> int:
        log.debug("fetch from broker %d failed: %s", node_id, exc)
        await self.connections.drop(node_id)
        if isinstance(exc, KafkaError) and exc.code == ErrorCode.UNSUPPORTED_VERSION:
            self.core.fail(parts, exc)
            self._data_event.set()
            return failures
        # The broker may be gone for good: look the leaders up again after the backoff.
        await asyncio.sleep(self._restart_backoff.delay_s(failures))
        if failures >= 1:
            for st in parts:
                if st.leader == node_id:
                    self._lose_leader(st, f"connection to broker {node_id} failed: {exc}")
        return failures + 1

    def handle_response(
        self, node_id: int, response: FetchResponse, sent: Sent, version: int
    ) -> bool:
        """Apply a Fetch response from ``node_id`` (see :meth:`FetchCore.handle_response`)
        and act on its decisions; whether some partition got records or an error."""
        outcome = self.core.handle_response(
            node_id, response, sent, version, self.cluster.topics, self.clock()
        )
        for st in outcome.resets:
            self._set_reset(st, self.config.auto_offset_reset)
        for st, reason in outcome.leader_lost:
            self._lose_leader(st, reason)
        if outcome.got_data:
            self._data_event.set()
        return outcome.got_data

    # ------------------------------------------------------------ shutdown

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._loops.values()) + self._tasks
        self._loops.clear()
        self._tasks = []
        await cancel_and_wait(tasks)
        await self.connections.close()
        for st in self._parts.values():
            st.ready.set()
        self._data_event.set()
