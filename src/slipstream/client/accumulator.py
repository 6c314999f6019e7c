"""The producer's record accumulator: per-partition batches, and the rules for draining them.

No I/O and no clock of its own: every method that depends on time takes ``now_ms``
(a monotonic millisecond clock the caller owns). One ``threading.Lock`` guards the
queues so the synchronous ``Producer`` facade can append from application threads
while the sender drains on the event loop thread; under asyncio alone the lock is
never contended.

Records are kept as tuples ``(key, value, headers, timestamp_ms)`` in the open
batch; the batch bytes (batch_encoding.py: magic 2, optionally compressed, CRC32C)
are built once, when the batch is first drained, and reused unchanged for every retry.

Ordering and idempotence (the rules ``ready``/``drain`` enforce):

* A batch gets its producer id, epoch and base sequence when it is first drained;
  sequences per partition increase by the batch's record count (mod 2**31).
* Up to ``max_in_flight_per_partition`` (<= 5, the number of batches a Kafka broker
  remembers per producer) fresh batches of one partition may be in flight at once;
  TCP keeps them in order on the single connection to the leader.
* A batch that must be retried goes back to the *front* of its partition's queue,
  in creation order among other retries, and a retry is only sent when nothing else
  of that partition is in flight, one at a time, with the same bytes and sequence.
  Later batches that the broker rejected with OUT_OF_ORDER_SEQUENCE_NUMBER because
  an earlier one was missing are retried the same way, so the log order is always
  the send order, and a resend of a batch that was in fact written is answered by
  the broker as a duplicate (with its original offset), never written twice.
* When the producer id must change (a sequence gap the broker will not accept,
  UNKNOWN_PRODUCER_ID, or a sequenced batch that failed or expired locally), the
  accumulator enters ``bump_pending``: fresh batches stop, retries whose fate is
  unknown (the connection died before the answer) are resent under the old epoch
  until the broker tells what happened to them, and once nothing is in flight the
  sender obtains a new id/epoch and ``reset_producer`` renumbers every unsent or
  known-unwritten batch from sequence 0 (patching the batch header and its CRC).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol import compression as _compression
from ..protocol.record_batch import HEADER_SIZE, set_producer_state
from .batch_encoding import SEQ_MOD, RecordTuple, encode_batch

# append() results
NO_MEMORY = -1
APPENDED = 0
NEW_BATCH = 1
BATCH_FULL = 2

LeaderOf = Callable[[str, int], int]


class ProducerBatch:
    """Records for one partition, sent (and retried) as one unit."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "created_ms",
        "done",
        "done_future",
        "fate_unknown",
        "full",
        "in_flight",
        "last_error",
        "order",
        "partition",
        "payload",
        "pieces",
        "producer_epoch",
        "producer_id",
        "records",
        "retry_at_ms",
        "size",
        "span",
        "topic",
        "waiters",
    )

    def __init__(self, topic: str, partition: int, created_ms: float, order: float) -> None:
        self.topic = topic
        self.partition = partition
        self.created_ms = created_ms
        # Creation order within the partition; the halves of a split batch get
        # order/order + span/2, so they sort between it and the next one.
        self.order: float = order
        self.span = 1.0
        self.pieces: tuple[ProducerBatch, ProducerBatch] | None = None
        self.records: list[RecordTuple] = []
        # One entry per record: None, an asyncio.Future or a callable(err, metadata).
        self.waiters: list[Any] = []
        self.size = HEADER_SIZE
        self.full = False
        self.payload: bytearray | None = None
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.attempts = 0
        self.retry_at_ms = 0.0
        # The last attempt ended without an answer: the broker may or may not have it.
        self.fate_unknown = False
        self.last_error: BaseException | None = None
        self.in_flight = False
        self.done = False
        self.done_future: Any = None  # created by flush() when it needs to wait

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + len(self.records) - 1) % SEQ_MOD

    def build(self, compression: int, transactional: bool = False) -> bytearray:
        if self.payload is None:
            self.payload = encode_batch(
                self.records,
                compression=compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                transactional=transactional,
            )
        return self.payload

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, records={len(self.records)}, "
            f"seq={self.base_sequence}, attempts={self.attempts})"
        )


class PartitionState:
    __slots__ = (
        "acked_any",
        "acked_end",
        "batches",
        "gap",
        "in_flight",
        "next_order",
        "next_sequence",
        "open",
        "partition",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.batches: deque[ProducerBatch] = deque()
        # The batch records are appended to (the last one queued, never sent), if any.
        self.open: ProducerBatch | None = None
        self.in_flight = 0
        self.next_order = 0
        self.next_sequence = 0
        # Sequence after the last batch the broker acknowledged (under this epoch).
        self.acked_end = 0
        # Until the broker acknowledged a batch of this partition under the current
        # producer id it keeps no state for us and would accept any sequence: only one
        # fresh batch may be in flight then, or a failed first batch could be overtaken.
        self.acked_any = False
        # A sequenced batch failed or expired here: the broker will see a hole.
        self.gap = False


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        buffer_memory: int,
        compression: int = _compression.NONE,
        idempotent: bool = True,
        max_in_flight_per_partition: int = 5,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.idempotent = idempotent
        self.max_in_flight_per_partition = max_in_flight_per_partition
        self.lock = threading.Lock()
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.buffer_used = 0
        self.flushing = 0
        self.closing = False
        # Someone waits for buffer memory: send every batch now, lingering or not.
        self.exhausted = False
        self.producer_id = -1
        self.producer_epoch = -1
        self.bump_pending = False
        self._drain_start = 0
        # Transactional producers: batches are built transactional, and a partition's
        # batches wait until the partition is part of the transaction (None: no gate).
        self.transactional = False
        self.txn_partitions: set[tuple[str, int]] | None = None

    # ------------------------------------------------------------------ append

    def append(
        self,
        topic: str,
        partition: int,
        record: RecordTuple,
        size: int,
        waiter: Any,
        now_ms: float,
    ) -> int:
        """Add a record to its partition's open batch. Returns NO_MEMORY (nothing added),
        APPENDED, NEW_BATCH (a batch was opened: arm its linger timer) or BATCH_FULL
        (a batch is complete: send now)."""
        with self.lock:
            used = self.buffer_used + size
            if used > self.buffer_memory and self.buffer_used > 0:
                return NO_MEMORY
            ps = self.partitions.get((topic, partition))
            if ps is not None:
                batch = ps.open
                if batch is not None:
                    total = batch.size + size
                    if total < self.batch_size:  # the common case: room in the open batch
                        batch.records.append(record)
                        batch.waiters.append(waiter)
                        batch.size = total
                        self.buffer_used = used
                        return APPENDED
            else:
                ps = self.partitions[(topic, partition)] = PartitionState(topic, partition)
            result = APPENDED
            batch = ps.open
            if batch is not None and batch.size + size > self.batch_size:
                batch.full = True
                ps.open = batch = None
                result = BATCH_FULL
            if batch is None:
                batch = ps.open = ProducerBatch(topic, partition, now_ms, ps.next_order)
                ps.next_order += 1
                ps.batches.append(batch)
                self.incomplete.add(batch)
                if result == APPENDED:
                    result = NEW_BATCH
            batch.records.append(record)
            batch.waiters.append(waiter)
            batch.size += size
            self.buffer_used = used
            if batch.size >= self.batch_size:
                batch.full = True
                ps.open = None
                result = BATCH_FULL
            return result

    # ------------------------------------------------------------------ ready / drain

    def _head_status(self, ps: PartitionState, now_ms: float) -> float:
        """0: sendable now; > 0: the time it becomes sendable; -1: blocked until an event."""
        gate = self.txn_partitions
        if gate is not None and (ps.topic, ps.partition) not in gate:
            return -1
        head = ps.batches[0]
        if head.attempts:
            if ps.in_flight or (self.bump_pending and not head.fate_unknown):
                return -1
            return 0 if now_ms >= head.retry_at_ms else head.retry_at_ms
        if self.bump_pending or ps.in_flight >= (
            self.max_in_flight_per_partition if ps.acked_any or not self.idempotent else 1
        ):
            return -1
        if len(ps.batches) > 1 or head.full or self.flushing or self.closing or self.exhausted:
            return 0
        due = head.created_ms + self.linger_ms
        return 0 if now_ms >= due else due

    def ready(self, now_ms: float, leader_of: LeaderOf) -> tuple[set[int], float, bool]:
        """Nodes with something to send now; the next time (ms) anything else becomes
        sendable (inf if only events can unblock); whether some partition has no leader."""
        nodes: set[int] = set()
        next_ms = float("inf")
        unknown = False
        with self.lock:
            for ps in self.partitions.values():
                if not ps.batches:
                    continue
                status = self._head_status(ps, now_ms)
                if status < 0:
                    continue
                leader = leader_of(ps.topic, ps.partition)
                if leader < 0:
                    unknown = True
                    continue
                if status == 0:
                    nodes.add(leader)
                elif status < next_ms:
                    next_ms = status
        return nodes, next_ms, unknown

    def drain(
        self, node: int, now_ms: float, max_bytes: int, leader_of: LeaderOf
    ) -> list[ProducerBatch]:
        """Take at most one batch per partition led by ``node`` (about ``max_bytes`` in all,
        at least one batch), assigning sequences to fresh ones; then build their bytes."""
        out: list[ProducerBatch] = []
        with self.lock:
            parts = list(self.partitions.values())
            count = len(parts)
            if not count:
                return out
            start = self._drain_start % count
            self._drain_start = start + 1
            total = 0
            for i in range(count):
                ps = parts[(start + i) % count]
                if not ps.batches or leader_of(ps.topic, ps.partition) != node:
                    continue
                if self._head_status(ps, now_ms) != 0:
                    continue
                head = ps.batches[0]
                size = len(head.payload) if head.payload is not None else head.size
                if out and total + size > max_bytes:
                    break
                total += size
                ps.batches.popleft()
                head.full = True
                if ps.open is head:
                    ps.open = None
                if head.base_sequence < 0 and self.idempotent:
                    head.producer_id = self.producer_id
                    head.producer_epoch = self.producer_epoch
                    head.base_sequence = ps.next_sequence
                    ps.next_sequence = (ps.next_sequence + len(head.records)) % SEQ_MOD
                ps.in_flight += 1
                head.in_flight = True
                head.attempts += 1
                out.append(head)
        for batch in out:
            try:
                batch.build(self.compression, self.transactional)
            except Exception as exc:  # left without payload: the caller fails it
                batch.last_error = exc
        return out

    # ------------------------------------------------------------------ outcomes

    def _release(self, batch: ProducerBatch) -> None:
        batch.done = True
        self.incomplete.discard(batch)
        self.buffer_used -= batch.size - HEADER_SIZE

    def complete(self, batch: ProducerBatch, *, acked: bool) -> None:
        """An in-flight batch is finished: written (``acked``) or failed for good."""
        with self.lock:
            ps = self.partitions[(batch.topic, batch.partition)]
            ps.in_flight -= 1
            batch.in_flight = False
            if (
                batch.base_sequence >= 0
                and batch.producer_epoch == self.producer_epoch
                and (batch.producer_id == self.producer_id)
            ):
                if acked:
                    ps.acked_end = (batch.base_sequence + len(batch.records)) % SEQ_MOD
                    ps.acked_any = True
                else:
                    self._gap(ps)
            self._release(batch)

    def _gap(self, ps: PartitionState) -> None:
        ps.gap = True
        self.bump_pending = True

    def reenqueue(
        self,
        batch: ProducerBatch,
        now_ms: float,
        backoff_ms: float,
        *,
        fate_unknown: bool | None,
    ) -> None:
        """Put an in-flight batch back at the front of its queue, in creation order.

        ``fate_unknown``: True when this attempt got no answer (the broker may have the
        batch); False when the broker's answer proves the batch is not in its log (an
        out-of-order sequence or an unknown producer id); None when this attempt was
        refused but an earlier unanswered attempt may still have landed (keep the flag).
        """
        with self.lock:
            ps = self.partitions[(batch.topic, batch.partition)]
            ps.in_flight -= 1
            batch.in_flight = False
            batch.retry_at_ms = now_ms + backoff_ms
            if fate_unknown is not None:
                batch.fate_unknown = fate_unknown
            self._insert_retry(ps, batch)

    @staticmethod
    def _insert_retry(ps: PartitionState, batch: ProducerBatch) -> None:
        index = 0
        for existing in ps.batches:
            if not existing.attempts or existing.order > batch.order:
                break
            index += 1
        ps.batches.insert(index, batch)

    def split(self, batch: ProducerBatch, now_ms: float) -> tuple[ProducerBatch, ProducerBatch]:
        """Replace an in-flight batch the broker found too large by its two halves, queued
        for retry in its place; with idempotence they keep its sequence range."""
        with self.lock:
            ps = self.partitions[(batch.topic, batch.partition)]
            ps.in_flight -= 1
            batch.in_flight = False
            half = len(batch.records) // 2
            span = batch.span / 2
            first = ProducerBatch(batch.topic, batch.partition, batch.created_ms, batch.order)
            second = ProducerBatch(
                batch.topic, batch.partition, batch.created_ms, batch.order + span
            )
            payload = batch.size - HEADER_SIZE
            first_payload = payload * half // len(batch.records)
            for piece, lo, hi, size in (
                (first, 0, half, first_payload),
                (second, half, len(batch.records), payload - first_payload),
            ):
                piece.span = span
                piece.records = batch.records[lo:hi]
                piece.waiters = batch.waiters[lo:hi]
                piece.size = HEADER_SIZE + size
                piece.full = True
                piece.attempts = batch.attempts
                piece.retry_at_ms = now_ms
                piece.last_error = batch.last_error
                if batch.base_sequence >= 0:
                    piece.producer_id = batch.producer_id
                    piece.producer_epoch = batch.producer_epoch
                    piece.base_sequence = (batch.base_sequence + lo) % SEQ_MOD
                self.incomplete.add(piece)
            self._insert_retry(ps, first)
            self._insert_retry(ps, second)
            batch.done = True
            batch.pieces = (first, second)
            self.incomplete.discard(batch)
            return first, second

    def request_bump(self) -> None:
        with self.lock:
            self.bump_pending = True

    def expire(self, now_ms: float, delivery_timeout_ms: float) -> list[ProducerBatch]:
        """Remove queued batches older than the delivery timeout (oldest first per partition)."""
        expired: list[ProducerBatch] = []
        with self.lock:
            for ps in self.partitions.values():
                batches = ps.batches
                while batches and now_ms >= batches[0].created_ms + delivery_timeout_ms:
                    batch = batches.popleft()
                    if ps.open is batch:
                        ps.open = None
                    if batch.base_sequence >= 0:
                        self._gap(ps)
                    self._release(batch)
                    expired.append(batch)
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (the producer is closing without delivering them)."""
        aborted: list[ProducerBatch] = []
        with self.lock:
            for ps in self.partitions.values():
                ps.open = None
                while ps.batches:
                    batch = ps.batches.popleft()
                    self._release(batch)
                    aborted.append(batch)
        return aborted

    # ------------------------------------------------------------------ epoch bump

    def in_flight(self) -> int:
        return sum(ps.in_flight for ps in self.partitions.values())

    def bump_ready(self) -> bool:
        """Nothing in flight and no partition waiting to learn the fate of its head batch."""
        with self.lock:
            for ps in self.partitions.values():
                if ps.in_flight:
                    return False
                if ps.batches and ps.batches[0].attempts and ps.batches[0].fate_unknown:
                    return False
            return True

    def reset_producer(self, producer_id: int, producer_epoch: int) -> int:
        """Adopt a new producer id/epoch: renumber every queued sequenced batch from 0.

        Returns how many batches were renumbered."""
        renumbered = 0
        with self.lock:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self.bump_pending = False
            for ps in self.partitions.values():
                ps.next_sequence = 0
                ps.acked_end = 0
                ps.acked_any = False
                ps.gap = False
                for batch in ps.batches:
                    if batch.base_sequence < 0:
                        continue
                    batch.producer_id = producer_id
                    batch.producer_epoch = producer_epoch
                    batch.base_sequence = ps.next_sequence
                    batch.fate_unknown = False
                    ps.next_sequence = (ps.next_sequence + len(batch.records)) % SEQ_MOD
                    if batch.payload is not None:
                        set_producer_state(batch.payload, producer_id, producer_epoch, batch.base_sequence)
                    renumbered += 1
        return renumbered

    # ------------------------------------------------------------------ queries

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get((topic, partition))

    def pending_records(self) -> int:
        with self.lock:
            return sum(len(b.records) for b in self.incomplete)

    def unregistered_partitions(self) -> list[tuple[str, int]]:
        """Partitions with queued batches that are not yet part of the transaction."""
        gate = self.txn_partitions
        if gate is None:
            return []
        with self.lock:
            return [key for key, ps in self.partitions.items() if ps.batches and key not in gate]

    def snapshot_incomplete(self) -> Iterable[ProducerBatch]:
        with self.lock:
            return list(self.incomplete)
