"""The producer: ``AIOProducer`` (asyncio) and ``Producer`` (thread-safe, blocking facade).

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

Transactions (``transactional_id``): ``init_transactions()`` once (it fences older
producers with the same id and aborts their unfinished transaction), then
``begin_transaction()``, sends, optionally ``send_offsets_to_transaction(offsets,
consumer.group_metadata())``, and ``commit_transaction()`` or ``abort_transaction()``.
A partition's first batch in a transaction waits until AddPartitionsToTxn made it part
of the transaction; batches are sent with the transactional bit and the id. Errors
follow the Java client's rules (see transactions.py): abortable ones need
``abort_transaction()``, fatal ones (a newer producer fenced this one) end the producer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..protocol.apis.add_offsets_to_txn import SPEC as ADD_OFFSETS_TO_TXN
from ..protocol.apis.add_offsets_to_txn import AddOffsetsToTxnRequest
from ..protocol.apis.add_partitions_to_txn import SPEC as ADD_PARTITIONS_TO_TXN
from ..protocol.apis.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from ..protocol.apis.end_txn import SPEC as END_TXN
from ..protocol.apis.end_txn import EndTxnRequest
from ..protocol.apis.init_producer_id import SPEC as INIT_PRODUCER_ID
from ..protocol.apis.init_producer_id import InitProducerIdRequest
from ..protocol.apis.produce import SPEC as PRODUCE
from ..protocol.apis.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceRequestTopicData,
    ProduceResponse,
)
from ..protocol.apis.txn_offset_commit import SPEC as TXN_OFFSET_COMMIT
from ..protocol.apis.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from ..protocol.compression import codec_by_name
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from . import logs
from .accumulator import (
    BATCH_FULL,
    HEADER_SIZE,
    NO_MEMORY,
    RECORD_OVERHEAD,
    ProducerBatch,
    RecordAccumulator,
    record_size,
)
from .cluster import Cluster
from .connection import BrokerConnection, UnsupportedApi
from .partitioner import murmur2
from .retry import Backoff, retry_async
from .security import ClientSecurity
from .serde import RecordSerializers, Serializer
from .transactions import (
    KEY_TYPE_GROUP,
    ConsumerGroupMetadata,
    TransactionAbortedError,
    TransactionCoordinatorClient,
    TransactionError,
    TransactionState,
    TxnState,
    classify,
)

# Produce v13 names topics by id; this producer names them.
NAMED_TOPICS_PRODUCE_MAX_VERSION = 12
# AddPartitionsToTxn v4+ is the brokers' batched form; producers send v3 at most.
CLIENT_ADD_PARTITIONS_MAX_VERSION = 3

log = logging.getLogger(__name__)

# Record timestamps use the wall clock; every deadline uses the monotonic one (ms).
_wall = time.time
_monotonic = time.monotonic

MAX_IDEMPOTENT_IN_FLIGHT = 5
_INT32_MAX = 2**31 - 1
_APPENDED = 0
_NEED_METADATA = 1
_NEED_MEMORY = 2


# --------------------------------------------------------------------------- public types


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 with acks=0 (nothing is acknowledged)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    # 0: CreateTime (the producer's timestamp), 1: LogAppendTime (the broker's)
    timestamp_type: int = 0


class ProducerError(Exception):
    """A local producer problem (not an error code from a broker)."""


class ProducerClosedError(ProducerError):
    """The producer is closed, or was closed before a record could be delivered."""


class BufferFullError(ProducerError, BufferError):
    """``buffer_memory`` stayed full for ``max_block_ms``."""


class DeliveryTimeoutError(KafkaError):
    """A record was not acknowledged within ``delivery_timeout_ms``."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


_new_tuple = tuple.__new__  # RecordMetadata without the NamedTuple __new__ frame (hot path)

DeliveryCallback = Callable[[BaseException | None, RecordMetadata], Any]
PartitionerFn = Callable[[str, bytes | None, int], int]

_PARTITIONERS = ("murmur2_random", "murmur2", "random", "round_robin")
# Marked retriable in Kafka's table, but resending the same bytes cannot help.
_NOT_RETRIED = {ErrorCode.CORRUPT_MESSAGE}
# Retriable errors after which the broker may nevertheless hold the batch.
_MAYBE_WRITTEN = {
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.KAFKA_STORAGE_ERROR,
    20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
}
_TOO_LARGE = {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE}


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

    Settings (Kafka's names with underscores; times in ms, sizes in bytes):

    - ``acks``: -1/"all" (default), 1, or 0 (no acknowledgement: offsets are -1).
    - ``linger_ms`` (5), ``batch_size`` (16384): a partition's batch is sent when it is
      full or this long after its first record.
    - ``compression``: "none", "gzip", "snappy", "lz4" or "zstd" (per batch).
    - ``enable_idempotence``: default on when acks=-1 and max_in_flight <= 5 (as in the
      Java client); True insists (ValueError if the other settings contradict it).
    - ``max_in_flight`` (5): Produce requests in flight per broker.
    - ``retries`` (2**31-1), ``retry_backoff_ms`` (100) .. ``retry_backoff_max_ms``
      (1000, exponential with jitter), bounded by ``delivery_timeout_ms`` (120000), the
      time a record may take from ``send`` to its acknowledgement or failure.
    - ``request_timeout_ms`` (30000): per request; a timeout drops the connection.
    - ``buffer_memory`` (32 MiB) with ``max_block_ms`` (60000): see ``send``.
    - ``partitioner``: "murmur2_random" (default: murmur2 of the key like the Java
      client, sticky for records without a key), "murmur2" (null keys hash like b""),
      "random", "round_robin", or ``fn(topic, key, partition_count) -> partition``.
    - ``max_request_size`` (1 MiB): bounds a Produce request and a single record.
    - ``metadata_max_age_ms`` (300000): metadata is refreshed at least this often.
    - ``topic_metadata_propagation_max_ms`` (5000): how long a topic the broker calls
      unknown may take to appear before ``send`` fails with UNKNOWN_TOPIC_OR_PARTITION.
    - ``transactional_id`` (None): makes the producer transactional (idempotent, acks=-1);
      ``transaction_timeout_ms`` (60000): how long the coordinator lets a transaction run
      before aborting it. See the module docstring.
    - ``key_serializer``, ``value_serializer``: callables turning what ``send`` is given
      into bytes (see ``slipstream.client.serde``: JSON and string helpers).
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        *,
        client_id: str = "slipstream-producer",
        acks: int | str = -1,
        linger_ms: float = 5,
        batch_size: int = 16384,
        compression: str = "none",
        enable_idempotence: bool | None = None,
        max_in_flight: int = 5,
        retries: int = _INT32_MAX,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        delivery_timeout_ms: float = 120_000,
        request_timeout_ms: float = 30_000,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: float = 60_000,
        partitioner: str | PartitionerFn = "murmur2_random",
        max_request_size: int = 1024 * 1024,
        metadata_max_age_ms: float = 300_000,
        topic_metadata_propagation_max_ms: float = 5_000,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str = "PLAIN",
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_check_hostname: bool = True,
    ) -> None:
        self.serializers = RecordSerializers(key_serializer, value_serializer)
        if acks in ("all", "-1"):
            acks = -1
        if transactional_id is not None:
            if not transactional_id:
                raise ValueError("transactional_id must not be empty")
            if enable_idempotence is False:
                raise ValueError("a transactional producer is idempotent: enable_idempotence cannot be False")
            enable_idempotence = True
        if acks not in (-1, 0, 1, "0", "1"):
            raise ValueError(f"acks must be -1 ('all'), 0 or 1, not {acks!r}")
        self.acks = int(acks)
        if batch_size < 1 or buffer_memory < 1 or max_request_size < 1:
            raise ValueError("batch_size, buffer_memory and max_request_size must be positive")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if linger_ms < 0 or retries < 0 or delivery_timeout_ms <= 0 or request_timeout_ms <= 0:
            raise ValueError("linger_ms and retries must be >= 0, timeouts > 0")
        if isinstance(partitioner, str) and partitioner not in _PARTITIONERS:
            raise ValueError(f"partitioner must be one of {', '.join(_PARTITIONERS)} or a callable")
        idempotent = enable_idempotence
        if idempotent is None:
            idempotent = self.acks == -1 and max_in_flight <= MAX_IDEMPOTENT_IN_FLIGHT
        elif idempotent:
            if self.acks != -1:
                raise ValueError("enable_idempotence requires acks=-1 ('all')")
            if max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
                raise ValueError(
                    f"enable_idempotence requires max_in_flight <= {MAX_IDEMPOTENT_IN_FLIGHT}"
                )
        self._explicit_idempotence = enable_idempotence is True
        self.idempotent = bool(idempotent)
        self.client_id = client_id
        self.linger_ms = float(linger_ms)
        self.batch_size = batch_size
        self.compression = compression
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.delivery_timeout_ms = float(delivery_timeout_ms)
        self.request_timeout_ms = float(request_timeout_ms)
        self.buffer_memory = buffer_memory
        self.max_block_ms = float(max_block_ms)
        self.max_request_size = max_request_size
        self.metadata_max_age_ms = float(metadata_max_age_ms)
        self.topic_propagation_ms = float(topic_metadata_propagation_max_ms)
        self._backoff = Backoff(float(retry_backoff_ms), float(retry_backoff_max_ms))
        self._max_record = min(max_request_size, buffer_memory) - HEADER_SIZE
        security = ClientSecurity(
            security_protocol, sasl_mechanism, sasl_username, sasl_password,
            ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password, ssl_check_hostname,
        )
        self._cluster = Cluster(
            bootstrap_servers, client_id=client_id, request_timeout_s=request_timeout_ms / 1000,
            security=security,
        )
        self._acc = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=self.linger_ms,
            buffer_memory=buffer_memory,
            compression=codec_by_name(compression),
            idempotent=self.idempotent,
            max_in_flight_per_partition=min(max_in_flight, MAX_IDEMPOTENT_IN_FLIGHT)
            if self.idempotent
            else max_in_flight,
        )
        # partitioning
        self._custom_partitioner = partitioner if callable(partitioner) else None
        self._partitioner_name = partitioner if isinstance(partitioner, str) else "custom"
        self._sticky_unkeyed = partitioner == "murmur2_random"
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes since switch]
        self._round_robin: dict[str, int] = {}
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
        self._topics: set[str] = set()
        self._metadata_task: asyncio.Task[Any] | None = None
        self._metadata_topics: frozenset[str] = frozenset()
        self._metadata_at = 0.0
        self._metadata_retry_at = 0.0
        self._metadata_failures = 0
        self._metadata_wanted = False
        self._topic_errors: dict[str, int] = {}
        self._bump_task: asyncio.Task[None] | None = None
        self._memory_waiters: deque[asyncio.Future[None]] = deque()
        # Delivery callbacks (callables given as waiters) are handed to this sink in one
        # list per batch; the default runs them right away on the loop.
        self._callback_sink: Callable[
            [list[tuple[Any, BaseException | None, RecordMetadata]]], None
        ] = _run_callbacks
        # transactions
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = int(transaction_timeout_ms)
        self._txn: TransactionState | None = None
        self._txn_client: TransactionCoordinatorClient | None = None
        self._txn_adding: asyncio.Task[None] | None = None
        if transactional_id is not None:
            self._txn = TransactionState(transactional_id)
            self._txn_client = TransactionCoordinatorClient(self._cluster, transactional_id, self._backoff)
            self._acc.transactional = True
            self._acc.txn_partitions = set()

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
        self._metadata_at = self._now_ms()
        if self.idempotent and self._txn is None:  # transactional: init_transactions() does it
            try:
                pid, epoch = await self._init_producer_id()
            except UnsupportedApi:
                if self._explicit_idempotence:
                    raise
                log.warning("the broker does not support InitProducerId: idempotence is off")
                self.idempotent = self._acc.idempotent = False
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
            self._metadata_task,
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
            if key is None and self._sticky_unkeyed:
                sticky = self._sticky.get(topic)
                if sticky is None or sticky[1] >= self.batch_size or sticky[0] not in leaders:
                    sticky = self._new_sticky(topic, sticky, leaders)
                sticky[1] += size
                partition = sticky[0]
            else:
                partition = self._choose_partition(topic, key, len(leaders))
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
                await self._wait_for_topic(topic, partition, deadline)
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

    # ------------------------------------------------------------------ partitioning

    def _choose_partition(self, topic: str, key: bytes | None, count: int) -> int:
        """Partition for a record without an explicit one (sticky unkeyed handled inline)."""
        if self._custom_partitioner is not None:
            partition = int(self._custom_partitioner(topic, key, count))
            if not 0 <= partition < count:
                raise ValueError(
                    f"partitioner returned {partition} for a topic of {count} partitions"
                )
            return partition
        name = self._partitioner_name
        if name == "random":
            return random.randrange(count)
        if name == "round_robin":
            n = self._round_robin.get(topic, -1) + 1
            self._round_robin[topic] = n
            return n % count
        # murmur2 (Java's default for keyed records); "murmur2" maps null keys like b"".
        return (murmur2(key if key is not None else b"") & 0x7FFFFFFF) % count

    def _new_sticky(self, topic: str, old: list[int] | None, leaders: dict[int, int]) -> list[int]:
        """Sticky partitioning (KIP-480/794): unkeyed records stay on one partition for
        about batch_size bytes, then move to another one that has a leader."""
        previous = -1 if old is None else old[0]
        available = [p for p, leader in leaders.items() if leader >= 0 and p != previous]
        if not available:
            available = [p for p in leaders if p != previous] or list(leaders) or [0]
        sticky = self._sticky[topic] = [random.choice(available), 0]
        return sticky

    # ------------------------------------------------------------------ metadata

    def _now_ms(self) -> float:
        return _monotonic() * 1000

    def _get_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise ProducerError("the producer is not started: call `await producer.start()`")
        return self._loop

    def _leader_of(self, topic: str, partition: int) -> int:
        info = self._cluster.topics.get(topic)
        if info is None:
            return -1
        return info.leaders.get(partition, -1)

    async def _refresh_metadata(self, extra: str | None = None) -> None:
        """One shared metadata refresh for every topic in use (plus ``extra``)."""
        if extra is not None:
            self._topics.add(extra)
        task = self._metadata_task
        if (
            task is not None
            and not task.done()
            and (extra is None or extra in self._metadata_topics)
        ):
            await asyncio.shield(task)
            return
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
        topics = frozenset(self._topics)
        self._metadata_topics = topics
        task = self._get_loop().create_task(self._fetch_metadata(topics))
        self._metadata_task = task
        try:
            await asyncio.shield(task)
            self._metadata_at = self._now_ms()
            self._metadata_failures = 0
        finally:
            self._wake()

    async def _wait_for_topic(self, topic: str, partition: int | None, deadline: float) -> None:
        """Refresh metadata until ``topic`` (and ``partition``) is known, with backoff.

        A topic the brokers keep reporting as unknown for topic_metadata_propagation_max_ms
        fails with UNKNOWN_TOPIC_OR_PARTITION; other retriable trouble waits until max_block_ms.
        """
        loop = self._get_loop()
        first_unknown: float | None = None
        attempt = 0
        last = ""
        refreshed = False
        while True:
            info = self._cluster.topics.get(topic)
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
                await self._refresh_metadata(topic)
                refreshed = True
            except (ConnectionError, OSError) as exc:
                last = str(exc)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last = str(exc)
            else:
                info = self._cluster.topics.get(topic)
                if info is not None and info.leaders:
                    continue
                code = self._last_topic_error(topic)
                last = error_name(code) if code else "the topic has no partitions yet"
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                now = loop.time()
                first_unknown = now if first_unknown is None else first_unknown
                if (now - first_unknown) * 1000 >= self.topic_propagation_ms:
                    raise KafkaError(
                        code, f"topic {topic!r} does not exist (and the broker did not create it)"
                    )
            elif code and not is_retriable(code):
                raise KafkaError(code, f"cannot produce to topic {topic!r}: {error_name(code)}")
            if loop.time() >= deadline:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"topic {topic!r} not present in metadata after {self.max_block_ms:.0f} ms ({last})",
                )
            await asyncio.sleep(
                min(self._backoff.delay_s(attempt), max(0.0, deadline - loop.time()))
            )
            attempt += 1

    async def _fetch_metadata(self, topics: frozenset[str]) -> None:
        result = await self._cluster.refresh_metadata(sorted(topics), allow_auto_create=True)
        # Cluster drops topics with errors from its cache; keep their codes for send().
        for name, info in result.items():
            if info.error_code:
                self._topic_errors[name] = info.error_code
            else:
                self._topic_errors.pop(name, None)

    def _last_topic_error(self, topic: str) -> int:
        return self._topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def _background_metadata(self, now: float) -> float:
        """Start a refresh when wanted and not backing off; returns when to look again."""
        task = self._metadata_task
        if task is not None and not task.done():
            return float("inf")  # its completion wakes the sender
        if now < self._metadata_retry_at:
            return self._metadata_retry_at
        self._metadata_wanted = False
        self._spawn(self._metadata_refresh_bg())
        return float("inf")

    async def _metadata_refresh_bg(self) -> None:
        try:
            await self._refresh_metadata()
        except Exception as exc:
            self._metadata_failures += 1
            delay = self._backoff.delay_ms(self._metadata_failures - 1)
            self._metadata_retry_at = self._now_ms() + delay
            log.debug("metadata refresh failed (retrying in %.0f ms): %s", delay, exc)
        else:
            self._metadata_retry_at = self._now_ms() + self._backoff.initial_ms

    # ------------------------------------------------------------------ producer id

    async def _init_producer_id(self, *, bump: bool = False) -> tuple[int, int]:
        async def attempt() -> tuple[int, int]:
            conn = await self._cluster.any_connection()
            version = conn.version_for(INIT_PRODUCER_ID)
            request = InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=_INT32_MAX
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

    # ------------------------------------------------------------------ transactions

    def _transactional(self, what: str) -> tuple[TransactionState, TransactionCoordinatorClient]:
        if self._txn is None or self._txn_client is None:
            raise ProducerError(f"{what} needs a transactional producer (set transactional_id)")
        if not self._started:
            raise ProducerError("the producer is not started: call `await producer.start()`")
        return self._txn, self._txn_client

    def _txn_timeout_s(self, timeout: float | None) -> float:
        return self.max_block_ms / 1000 if timeout is None else timeout

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id: a new producer id/epoch, fencing any older producer
        with the same id (its unfinished transaction is aborted first)."""
        txn, client = self._transactional("init_transactions")
        txn.transition(TxnState.INITIALIZING)
        tid, timeout_ms = self.transactional_id, self.transaction_timeout_ms

        def build(version: int) -> InitProducerIdRequest:
            return InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms)

        response = await client.call(
            INIT_PRODUCER_ID, build, lambda r: r.error_code, what="InitProducerId",
            timeout_s=self._txn_timeout_s(timeout),
        )
        if response.error_code:
            raise txn.fail(classify(response.error_code, f"init_transactions for {tid!r}"))
        self._acc.reset_producer(int(response.producer_id), int(response.producer_epoch))
        txn.transition(TxnState.READY)
        log.info("transactional id %s: producer id %s epoch %s", tid, response.producer_id, response.producer_epoch)

    def begin_transaction(self) -> None:
        txn, _client = self._transactional("begin_transaction")
        txn.require(TxnState.READY, what="begin_transaction")
        txn.transition(TxnState.IN_TRANSACTION)
        self._acc.txn_partitions = set()

    async def _add_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for partitions with queued batches; they may be sent after it."""
        txn, client = self._transactional("send")
        pid, epoch = self._acc.producer_id, self._acc.producer_epoch
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)

        def build(version: int) -> AddPartitionsToTxnRequest:
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )

        def first_error(response: Any) -> int:
            for topic in response.results_by_topic_v3_and_below:
                for p in topic.results_by_partition:
                    if p.partition_error_code and p.partition_error_code != ErrorCode.OPERATION_NOT_ATTEMPTED:
                        return int(p.partition_error_code)
            return ErrorCode.NONE

        try:
            response = await client.call(
                ADD_PARTITIONS_TO_TXN, build, first_error, what="AddPartitionsToTxn",
                timeout_s=self.delivery_timeout_ms / 1000,
                max_version=CLIENT_ADD_PARTITIONS_MAX_VERSION,
            )
            error = first_error(response)
            if error:
                raise classify(error, f"adding {sorted(partitions)} to the transaction")
            gate = self._acc.txn_partitions
            if gate is not None:
                gate.update(partitions)
            txn.partitions.update(partitions)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = txn.fail(exc if isinstance(exc, KafkaError) else KafkaError(ErrorCode.REQUEST_TIMED_OUT, str(exc)))
            log.warning("transactional id %s: %s", self.transactional_id, failure)
            # Every queued batch fails with it: the transaction can only be aborted now
            # (the Java client fails them the same way).
            for batch in self._acc.abort_all():
                self._finish(batch, failure)
        finally:
            self._txn_adding = None
            self._wake()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets ({(topic, partition): next offset to read})
        as part of the transaction: visible to the group only if the transaction commits."""
        txn, client = self._transactional("send_offsets_to_transaction")
        txn.require(TxnState.IN_TRANSACTION, what="send_offsets_to_transaction")
        pid, epoch = self._acc.producer_id, self._acc.producer_epoch
        group = group_metadata.group_id
        timeout_s = self._txn_timeout_s(timeout)
        try:
            response = await client.call(
                ADD_OFFSETS_TO_TXN,
                lambda v: AddOffsetsToTxnRequest(
                    transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, group_id=group
                ),
                lambda r: r.error_code,
                what="AddOffsetsToTxn",
                timeout_s=timeout_s,
            )
            if response.error_code:
                raise classify(response.error_code, f"adding group {group!r}'s offsets to the transaction")
            txn.offsets_added = True
            by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
            for (topic, partition), offset in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(
                    TxnOffsetCommitRequestPartition(
                        partition_index=partition, committed_offset=int(offset), committed_metadata=""
                    )
                )

            def build(version: int) -> TxnOffsetCommitRequest:
                return TxnOffsetCommitRequest(
                    transactional_id=self.transactional_id,
                    group_id=group,
                    producer_id=pid,
                    producer_epoch=epoch,
                    generation_id=group_metadata.generation_id,
                    member_id=group_metadata.member_id,
                    group_instance_id=group_metadata.group_instance_id,
                    topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                )

            def first_error(response: Any) -> int:
                for topic in response.topics:
                    for p in topic.partitions:
                        if p.error_code:
                            return int(p.error_code)
                return ErrorCode.NONE

            committed = await client.call(
                TXN_OFFSET_COMMIT, build, first_error, what="TxnOffsetCommit", timeout_s=timeout_s,
                key_type=KEY_TYPE_GROUP, key=group,
            )
            error = first_error(committed)
            if error:
                # A zombie member or a stale generation: abortable (Java's CommitFailedException).
                raise classify(error, f"committing group {group!r}'s offsets in the transaction", fenced_is_fatal=False)
        except TransactionError as exc:
            raise txn.fail(exc) from None
        except TimeoutError:
            raise
        except KafkaError as exc:
            raise txn.fail(exc) from None

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn). Raises the
        transaction's error if a record or the commit failed."""
        txn, _client = self._transactional("commit_transaction")
        txn.require(TxnState.IN_TRANSACTION, TxnState.COMMITTING, what="commit_transaction")
        txn.transition(TxnState.COMMITTING)
        await self.flush(self._txn_timeout_s(timeout))
        while self._txn_adding is not None:
            await asyncio.sleep(0.005)
        if txn.state is TxnState.ABORTABLE_ERROR or txn.state is TxnState.FATAL_ERROR:
            assert txn.error is not None
            raise txn.error
        await self._end_transaction(commit=True, timeout=timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail, what was written is aborted."""
        txn, _client = self._transactional("abort_transaction")
        txn.require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING, what="abort_transaction")
        txn.transition(TxnState.ABORTING)
        aborted = TransactionAbortedError()
        for batch in self._acc.abort_all():
            if batch.base_sequence >= 0:
                self._acc.request_bump()
            self._finish(batch, aborted)
        while self._txn_adding is not None:
            await asyncio.sleep(0.005)
        await self.flush(self._txn_timeout_s(timeout))  # what is in flight lands (and is aborted)
        await self._end_transaction(commit=False, timeout=timeout)
        if self._acc.bump_pending and txn.state is TxnState.READY:
            await self._bump_transactional_epoch(timeout)

    async def _end_transaction(self, *, commit: bool, timeout: float | None) -> None:
        txn, client = self._transactional("end_transaction")
        what = "commit_transaction" if commit else "abort_transaction"
        if txn.has_work:
            pid, epoch = self._acc.producer_id, self._acc.producer_epoch
            response = await client.call(
                END_TXN,
                lambda v: EndTxnRequest(
                    transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, committed=commit
                ),
                lambda r: r.error_code,
                what="EndTxn",
                timeout_s=self._txn_timeout_s(timeout),
            )
            if response.error_code:
                raise txn.fail(classify(response.error_code, what))
        txn.transition(TxnState.READY)
        self._acc.txn_partitions = set()

    async def _bump_transactional_epoch(self, timeout: float | None) -> None:
        """After aborting past a sequence gap: a new epoch (KIP-360) so sequences restart."""
        txn, client = self._transactional("abort_transaction")
        pid, epoch = self._acc.producer_id, self._acc.producer_epoch
        tid, timeout_ms = self.transactional_id, self.transaction_timeout_ms
        response = await client.call(
            INIT_PRODUCER_ID,
            lambda v: InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
            ),
            lambda r: r.error_code,
            what="InitProducerId",
            timeout_s=self._txn_timeout_s(timeout),
        )
        if response.error_code:
            raise txn.fail(classify(response.error_code, "bumping the epoch after an abort"))
        self._acc.reset_producer(int(response.producer_id), int(response.producer_epoch))

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
            self._finish(batch, self._timeout_error(batch))
        # An exhausted buffer: send everything now (the Java client does too).
        acc.exhausted = bool(self._memory_waiters)
        nodes, ready_at, unknown = acc.ready(now, self._leader_of)
        if acc.bump_pending and self._bump_task is None and acc.bump_ready() and self._txn is None:
            # (A transactional producer bumps its epoch when it aborts, through its coordinator.)
            self._bump_task = self._get_loop().create_task(self._bump_epoch())
        if self._txn is not None and self._txn_adding is None and acc.txn_partitions is not None:
            unregistered = acc.unregistered_partitions()
            if unregistered:
                self._txn_adding = self._spawn(self._add_partitions(unregistered))
        wake_at = ready_at
        if (
            unknown
            or self._metadata_wanted
            or (self._topics and now - self._metadata_at >= self.metadata_max_age_ms)
        ):
            wake_at = min(wake_at, self._background_metadata(now))
        elif self._topics:
            wake_at = min(wake_at, self._metadata_at + self.metadata_max_age_ms)
        for node in nodes:
            conn = self._node_connection(node, now)
            if conn is None:
                retry_at = self._node_retry_at.get(node, 0.0)
                if retry_at > now:
                    wake_at = min(wake_at, retry_at)
                continue
            while self._node_in_flight.get(node, 0) < self.max_in_flight:
                batches = acc.drain(node, now, self.max_request_size, self._leader_of)
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
            self._metadata_wanted = True
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
        self._metadata_wanted = True
        now = self._now_ms()
        if isinstance(exc, KafkaError):
            error: KafkaError = exc
        else:
            error = KafkaError(ErrorCode.NETWORK_EXCEPTION, f"connection lost: {exc}")
        for batch in batches:
            self._retry_or_fail(batch, error, now, fate_unknown=True)

    def _handle_response(self, batches: list[ProducerBatch], response: ProduceResponse) -> None:
        results: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            for part_response in topic.partition_responses:
                results[(topic.name, part_response.index)] = part_response
        now = self._now_ms()
        for batch in batches:
            part = results.get((batch.topic, batch.partition))
            if part is None:
                self._fail(
                    batch,
                    KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"the Produce response has no result for {batch.topic}-{batch.partition}",
                    ),
                )
                continue
            code = part.error_code
            if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._succeed(batch, part.base_offset, part.log_append_time_ms)
                continue
            message = part.error_message or None
            if part.record_errors:
                details = "; ".join(
                    f"record {e.batch_index}: {e.batch_index_error_message}"
                    for e in part.record_errors
                )
                message = f"{message or error_name(code)} ({details})"
            error = KafkaError(code, message)
            self._handle_error(batch, error, now)

    def _handle_error(self, batch: ProducerBatch, error: KafkaError, now: float) -> None:
        code = error.code
        acc = self._acc
        if self.idempotent and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            ps = acc.partition_state(batch.topic, batch.partition)
            expected = (
                ps is not None
                and not ps.gap
                and not acc.bump_pending
                and (batch.base_sequence == ps.acked_end)
            )
            if not expected:
                # An earlier batch of ours is missing: this one was not written. Retry it in
                # order (after a new epoch if there is a hole).
                self._retry_or_fail(batch, error, now, fate_unknown=False, count_attempt=False)
                return
            self._fail(
                batch,
                KafkaError(
                    code,
                    f"{error.message} (the broker rejected {batch.topic}-{batch.partition} sequence "
                    f"{batch.base_sequence}, which follows the last acknowledged batch: "
                    "acknowledged records may have been lost; continuing under a new producer epoch)",
                ),
            )
            return
        if self.idempotent and code == ErrorCode.UNKNOWN_PRODUCER_ID:
            acc.request_bump()
            self._retry_or_fail(batch, error, now, fate_unknown=False, count_attempt=False)
            return
        if (
            code in _TOO_LARGE
            and len(batch.records) > 1
            and not batch.fate_unknown
            and not self._stopping
        ):
            # Too big for the broker's max.message.bytes: retry as two halves (as the Java
            # client does), down to single records, which then fail with the error.
            first, second = acc.split(batch, now)
            log.info(
                "%s for %r: split into batches of %d and %d records",
                error_name(code),
                batch,
                len(first.records),
                len(second.records),
            )
            self._batch_done(batch)
            return
        if is_retriable(code) and code not in _NOT_RETRIED:
            self._metadata_wanted = True
            self._retry_or_fail(
                batch,
                error,
                now,
                # a timeout may have written it; a refusal proves nothing about earlier tries
                fate_unknown=True if code in _MAYBE_WRITTEN else None,
            )
            return
        self._fail(batch, error)

    def _retry_or_fail(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        now: float,
        *,
        fate_unknown: bool | None,
        count_attempt: bool = True,
    ) -> None:
        batch.last_error = error
        retries_used = batch.attempts - 1
        if self._stopping:
            self._fail(
                batch,
                ProducerClosedError("the producer was closed before the record was delivered"),
            )
        elif count_attempt and retries_used >= self.retries:
            self._fail(batch, error)
        elif now >= batch.created_ms + self.delivery_timeout_ms:
            self._acc.complete(batch, acked=False)
            self._finish(batch, self._timeout_error(batch))
        else:
            backoff = self._backoff.delay_ms(max(0, retries_used))
            log.debug("retrying %r in %.0f ms after %s", batch, backoff, error)
            self._acc.reenqueue(batch, now, backoff, fate_unknown=fate_unknown)

    def _timeout_error(self, batch: ProducerBatch) -> DeliveryTimeoutError:
        parts = [
            f"{len(batch.records)} record(s) for {batch.topic}-{batch.partition} not delivered "
            f"within delivery_timeout_ms={self.delivery_timeout_ms:.0f}"
        ]
        if batch.attempts:
            parts.append(f"after {batch.attempts} attempt(s)")
        if batch.last_error is not None:
            parts.append(f"last error: {batch.last_error}")
        if batch.fate_unknown:
            parts.append("the broker may or may not have written them")
        return DeliveryTimeoutError("; ".join(parts))

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


# --------------------------------------------------------------------------- sync Producer


class Producer:
    """Thread-safe blocking producer; an ``AIOProducer`` runs on its own loop thread.

    ``produce`` queues a record (from any thread) and returns at once; it blocks only
    while the topic's metadata is fetched or ``buffer_memory`` is full.

    Delivery callbacks ``on_delivery(err, metadata)`` (err is None on success; metadata
    is a RecordMetadata, offset -1 on failure) run, by default, on the thread that
    calls ``poll()`` or ``flush()`` - as in confluent-kafka, so callbacks never race
    with your code; call ``poll(0)`` regularly. With ``delivery_callbacks="background"``
    they run on the producer's own thread instead (keep them short and thread-safe).
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        *,
        delivery_callbacks: str = "poll",
        start_timeout: float | None = 30.0,
        **config: Any,
    ) -> None:
        if delivery_callbacks not in ("poll", "background"):
            raise ValueError("delivery_callbacks must be 'poll' or 'background'")
        self._callbacks: deque[tuple[Any, BaseException | None, RecordMetadata]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._close_lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=logs.run_as(str(config.get("client_id", "slipstream-producer")), lambda: self._run_loop(ready)),
            name="slipstream-producer",
            daemon=True,
        )
        self._thread.start()
        ready.wait()

        async def create() -> AIOProducer:
            producer = AIOProducer(bootstrap_servers, **config)
            if delivery_callbacks == "poll":
                producer._callback_sink = self._enqueue_callbacks
            try:
                return await producer.start()
            except BaseException:
                await producer.close()
                raise

        try:
            self._aio = asyncio.run_coroutine_threadsafe(create(), self._loop).result(start_timeout)
        except BaseException:
            self._stop_loop()
            raise

    def _run_loop(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(ready.set)
        try:
            self._loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _enqueue_callbacks(
        self, items: list[tuple[Any, BaseException | None, RecordMetadata]]
    ) -> None:
        with self._cond:
            self._callbacks.extend(items)
            self._cond.notify_all()

    @property
    def aio(self) -> AIOProducer:
        return self._aio

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        on_delivery: DeliveryCallback | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if on_delivery is not None and not callable(on_delivery):
            raise TypeError("on_delivery must be callable")
        aio = self._aio
        if aio.serializers.active:
            key, value = aio.serializers.apply(key, value)
        status = aio._try_append(
            topic, value, key, headers, partition, timestamp_ms, on_delivery, True, True
        )
        if status:
            self._not_on_producer_thread("a blocking produce")
            asyncio.run_coroutine_threadsafe(
                aio._append_slow(topic, value, key, headers, partition, timestamp_ms, on_delivery),
                self._loop,
            ).result()

    def poll(self, timeout: float | None = 0.0) -> int:
        """Run queued delivery callbacks on this thread; wait up to ``timeout`` s (None:
        forever) for the first one. Returns how many ran."""
        if not self._callbacks and timeout != 0:
            with self._cond:
                if not self._callbacks:
                    self._cond.wait(timeout)
        served = 0
        callbacks = self._callbacks
        while True:
            try:
                callback, error, metadata = callbacks.popleft()
            except IndexError:
                return served
            served += 1
            callback(error, metadata)

    def _not_on_producer_thread(self, what: str) -> None:
        if threading.current_thread() is self._thread:
            raise ProducerError(f"{what}() cannot be called from a delivery callback")

    def flush(self, timeout: float | None = None) -> int:
        """Deliver everything queued, running callbacks meanwhile; returns how many records
        are still undelivered (0 unless ``timeout`` s passed first)."""
        if self._closed:
            return 0
        self._not_on_producer_thread("flush")
        future = asyncio.run_coroutine_threadsafe(self._aio.flush(), self._loop)

        def notify(_: Any) -> None:
            with self._cond:
                self._cond.notify_all()

        future.add_done_callback(notify)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not future.done():
            self.poll(0)
            with self._cond:
                if future.done() or self._callbacks:
                    continue
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
        if not future.done():
            future.cancel()
        elif future.exception() is not None:
            log.debug("flush ended with %s", future.exception())
        self.poll(0)
        return len(self)

    # ---- transactions (see AIOProducer): blocking, delivery callbacks run meanwhile

    def _run_txn(self, what: str, coro: Any) -> None:
        self._not_on_producer_thread(what)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        while True:
            try:
                future.result(0.05)
                break
            except concurrent.futures.TimeoutError:
                self.poll(0)
        self.poll(0)

    def init_transactions(self, timeout: float | None = None) -> None:
        self._run_txn("init_transactions", self._aio.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._aio.begin_transaction()

    def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int], group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        self._run_txn("send_offsets_to_transaction", self._aio.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._run_txn("commit_transaction", self._aio.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._run_txn("abort_transaction", self._aio.abort_transaction(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Flush (at most ``timeout`` s), run the remaining callbacks, stop the thread."""
        self._not_on_producer_thread("close")
        with self._close_lock:
            if self._closed:
                return
            self.flush(timeout)
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._aio.close(0), self._loop).result(30)
        finally:
            self._stop_loop()
            self.poll(0)

    def __len__(self) -> int:
        return len(self._aio)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "AIOProducer",
    "BufferFullError",
    "ConsumerGroupMetadata",
    "DeliveryTimeoutError",
    "Producer",
    "ProducerClosedError",
    "ProducerError",
    "RecordMetadata",
    "TransactionError",
]
