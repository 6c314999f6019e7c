"""``AIOProducer``: the asyncio producer (``Producer`` in producer.py is its blocking facade).

Works against any Kafka-compatible broker (versions are negotiated per request).

Pipeline (modelled on the Java client's RecordAccumulator + Sender, written anew):

* ``send`` picks the partition (explicit; murmur2 of the key, Java-compatible; or
  the sticky partition for unkeyed records, KIP-480/794), and appends the record
  to that partition's open batch in the ``RecordAccumulator`` (see accumulator.py
  for the ordering and idempotence rules). It returns as soon as the record is
  queued; the returned future resolves to ``RecordMetadata`` once the broker
  acknowledged it (or to the error that ended its delivery).
* One sender task drains batches that are full, whose ``linger_ms`` expired, or
  that a flush/close/memory shortage wants out: one Produce request per broker
  carries at most one batch per partition (bounded by ``max_request_size``), up
  to ``max_in_flight`` requests per broker connection.
* Retriable failures (leader moved, leader unavailable, timeouts, lost
  connections, unknown partition for a moment) refresh the metadata and resend
  the *same bytes with the same sequence* after an exponential backoff, until
  ``retries`` or ``delivery_timeout_ms`` runs out. Other errors fail the batch's
  futures with a ``KafkaError`` carrying the broker's error message.
* Idempotence is on by default (when acks=-1): the producer id and epoch come
  from InitProducerId at start; DUPLICATE_SEQUENCE_NUMBER counts as success;
  UNKNOWN_PRODUCER_ID, and any local hole in a partition's sequence (a sequenced
  batch failed or expired), make the producer obtain a new id/epoch (KIP-360)
  once nothing is in flight and renumber the unsent batches. An
  OUT_OF_ORDER_SEQUENCE_NUMBER for the very batch the broker should have been
  expecting means the broker lost acknowledged data: that batch fails with the
  error (as in the Java client) and the producer continues under a new epoch.
* ``buffer_memory`` bounds the bytes of queued and unacknowledged records: when
  it is full ``send`` waits (and every batch is sent at once) until space frees,
  or raises ``BufferFullError`` after ``max_block_ms``.

With acks=0 nothing is acknowledged: futures resolve with offset -1 once the
request is written.

This module is ``send``, ``flush`` and ``close``. The sender task is producer_sender.py;
what to do with a batch after an answer (retry, split, new epoch, fail) is decided
by ``DeliveryPolicy`` (producer_policy.py, sans-I/O) and carried out by the sender;
producer_outcomes.py completes the records' futures and callbacks. Settings are
``ProducerConfig`` (producer_config.py); metadata is producer_metadata.py;
transactions are producer_transactions.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from ..protocol.compression import codec_by_name
from ..protocol.errors import ErrorCode, KafkaError
from . import logs
from .accumulator import BATCH_FULL, NO_MEMORY, RecordAccumulator
from .batch_encoding import RECORD_OVERHEAD, record_size
from .cluster import Cluster
from .connection import UnsupportedApi
from .partitioner import RecordPartitioner
from .producer_config import MAX_IDEMPOTENT_IN_FLIGHT, producer_config_from
from .producer_outcomes import BatchOutcomes
from .producer_sender import Sender
from .producer_transactions import ProducerTransactions
from .producer_types import BufferFullError, ProducerClosedError, ProducerError, RecordMetadata
from .retry import Backoff
from .serde import RecordSerializers
from .transactions import ConsumerGroupMetadata, TransactionState, TxnState

log = logging.getLogger("slipstream.client.producer")

# Record timestamps use the wall clock; every deadline uses the monotonic one (ms).
_wall = time.time
_monotonic = time.monotonic

_APPENDED = 0
_NEED_METADATA = 1
_NEED_MEMORY = 2


def _as_bytes(data: Any, what: str) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    raise TypeError(f"record {what} must be bytes, str or None, not {type(data).__name__}")


def _check_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError(f"record headers must be (name, value) pairs, got {item!r}") from None
        if not isinstance(name, str):
            raise TypeError(f"record header name must be str, not {type(name).__name__}")
        out.append((name, None if value is None else _as_bytes(value, f"header {name!r} value")))
    return out


# --------------------------------------------------------------------------- AIOProducer


class AIOProducer:
    """asyncio producer. Use ``async with AIOProducer(...) as p`` or ``start()``/``close()``.

    ``send`` returns once the record is queued, with a future for its ``RecordMetadata``;
    ``send_and_wait`` also waits for the acknowledgement. Not thread-safe: call it from
    the loop it was started on (``Producer`` is the thread-safe facade).

    Settings: any :class:`~.producer_config.ProducerConfig` field as a keyword (Kafka's
    names with underscores; times in ms, sizes in bytes).
    """

    def __init__(self, bootstrap_servers: str | list[str], **settings: Any) -> None:
        config = self.config = producer_config_from(bootstrap_servers, settings)
        self.serializers = RecordSerializers(config.key_serializer, config.value_serializer)
        self.acks = config.acks_int
        self.idempotent = config.idempotent
        self.client_id = config.client_id
        self.linger_ms = float(config.linger_ms)
        self.batch_size = config.batch_size
        self.max_in_flight = config.max_in_flight
        self.delivery_timeout_ms = float(config.delivery_timeout_ms)
        self.request_timeout_ms = float(config.request_timeout_ms)
        self.buffer_memory = config.buffer_memory
        self.max_block_ms = float(config.max_block_ms)
        self.max_request_size = config.max_request_size
        self.transactional_id = config.transactional_id
        self._backoff = Backoff(float(config.retry_backoff_ms), float(config.retry_backoff_max_ms))
        self._max_record = config.max_record_size
        self._cluster = Cluster(
            bootstrap_servers, client_id=config.client_id,
            request_timeout_s=config.request_timeout_ms / 1000, security=config.security(),
        )
        self._acc = RecordAccumulator(
            batch_size=config.batch_size,
            linger_ms=self.linger_ms,
            buffer_memory=config.buffer_memory,
            compression=codec_by_name(config.compression),
            idempotent=self.idempotent,
            max_in_flight_per_partition=min(config.max_in_flight, MAX_IDEMPOTENT_IN_FLIGHT)
            if self.idempotent
            else config.max_in_flight,
        )
        partitioner = config.partitioner
        self._partitioner = (
            RecordPartitioner(partitioner, None)
            if isinstance(partitioner, str)
            else RecordPartitioner("custom", partitioner)
        )
        # the hot path's direct view of the sticky partitions (the partitioner's own dict)
        self._sticky_unkeyed = self._partitioner.sticky_unkeyed
        self._sticky = self._partitioner.sticky
        # loop state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closed = False
        self._memory_waiters: deque[asyncio.Future[None]] = deque()
        self._txns: ProducerTransactions | None = None
        self._txn: TransactionState | None = None  # the hot path's view of its state
        self._outcomes = BatchOutcomes(self._acc, self._memory_waiters, None)
        self._sender = Sender(config, self._cluster, self._acc, self._backoff, self._outcomes)
        self._sender_task: asyncio.Task[None] | None = None
        self._wake = self._sender.wake
        if config.transactional_id is not None:
            self._txns = self._sender.txns = ProducerTransactions(
                config, self._cluster, self._backoff, self._acc, is_started=lambda: self._started,
                flush=self.flush, finish=self._outcomes.finish, wake=self._wake,
            )
            self._txn = self._outcomes.txn = self._txns.state

    # ------------------------------------------------------------------ lifecycle

    @property
    def producer_id(self) -> int:
        return self._acc.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._acc.producer_epoch

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    async def start(self) -> AIOProducer:
        logs.bind(self.client_id)  # the tasks started here log under this client's id
        if self._started:
            return self
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        self._loop = asyncio.get_running_loop()
        await self._cluster.refresh_metadata([])
        self._sender.metadata.refreshed_at = _monotonic() * 1000
        if self.idempotent and self._txn is None:  # transactional: init_transactions() does it
            try:
                pid, epoch = await self._sender.init_producer_id()
            except UnsupportedApi:
                if self.config.explicit_idempotence:
                    raise
                log.warning("the broker does not support InitProducerId: idempotence is off")
                self.idempotent = self._acc.idempotent = self._sender.policy.idempotent = False
            else:
                self._acc.reset_producer(pid, epoch)
        self._started = True
        self._sender_task = self._loop.create_task(self._sender.run(), name="slipstream-producer-sender")
        return self

    async def __aenter__(self) -> AIOProducer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, without waiting for linger, and wait until each of
        those records is acknowledged or failed. Raises TimeoutError after ``timeout`` s."""
        if not self._started:
            return
        batches = [b for b in self._acc.snapshot_incomplete() if not b.done]
        if not batches:
            return
        loop = self._get_loop()
        deadline = None if timeout is None else loop.time() + timeout
        self._acc.flushing += 1
        self._wake()
        try:
            while batches:
                waits: list[asyncio.Future[None]] = []
                for batch in batches:
                    if not batch.done:
                        if batch.done_future is None:
                            batch.done_future = loop.create_future()
                        waits.append(batch.done_future)
                if waits:
                    remaining = None if deadline is None else max(0.0, deadline - loop.time())
                    _, pending = await asyncio.wait(waits, timeout=remaining)
                    if pending:
                        raise TimeoutError(
                            f"flush timed out after {timeout} s with {len(pending)} batches undelivered"
                        )
                # A batch split in two is done when both halves are.
                batches = [piece for b in batches if b.pieces for piece in b.pieces]
        finally:
            self._acc.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (waiting at most ``timeout`` s), then release everything.
        Records still undelivered at the end fail with ProducerClosedError."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            await self._cluster.close()
            return
        self._acc.closing = True
        self._wake()
        with contextlib.suppress(TimeoutError):
            await self.flush(timeout)
        sender = self._sender
        sender.stopping = True
        closed = ProducerClosedError("the producer was closed before the record was delivered")
        for batch in self._acc.abort_all():
            self._outcomes.finish(batch, closed)
        for pending in list(sender.tasks):
            pending.cancel()
        if sender.tasks:
            await asyncio.gather(*sender.tasks, return_exceptions=True)
        for fut in self._memory_waiters:
            if not fut.done():
                fut.set_exception(closed)
        self._memory_waiters.clear()
        others: list[asyncio.Task[Any] | None] = [
            sender.metadata.task,
            sender.bump_task,
            self._sender_task,
        ]
        for task in others:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._cluster.close()

    def __len__(self) -> int:
        """Records queued or in flight (not yet acknowledged or failed)."""
        return self._acc.pending_records()

    # ------------------------------------------------------------------ sending

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns a future for its RecordMetadata (await it for the ack).

        Waits only when the topic's metadata is not known yet or ``buffer_memory`` is
        full (at most ``max_block_ms``). Raises KafkaError (MESSAGE_TOO_LARGE for a
        record over max_request_size/buffer_memory; UNKNOWN_TOPIC_OR_PARTITION),
        BufferFullError, ProducerClosedError, TypeError for values that are not bytes/str.
        """
        loop = self._loop
        if loop is None:
            raise ProducerError("the producer is not started: call `await producer.start()`")
        if self.serializers.active:
            key, value = self.serializers.apply(key, value)
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        status = self._try_append(
            topic, value, key, headers, partition, timestamp_ms, fut, False, True
        )
        if status:
            await self._append_slow(topic, value, key, headers, partition, timestamp_ms, fut)
        elif self._yield_now:
            self._yield_now = False
            await asyncio.sleep(0)
        return fut

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        fut = await self.send(topic, value, key, headers, partition, timestamp_ms)
        return await fut

    _yield_now = False

    def _try_append(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        timestamp_ms: int | None,
        waiter: Any,
        threadsafe: bool,
        fair: bool,
    ) -> int:
        """Append if the metadata is known and memory is free; returns _APPENDED or why not.

        The per-record hot path: kept flat on purpose (no helper calls in the common case).
        """
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if self._txn is not None and self._txn.state is not TxnState.IN_TRANSACTION:
            self._txn.require(TxnState.IN_TRANSACTION, what="send")
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        if headers:
            headers = _check_headers(headers)
            size = record_size(key, value, headers)
        else:
            headers = ()
            size = RECORD_OVERHEAD
            if value is not None:
                size += len(value)
            if key is not None:
                size += len(key)
        if size > self._max_record:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"a record of about {size} bytes is larger than max_request_size="
                f"{self.max_request_size} or buffer_memory={self.buffer_memory}",
            )
        info = self._cluster.topics.get(topic)
        if info is None:
            return _NEED_METADATA
        leaders = info.leaders
        if partition is None:
            if key is None and self._sticky_unkeyed:
                sticky = self._sticky.get(topic)
                if sticky is None or sticky[1] >= self.batch_size or sticky[0] not in leaders:
                    sticky = self._partitioner.new_sticky(topic, sticky, leaders)
                sticky[1] += size
                partition = sticky[0]
            else:
                partition = self._partitioner.choose(topic, key, len(leaders))
        elif partition not in leaders:
            return _NEED_METADATA
        if fair and self._memory_waiters:
            return _NEED_MEMORY
        if timestamp_ms is None:
            timestamp_ms = int(_wall() * 1000)
        now = _monotonic() * 1000
        result = self._acc.append(
            topic, partition, (key, value, headers, timestamp_ms), size, waiter, now
        )
        if result:
            if result == NO_MEMORY:
                return _NEED_MEMORY
            if result == BATCH_FULL or now + self.linger_ms < self._sender.sleep_until:
                if threadsafe:
                    loop = self._loop
                    assert loop is not None
                    loop.call_soon_threadsafe(self._wake)
                else:
                    if result == BATCH_FULL:
                        # Let the sender put the batch on the wire while the caller goes on.
                        self._yield_now = True
                    self._wake()
        return _APPENDED

    async def _append_slow(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        timestamp_ms: int | None,
        waiter: Any,
    ) -> None:
        loop = self._get_loop()
        deadline = loop.time() + self.max_block_ms / 1000
        while True:
            status = self._try_append(
                topic, value, key, headers, partition, timestamp_ms, waiter, False, False
            )
            if status == _APPENDED:
                return
            if status == _NEED_METADATA:
                await self._sender.metadata.wait_for_topic(topic, partition, deadline)
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise BufferFullError(
                    f"buffer_memory ({self.buffer_memory} bytes) stayed full for "
                    f"{self.max_block_ms:.0f} ms"
                )
            fut: asyncio.Future[None] = loop.create_future()
            self._memory_waiters.append(fut)
            self._wake()  # an exhausted buffer makes every batch sendable
            try:
                async with asyncio.timeout(remaining):
                    await fut
            except TimeoutError:
                pass
            finally:
                with contextlib.suppress(ValueError):
                    self._memory_waiters.remove(fut)

    # ------------------------------------------------------------------ clock, loop

    def _now_ms(self) -> float:
        return _monotonic() * 1000

    def _get_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise ProducerError("the producer is not started: call `await producer.start()`")
        return self._loop

    # ------------------------------------------------------------------ transactions (producer_transactions.py)

    def _transactions(self, what: str) -> ProducerTransactions:
        if self._txns is None:
            raise ProducerError(f"{what} needs a transactional producer (set transactional_id)")
        return self._txns

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id: a new producer id/epoch, fencing any older producer
        with the same id (its unfinished transaction is aborted first)."""
        await self._transactions("init_transactions").init(timeout)

    def begin_transaction(self) -> None:
        self._transactions("begin_transaction").begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets ({(topic, partition): next offset to read})
        as part of the transaction: visible to the group only if the transaction commits."""
        await self._transactions("send_offsets_to_transaction").send_offsets(offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn). Raises the
        transaction's error if a record or the commit failed."""
        await self._transactions("commit_transaction").commit(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail, what was written is aborted."""
        await self._transactions("abort_transaction").abort(timeout)
