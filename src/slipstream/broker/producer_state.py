"""Idempotent producers: per-partition sequence checks (ids are handed out by producer_ids.py).

Kafka keeps, per producer id and partition, the epoch and the last five batches
(first/last sequence and offsets) so a retried batch is recognised and answered
with its original offset instead of being written twice. After a restart the
state is rebuilt from the batch headers in the log (see :meth:`rebuild`), so a
retry that straddles the restart is still recognised.

Transactions: a transactional batch opens the producer's transaction on the partition
at its first offset (if none is open); a COMMIT/ABORT marker closes it. The earliest
open transaction bounds the last stable offset (LSO) that read_committed readers see.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import BatchHeader

CACHED_BATCHES = 5
_SEQ_MOD = 1 << 31


@dataclass(slots=True)
class _BatchMeta:
    """One of a producer's last batches: its sequence range and offsets."""

    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class _ProducerEntry:
    """A producer id's epoch and last batches on one partition."""

    epoch: int
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    # Max timestamp of the producer's last batch (DescribeProducers' LastTimestamp).
    last_timestamp: int = -1
    # The coordinator epoch of the last marker (a marker from an older one is fenced).
    coordinator_epoch: int = -1
    # First offset of the producer's open transaction on this partition; -1 when none.
    txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """A producer's state on a partition, as DescribeProducers reports it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just closed: its data spans first_offset..last_offset
    (the marker's offset); ``last_stable_offset`` is the LSO right after it closed."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    aborted: bool


class PartitionProducerState:
    """Sequence bookkeeping for one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}
        # producer id -> first offset of its open transaction. Transactions open at
        # increasing offsets and dicts keep insertion order: the first is the earliest.
        self._open_txns: dict[int, int] = {}

    def rebuild(self, stored: Iterable[BatchHeader]) -> int:
        """Replay the headers of the batches already in the log; returns the producers seen.

        Kafka rebuilds from snapshots plus the log tail; we have no snapshots and read
        every header once, when the partition is first used. A transaction without a
        marker in the log stays open.
        """
        for header in stored:
            if header.producer_id < 0:
                continue
            if header.is_control:
                self.record_marker(header.producer_id, header.producer_epoch, -1, header.base_offset, aborted=False)
            else:
                self.record(header, header.base_offset)
        return len(self._producers)

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction; None when none is open."""
        for first in self._open_txns.values():
            return first
        return None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def open_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of every open transaction, earliest first."""
        return list(self._open_txns.items())

    def open_transaction(self, producer_id: int) -> int | None:
        """First offset of the producer's open transaction, or None."""
        return self._open_txns.get(producer_id)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a COMMIT/ABORT marker before it is written (Kafka's checks)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker for producer {producer_id} carries epoch {producer_epoch}, older than "
                f"the current epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker for producer {producer_id} comes from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}",
            )

    def record_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int, *, aborted: bool
    ) -> CompletedTxn | None:
        """A marker was written at ``offset``: close the producer's open transaction.

        Returns the transaction it closed, or None if none was open (Kafka writes the
        marker anyway). A marker with a newer epoch makes that epoch current.
        """
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _ProducerEntry(producer_epoch)
        elif producer_epoch > entry.epoch:
            entry.epoch = producer_epoch
            entry.batches.clear()  # the new epoch starts its sequences at 0
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        completed = self.completion(producer_id, offset, aborted=aborted)
        self._open_txns.pop(producer_id, None)
        entry.txn_first_offset = -1
        return completed

    def completion(self, producer_id: int, offset: int, *, aborted: bool) -> CompletedTxn | None:
        """The transaction a marker at ``offset`` would close (None if none is open)."""
        first = self._open_txns.get(producer_id)
        if first is None:
            return None
        following = next((f for pid, f in self._open_txns.items() if pid != producer_id), None)
        lso = offset + 1 if following is None else following
        return CompletedTxn(producer_id, first, offset, lso, aborted)

    def check(self, header: BatchHeader) -> _BatchMeta | None:
        """Validate a batch before append; returns the cached original if it is a duplicate.

        Raises KafkaError with the sequence error Kafka would answer.
        """
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self._producers.get(pid)
        seq = header.base_sequence
        if entry is None:
            # Unknown producer (new, or its state predates a restart): accept from here.
            return None
        if header.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {pid} epoch {header.producer_epoch} is older than current epoch {entry.epoch}",
            )
        if entry.txn_first_offset >= 0 and not header.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {pid} sent a non-transactional batch while its transaction (from offset "
                f"{entry.txn_first_offset}) is open",
            )
        if header.producer_epoch > entry.epoch:
            if seq != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid} bumped its epoch to {header.producer_epoch} but started at sequence {seq}, not 0",
                )
            return None
        last_seq = header.last_sequence
        for cached in entry.batches:
            if cached.first_seq == seq and cached.last_seq == last_seq:
                return cached
        expected = (entry.last_seq + 1) % _SEQ_MOD
        if seq == expected:
            return None
        if entry.batches and _seq_before(seq, entry.batches[0].first_seq):
            raise KafkaError(
                ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                f"producer {pid} sequence {seq} is older than the batches the broker still remembers",
            )
        raise KafkaError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {pid} sent sequence {seq}, expected {expected}",
        )

    def record(self, header: BatchHeader, base_offset: int) -> None:
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = _ProducerEntry(header.producer_epoch)
        elif header.producer_epoch > entry.epoch:
            # An epoch bump forgets the sequences, not the open transaction (as Kafka).
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = base_offset
            self._open_txns[pid] = base_offset
        entry.batches.append(
            _BatchMeta(
                header.base_sequence,
                header.last_sequence,
                base_offset,
                base_offset + header.last_offset_delta,
            )
        )
        entry.last_timestamp = header.max_timestamp

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this partition remembers, by producer id."""
        return [
            ActiveProducer(
                pid, entry.epoch, entry.last_seq, entry.last_timestamp, entry.coordinator_epoch,
                entry.txn_first_offset,
            )
            for pid, entry in sorted(self._producers.items())
        ]


def _seq_before(a: int, b: int) -> bool:
    """a precedes b in the wrapping int31 sequence space."""
    return a != b and (b - a) % _SEQ_MOD < _SEQ_MOD // 2
