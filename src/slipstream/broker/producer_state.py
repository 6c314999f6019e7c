"""Idempotent producers: producer id allocation and per-partition sequence checks.

Kafka keeps, per producer id and partition, the epoch and the last five batches
(first/last sequence and offsets) so a retried batch is recognised and answered
with its original offset instead of being written twice. After a restart the
state is rebuilt from the batch headers in the log (see :meth:`rebuild`), so a
retry that straddles the restart is still recognised.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import BatchHeader

CACHED_BATCHES = 5
_ID_BLOCK = 1000
_SEQ_MOD = 1 << 31


@dataclass(slots=True)
class _BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    # Max timestamp of the producer's last batch (DescribeProducers' LastTimestamp).
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int


class ProducerIdAllocator:
    """Hands out unique producer ids; blocks are persisted so ids never repeat after a restart."""

    def __init__(self, state_file: Path | None) -> None:
        self._path = state_file
        self._next = 0
        self._block_end = 0
        if state_file is not None and state_file.exists():
            self._next = self._block_end = int(state_file.read_text().strip() or 0)

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + _ID_BLOCK
            if self._path is not None:
                tmp = self._path.with_suffix(".tmp")
                tmp.write_text(str(self._block_end))
                os.replace(tmp, self._path)
        pid = self._next
        self._next += 1
        return pid


class PartitionProducerState:
    """Sequence bookkeeping for one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}

    def rebuild(self, stored: Iterable[BatchHeader]) -> int:
        """Replay the headers of the batches already in the log; returns the producers seen.

        Kafka rebuilds from snapshots plus the log tail; we have no snapshots and read
        every header once, when the partition first sees an idempotent batch.
        """
        for header in stored:
            if header.producer_id >= 0 and not header.is_control:
                self.record(header, header.base_offset)
        return len(self._producers)

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
        if entry is None or header.producer_epoch > entry.epoch:
            entry = self._producers[pid] = _ProducerEntry(header.producer_epoch)
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
            ActiveProducer(pid, entry.epoch, entry.last_seq, entry.last_timestamp)
            for pid, entry in sorted(self._producers.items())
        ]


def _seq_before(a: int, b: int) -> bool:
    """a precedes b in the wrapping int31 sequence space."""
    return a != b and (b - a) % _SEQ_MOD < _SEQ_MOD // 2
