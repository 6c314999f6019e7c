"""The partition-log interface the broker is written against.

Two implementations sit behind these protocols: ``memory.MemoryLogStore`` (tests, the
embedded fixture) and ``store.DiskLogStore`` (segment files with sparse indexes). One
conformance suite (``tests/unit/log``) runs against both.

Offsets: ``log_start_offset`` is the first offset a reader may ask for (it may fall inside
a batch after DeleteRecords); ``log_end_offset`` is the next offset to be assigned, which
on a single broker is also the high watermark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.record_batch import BatchHeader

Chunk = TypeVar("Chunk")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How a partition log rolls, indexes and retains its segments."""

    segment_bytes: int = 1 << 30  # roll when the active segment would exceed this
    segment_ms: int = 7 * 24 * 3600 * 1000  # roll by age of the active segment's first append
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1 = unlimited
    retention_bytes: int = -1  # -1 = unlimited; per partition
    index_interval_bytes: int = 4096  # sparse index density
    flush_policy: str = "none"  # reserved; the broker drives fsync via flush()


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where an append landed: its first and last offsets, and the log's start after it."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the batches were stamped LogAppendTime
    log_start_offset: int


@dataclass(slots=True)
class ReadResult(Generic[Chunk]):
    """Whole batches read from a partition log, with the log's bounds at the time."""

    # Each chunk holds one or more whole batches; chunks are in offset order and can be
    # written to a socket as they are (a FileRegion by splice or sendfile: see read_regions).
    chunks: list[Chunk]
    size: int  # total bytes in chunks
    log_start_offset: int
    log_end_offset: int  # = high watermark on a single broker


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the aborted-transaction index (Kafka's AbortedTxn).

    The aborted transaction's records lie in first_offset..last_offset (the ABORT
    marker's offset); ``last_stable_offset`` was the LSO right after the abort, which
    lets a lookup stop early (no later entry can start below it).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class OffsetOutOfRange(Exception):
    """A read or DeleteRecords offset outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogFenced(RuntimeError):
    """The log may no longer be written by this broker: another writer moved the
    partition in the database, or (a cluster) this broker's lease on it is gone."""


class PartitionLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        ...

    @property
    def size_bytes(self) -> int: ...

    def append(
        self, batches: Sequence[bytearray], *, now_ms: int, log_append_time: bool
    ) -> AppendInfo:
        """Assign consecutive offsets to already-validated batches and write them as-is.

        The base offset is stamped in place (and, with ``log_append_time``, the max
        timestamp and CRC). Nothing is decompressed. An empty sequence is a ValueError.
        """
        ...

    def append_with_offsets(self, batches: Sequence[bytearray | bytes]) -> None:
        """Append batches keeping their own base offsets (each >= log_end_offset).

        For recovery, replication-like and compaction uses. Offsets may jump forward;
        a jump starts a new segment so every segment holds contiguous offsets.
        """
        ...

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True) -> ReadResult[bytes | memoryview]:
        """Whole batches, starting with the first one whose last offset is >= ``offset``.

        At most ``max_bytes`` bytes, except that with ``min_one_batch`` a first batch
        larger than ``max_bytes`` is returned alone. ``offset == log_end_offset`` gives
        an empty result; outside [log_start_offset, log_end_offset] raises OffsetOutOfRange.
        """
        ...

    def read_regions(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True
    ) -> ReadResult[bytes | memoryview | FileRegion]:
        """``read``, except that a disk log answers a large enough span of a segment
        file as a ``FileRegion`` instead of its bytes, for a writer that sends it with
        splice or sendfile. The region stays readable while held, whatever happens to its segment."""
        ...

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """Enter an aborted transaction in the index, just BEFORE its ABORT marker is
        appended at ``txn.last_offset`` (== log_end_offset): a crash in between leaves
        an entry past the log end, which recovery drops; never a marker without entry.
        Disk: kept in the active segment's ``.txnindex``, made durable by ``flush``."""
        ...

    def aborted_txns(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, end_offset): last_offset
        >= start_offset and first_offset < end_offset, in marker order."""
        ...

    def batch_headers(self) -> Iterator[BatchHeader]:
        """Every stored batch's header in offset order (headers only; for rebuilding state)."""
        ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after log start whose timestamp
        is >= ``timestamp_ms`` (ListOffsets by time), or None if there is none.

        Record-exact: the batch is found with the time index, then its records are
        scanned (decompressing if needed; LogAppendTime batches give every record the
        batch's max timestamp). Should a batch's records be unreadable, the answer falls
        back to that batch: (first offset >= log start, batch max timestamp).
        """
        ...

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp at or
        after log start (ListOffsets -3), or None for an empty log."""
        ...

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start to ``offset`` (never backwards) and delete
        the segments wholly below it; returns the new log start offset.
        ``offset`` outside [0, log_end_offset] raises OffsetOutOfRange."""
        ...

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the oldest segments past retention_ms / retention_bytes; returns how many.

        Like Kafka, the active segment goes too when it is itself past retention (a new
        empty segment is rolled first, so the log start becomes the log end).
        """
        ...

    def update_config(self, config: LogConfig) -> None: ...

    def flush(self) -> None:
        """fsync data appended so far (no-op in memory).

        May run on a worker thread while the event loop keeps appending (group
        commit); appends that race with it are covered by the next flush.
        """
        ...

    def close(self) -> None: ...

    def delete(self) -> None:
        """Close and remove everything the log stored."""
        ...


@runtime_checkable
class SharedCommitLog(Protocol):
    """A log whose ``flush`` commits what every log of its store queued, in one
    transaction (postgres). A group-commit round then flushes each such log only if
    the round's writes to it are not committed yet: one commit per round, not one per
    log while appends keep arriving."""

    @property
    def queued_writes(self) -> int:
        """How many writes were queued so far (a running count)."""
        ...

    @property
    def committed_writes(self) -> int:
        """How many of the first ``queued_writes`` are committed."""
        ...


class LogStore(Protocol):
    def open(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """Create the partition's log, or recover it from what was stored before."""
        ...

    def remove(self, topic: str, partition: int) -> None: ...

    def existing(self) -> list[tuple[str, int]]:
        """Partitions found in storage (sorted)."""
        ...

    def close(self) -> None: ...
