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

What to do with a batch after an answer (retry, split, new epoch, fail) is decided by
``DeliveryPolicy`` (producer_policy.py, sans-I/O); this module applies it. Settings are
``ProducerConfig`` (producer_config.py); metadata is producer_metadata.py; transactions
are producer_transactions.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..protocol.apis.init_producer_id import SPEC as INIT_PRODUCER_ID
from ..protocol.apis.init_producer_id import InitProducerIdRequest
from ..protocol.apis.produce import SPEC as PRODUCE
from ..protocol.apis.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceRequestTopicData,
    ProduceResponse,
)
from ..protocol.compression import codec_by_name
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from . import logs
from .accumulator import (
    BATCH_FULL,
    NO_MEMORY,
    RECORD_OVERHEAD,
    ProducerBatch,
    RecordAccumulator,
    record_size,
)
from .cluster import Cluster
from .connection import BrokerConnection, UnsupportedApi
from .partitioner import RecordPartitioner
from .producer_config import INT32_MAX, MAX_IDEMPOTENT_IN_FLIGHT, producer_config_from
from .producer_metadata import ProducerMetadata
from .producer_policy import BatchDecision, DeliveryPolicy, Verdict
from .producer_transactions import ProducerTransactions
from .producer_types import BufferFullError, ProducerClosedError, ProducerError, RecordMetadata
from .retry import Backoff, retry_async
from .serde import RecordSerializers
from .transactions import ConsumerGroupMetadata, TransactionState, TxnState

# Produce v13 names topics by id; this producer names them.
NAMED_TOPICS_PRODUCE_MAX_VERSION = 12

log = logging.getLogger("slipstream.client.producer")

# Record timestamps use the wall clock; every deadline uses the monotonic one (ms).
_wall = time.time
_monotonic = time.monotonic

_APPENDED = 0
_NEED_METADATA = 1
_NEED_MEMORY = 2

_new_tuple = tuple.__new__  # RecordMetadata without the NamedTuple __new__ frame (hot path)


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
        self._policy = DeliveryPolicy(
            retries=config.retries,
            delivery_timeout_ms=self.delivery_timeout_ms,
            backoff=self._backoff,
            idempotent=self.idempotent,
        )
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
        # loop state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closed = False
        self._sender: asyncio.Task[None] | None = None
        self._stopping = False
        self._wake_fut: asyncio.Future[None] | None = None
        self._sleep_until = float("inf")
        self._tasks: set[asyncio.Task[Any]] = set()
        self._node_in_flight: dict[int, int] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: set[int] = set()
        self._node_retry_at: dict[int, float] = {}
        self._node_failures: dict[int, int] = {}
        self._metadata = ProducerMetadata(
            self._cluster,
            self._backoff,
            max_age_ms=float(config.metadata_max_age_ms),
            max_block_ms=self.max_block_ms,
            topic_propagation_ms=float(config.topic_metadata_propagation_max_ms),
            wake=self._wake,
            spawn=self._spawn,
        )
        self._bump_task: asyncio.Task[None] | None = None
        self._memory_waiters: deque[asyncio.Future[None]] = deque()
        # Delivery callbacks (callables given as waiters) are handed to this sink in one
        # list per batch; the default runs them right away on the loop.
        self._callback_sink: Callable[
            [list[tuple[Any, BaseException | None, RecordMetadata]]], None
        ] = _run_callbacks
        # transactions
        self._txns: ProducerTransactions | None = None
        self._txn: TransactionState | None = None  # the hot path's view of its state
        if config.transactional_id is not None:
            self._txns = ProducerTransactions(
                config, self._cluster, self._backoff, self._acc,
                is_started=lambda: self._started, flush=self.flush, finish=self._finish, wake=self._wake,
            )
            self._txn = self._txns.state

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
        self._metadata.refreshed_at = _monotonic() * 1000
        if self.idempotent and self._txn is None:  # transactional: init_transactions() does it
            try:
                pid, epoch = await self._init_producer_id()
            except UnsupportedApi:
                if self.config.explicit_idempotence:
                    raise
                log.warning("the broker does not support InitProducerId: idempotence is off")
                self.idempotent = self._acc.idempotent = self._policy.idempotent = False
            else:
                self._acc.reset_producer(pid, epoch)
        self._started = True
        self._sender = self._loop.create_task(
            self._sender_loop(), name="slipstream-producer-sender"
        )
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
        self._stopping = True
        closed = ProducerClosedError("the producer was closed before the record was delivered")
        for batch in self._acc.abort_all():
            self._finish(batch, closed)
        for pending in list(self._tasks):
            pending.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for fut in self._memory_waiters:
            if not fut.done():
                fut.set_exception(closed)
        self._memory_waiters.clear()
        others: list[asyncio.Task[Any] | None] = [
            self._metadata.task,
            self._bump_task,
            self._sender,
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
            partitioner = self._partitioner
            if key is None and partitioner.sticky_unkeyed:
                sticky = partitioner.sticky.get(topic)
                if sticky is None or sticky[1] >= self.batch_size or sticky[0] not in leaders:
                    sticky = partitioner.new_sticky(topic, sticky, leaders)
                sticky[1] += size
                partition = sticky[0]
            else:
                partition = partitioner.choose(topic, key, len(leaders))
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
            if result == BATCH_FULL or now + self.linger_ms < self._sleep_until:
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
                await self._metadata.wait_for_topic(topic, partition, deadline)
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

    # ------------------------------------------------------------------ producer id

    async def _init_producer_id(self, *, bump: bool = False) -> tuple[int, int]:
        async def attempt() -> tuple[int, int]:
            conn = await self._cluster.any_connection()
            version = conn.version_for(INIT_PRODUCER_ID)
            request = InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=INT32_MAX
            )
            if bump and version >= 3 and self._acc.producer_id >= 0:
                request.producer_id = self._acc.producer_id
                request.producer_epoch = self._acc.producer_epoch
            response = await conn.request(INIT_PRODUCER_ID, request, version=version)
            if response.error_code:
                raise KafkaError(response.error_code, f"InitProducerId failed on {conn.address}")
            return int(response.producer_id), int(response.producer_epoch)

        return await retry_async(
            attempt,
            backoff=self._backoff,
            timeout_s=self.max_block_ms / 1000,
            retriable=lambda exc: (
                not isinstance(exc, UnsupportedApi)
                and (
                    isinstance(exc, (ConnectionError, OSError))
                    or (isinstance(exc, KafkaError) and exc.retriable)
                )
            ),
        )

    async def _bump_epoch(self) -> None:
        attempt = 0
        try:
            while True:
                try:
                    pid, epoch = await self._init_producer_id(bump=True)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("could not obtain a new producer id (will retry): %s", exc)
                    await asyncio.sleep(self._backoff.delay_s(attempt))
                    attempt += 1
            old = (self._acc.producer_id, self._acc.producer_epoch)
            renumbered = self._acc.reset_producer(pid, epoch)
            log.info(
                "producer id/epoch %s/%s -> %s/%s; %d pending batches renumbered",
                old[0],
                old[1],
                pid,
                epoch,
                renumbered,
            )
        finally:
            self._bump_task = None
            self._wake()

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

    # ------------------------------------------------------------------ sender

    def _wake(self) -> None:
        fut = self._wake_fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def _sender_loop(self) -> None:
        loop = self._get_loop()
        while True:
            self._wake_fut = loop.create_future()
            # Until we know when to wake up, any new batch (from another thread) wakes us.
            self._sleep_until = float("inf")
            now = _monotonic() * 1000
            try:
                wake_at = self._run_once(now)
            except Exception:
                log.exception("producer sender iteration failed")
                wake_at = now + 100
            if self._stopping:
                return
            if wake_at > now:
                self._sleep_until = wake_at
                handle = None
                if wake_at != float("inf"):
                    handle = loop.call_later((wake_at - now + 0.5) / 1000, self._wake)
                await self._wake_fut
                if handle is not None:
                    handle.cancel()
            else:
                await asyncio.sleep(0)

    def _run_once(self, now: float) -> float:
        acc = self._acc
        wake_at = float("inf")
        expired = acc.expire(now, self.delivery_timeout_ms)
        for batch in expired:
            self._finish(batch, self._policy.timeout_error(batch, batch.last_error))
        # An exhausted buffer: send everything now (the Java client does too).
        acc.exhausted = bool(self._memory_waiters)
        leader_of = self._metadata.leader_of
        nodes, ready_at, unknown = acc.ready(now, leader_of)
        txns = self._txns
        if acc.bump_pending and self._bump_task is None and acc.bump_ready() and txns is None:
            # (A transactional producer bumps its epoch when it aborts, through its coordinator.)
            self._bump_task = self._get_loop().create_task(self._bump_epoch())
        if txns is not None and txns.adding is None and acc.txn_partitions is not None:
            unregistered = acc.unregistered_partitions()
            if unregistered:
                txns.adding = self._spawn(txns.add_partitions(unregistered))
        wake_at = min(ready_at, self._metadata.poll(now, bool(unknown)))
        for node in nodes:
            conn = self._node_connection(node, now)
            if conn is None:
                retry_at = self._node_retry_at.get(node, 0.0)
                if retry_at > now:
                    wake_at = min(wake_at, retry_at)
                continue
            while self._node_in_flight.get(node, 0) < self.max_in_flight:
                batches = acc.drain(node, now, self.max_request_size, leader_of)
                if not batches:
                    break
                self._dispatch(node, conn, batches)
        if acc.incomplete:
            # Nothing else may wake us for a batch stuck without a leader: look again soon.
            wake_at = min(wake_at, now + 1000)
        return wake_at

    def _node_connection(self, node: int, now: float) -> BrokerConnection | None:
        conn = self._conns.get(node)
        if conn is not None and not conn.closed:
            return conn
        if node in self._connecting or now < self._node_retry_at.get(node, 0.0):
            return None
        self._connecting.add(node)
        self._spawn(self._connect(node))
        return None

    async def _connect(self, node: int) -> None:
        try:
            self._conns[node] = await self._cluster.connection(node)
            self._node_failures.pop(node, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures = self._node_failures.get(node, 0) + 1
            self._node_failures[node] = failures
            delay = self._backoff.delay_ms(failures - 1)
            self._node_retry_at[node] = self._now_ms() + delay
            self._metadata.wanted = True
            log.debug("cannot connect to broker %d (retrying in %.0f ms): %s", node, delay, exc)
        finally:
            self._connecting.discard(node)
            self._wake()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = self._get_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _dispatch(self, node: int, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        by_topic: dict[str, list[ProduceRequestPartitionData]] = {}
        unbuilt = [b for b in batches if b.payload is None]
        if unbuilt:  # encoding failed (should not happen: records are checked in send)
            for batch in unbuilt:
                self._fail(batch, batch.last_error or ProducerError("batch could not be built"))
            batches = [b for b in batches if b.payload is not None]
            if not batches:
                return
        for batch in batches:
            assert batch.payload is not None
            by_topic.setdefault(batch.topic, []).append(
                ProduceRequestPartitionData(
                    index=batch.partition, records=memoryview(batch.payload)
                )
            )
        request = ProduceRequest(
            transactional_id=self.transactional_id,
            acks=self.acks,
            timeout_ms=int(self.request_timeout_ms),
            topic_data=[
                ProduceRequestTopicData(name=t, partition_data=p) for t, p in by_topic.items()
            ],
        )
        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
        self._spawn(self._produce(node, conn, request, batches))

    async def _produce(
        self,
        node: int,
        conn: BrokerConnection,
        request: ProduceRequest,
        batches: list[ProducerBatch],
    ) -> None:
        try:
            try:
                response = await conn.request(
                    PRODUCE, request, expect_response=self.acks != 0, max_version=NAMED_TOPICS_PRODUCE_MAX_VERSION
                )
            except asyncio.CancelledError:
                closed = ProducerClosedError("the producer was closed before the broker answered")
                for batch in batches:
                    self._acc.complete(batch, acked=False)
                    self._finish(batch, closed)
                raise
            except UnsupportedApi as exc:
                for batch in batches:
                    self._fail(batch, exc)
            except KafkaError as exc:
                # The connection timed out (and was dropped): the broker may have the data.
                self._network_failure(batches, exc)
            except (ConnectionError, OSError) as exc:
                self._network_failure(batches, exc)
            else:
                if self.acks == 0:
                    for batch in batches:
                        self._succeed(batch, -1, -1)
                else:
                    self._handle_response(batches, response)
        except Exception as exc:
            # Never leave a batch hanging, whatever went wrong.
            log.exception("unexpected failure handling a Produce request")
            for batch in batches:
                if batch.in_flight:
                    self._fail(batch, exc)
        finally:
            self._node_in_flight[node] -= 1
            self._wake()

    def _network_failure(self, batches: list[ProducerBatch], exc: BaseException) -> None:
        now = self._now_ms()
        for batch in batches:
            self._apply(batch, self._policy.on_connection_lost(batch, exc, now, stopping=self._stopping), now)

    def _handle_response(self, batches: list[ProducerBatch], response: ProduceResponse) -> None:
        results: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            for part_response in topic.partition_responses:
                results[(topic.name, part_response.index)] = part_response
        now = self._now_ms()
        policy = self._policy
        for batch in batches:
            part = results.get((batch.topic, batch.partition))
            if part is not None and (part.error_code == 0 or part.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self._succeed(batch, part.base_offset, part.log_append_time_ms)  # the common case, inline
                continue
            decision = policy.on_partition_result(
                batch, part, now, stopping=self._stopping, acked_end=self._acked_end(batch)
            )
            self._apply(batch, decision, now)

    def _acked_end(self, batch: ProducerBatch) -> int | None:
        """The sequence the broker should expect next on the batch's partition, if known."""
        ps = self._acc.partition_state(batch.topic, batch.partition)
        if ps is None or ps.gap or self._acc.bump_pending:
            return None
        return int(ps.acked_end)

    def _apply(self, batch: ProducerBatch, decision: BatchDecision, now: float) -> None:
        """Carry out the policy's decision for a batch that is not acknowledged."""
        acc = self._acc
        if decision.bump_epoch:
            acc.request_bump()
        if decision.refresh_metadata:
            self._metadata.wanted = True
        if decision.last_error is not None:
            batch.last_error = decision.last_error
        verdict = decision.verdict
        if verdict is Verdict.RETRY:
            log.debug("retrying %r in %.0f ms after %s", batch, decision.backoff_ms, decision.error)
            acc.reenqueue(batch, now, decision.backoff_ms, fate_unknown=decision.fate_unknown)
        elif verdict is Verdict.SPLIT:
            first, second = acc.split(batch, now)
            code = decision.error.code if isinstance(decision.error, KafkaError) else 0
            log.info(
                "%s for %r: split into batches of %d and %d records",
                error_name(code),
                batch,
                len(first.records),
                len(second.records),
            )
            self._batch_done(batch)
        else:
            assert verdict is Verdict.FAIL and decision.error is not None
            self._fail(batch, decision.error)

    def _succeed(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._acc.complete(batch, acked=True)
        topic, partition = batch.topic, batch.partition
        ts_type = 1 if log_append_time is not None and log_append_time >= 0 else 0
        callbacks: list[tuple[Any, BaseException | None, RecordMetadata]] | None = None
        future_type = asyncio.Future
        records = batch.records
        for i, waiter in enumerate(batch.waiters):
            if waiter is None:
                continue
            md = _new_tuple(
                RecordMetadata,
                (
                    topic,
                    partition,
                    base_offset + i if base_offset >= 0 else -1,
                    log_append_time if ts_type else records[i][3],
                    ts_type,
                ),
            )
            if isinstance(waiter, future_type):
                if not waiter.done():
                    waiter.set_result(md)
            else:
                if callbacks is None:
                    callbacks = []
                callbacks.append((waiter, None, md))
        if callbacks:
            self._callback_sink(callbacks)
        self._batch_done(batch)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        self._acc.complete(batch, acked=False)
        self._finish(batch, error)

    def _finish(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail every record of a batch already released from the accumulator."""
        if self._txn is not None and not isinstance(error, ProducerClosedError):
            self._txn.fail(error)  # the transaction can only be aborted now
        log.warning(
            "delivery of %d record(s) to %s-%d failed: %s",
            len(batch.records),
            batch.topic,
            batch.partition,
            error,
        )
        callbacks: list[tuple[Any, BaseException | None, RecordMetadata]] | None = None
        future_type = asyncio.Future
        for i, waiter in enumerate(batch.waiters):
            if waiter is None:
                continue
            if isinstance(waiter, future_type):
                if not waiter.done():
                    waiter.set_exception(error)
                    waiter.exception()  # logged above; don't also warn at garbage collection
            else:
                if callbacks is None:
                    callbacks = []
                md = RecordMetadata(batch.topic, batch.partition, -1, batch.records[i][3])
                callbacks.append((waiter, error, md))
        if callbacks:
            self._callback_sink(callbacks)
        self._batch_done(batch)

    def _batch_done(self, batch: ProducerBatch) -> None:
        batch.waiters = []
        fut = batch.done_future
        if fut is not None and not fut.done():
            fut.set_result(None)
        if self._memory_waiters:
            for waiter in self._memory_waiters:
                if not waiter.done():
                    waiter.set_result(None)


def _run_callbacks(items: Iterable[tuple[Any, BaseException | None, RecordMetadata]]) -> None:
    for callback, error, metadata in items:
        try:
            callback(error, metadata)
        except Exception:
            log.exception("delivery callback %r raised", callback)
