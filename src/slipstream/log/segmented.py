"""A partition log as an ordered list of segments: the logic both stores share.

Offsets, rolling, reads across segment boundaries, timestamp lookups, DeleteRecords
and retention live here once; ``memory.MemorySegment`` and ``disk.segment.DiskSegment``
only store batches. Every segment holds contiguous offsets (an offset jump rolls), so
the log end offset is the last segment's next offset; compaction (``compaction.py``)
later leaves gaps between the batches of closed segments, which reads step over.
"""

from __future__ import annotations

import bisect
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Protocol, cast

from slipstream.log.api import AbortedTxn, AppendInfo, LogConfig, OffsetOutOfRange, ReadResult
from slipstream.log.policy import (
    SegmentStats,
    below_log_start_count,
    needs_roll,
    retention_count,
)
from slipstream.log.record_scan import (
    first_record_at_or_after,
    record_offsets_and_timestamps_or_batch,
)
from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
    set_base_offset,
    set_log_append_time,
)

Buffer = bytes | bytearray | memoryview

_INT32 = struct.Struct(">i")
_BATCH_LENGTH_OFFSET = 8  # after the base offset

# Below every real timestamp: timestamp_candidates() then yields every batch.
_ANY_TIMESTAMP = -(1 << 63)


class Segment(SegmentStats, Protocol):
    def append(self, batch: Buffer, header: BatchHeader, now_ms: int | None) -> None:
        """Store one batch whose base offset is this segment's next offset."""
        ...

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool, file_regions: bool = False
    ) -> tuple[Sequence[bytes | memoryview | FileRegion], int, bool]:
        """Whole batches from the first whose last offset is >= ``offset``, within
        ``max_bytes`` (one oversized batch allowed with ``min_one_batch``).
        Returns (chunks, size, reached_end): reached_end is true when nothing of this
        segment after the returned batches is left. Chunks are bytes unless
        ``file_regions`` lets a file-backed segment answer with a FileRegion."""
        ...

    def timestamp_candidates(self, timestamp_ms: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches with max_timestamp >= ``timestamp_ms``,
        in offset order, starting with the first one."""
        ...

    def batch_at(self, position: int, header: BatchHeader) -> bytes | memoryview:
        """The bytes of the batch at ``position`` (from timestamp_candidates)."""
        ...

    def max_timestamp_from(self, offset: int) -> int:
        """Largest max_timestamp among batches whose last offset is >= ``offset``."""
        ...

    @property
    def aborted(self) -> list[AbortedTxn]:
        """This segment's aborted-transaction index, in marker order (do not mutate)."""
        ...

    def add_aborted(self, txn: AbortedTxn) -> None: ...

    def seal(self) -> None:
        """The segment stops being the active one (disk: made durable)."""
        ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def delete(self) -> None: ...


class CompactionError(Exception):
    """A compaction pass that cannot go on (e.g. a damaged batch in a closed segment)."""


class BatchSource(Protocol):
    """One segment's batches as they were when a compaction pass was planned, readable on
    the pass's worker thread while the log goes on (and may drop the segment)."""

    name: str

    def batches(self) -> Iterator[tuple[BatchHeader, bytes | memoryview]]:
        """(header, batch) in offset order; CompactionError where the bytes are no batch."""
        ...


class CleanedSegment(Protocol):
    """A segment a compaction pass writes on its worker thread, installed later."""

    def add(self, batch: bytes | memoryview, header: BatchHeader) -> None: ...

    def add_aborted(self, txn: AbortedTxn) -> None: ...

    def finish(self) -> None:
        """Everything is written (disk: durable)."""
        ...

    def abandon(self) -> None: ...


class CompactionSpace(Protocol):
    """What a log kind gives a compaction pass (``compaction.py``): the batches it reads,
    the segments it writes, and how they replace the old ones."""

    def source(self, segment: Segment) -> BatchSource: ...

    def prepare(self) -> None:
        """Worker thread, before the first cleaned segment is made."""
        ...

    def new_segment(self, base_offset: int) -> CleanedSegment: ...

    def written(self, any_segment: bool) -> None:
        """Worker thread, after the last cleaned segment was finished."""
        ...

    def discard(self) -> None:
        """Drop whatever the pass staged (its segments were abandoned one by one)."""
        ...

    def obstacle(self) -> str | None:
        """Why cleaned segments cannot be installed now (the owner thread asks)."""
        ...

    def install(self, replacements: Sequence[tuple[Sequence[Segment], CleanedSegment]]) -> int:
        """Owner thread: each group of closed segments replaced by its cleaned segment.
        Returns the cleaned segments' total size. On a failure the space cleans up what
        it can (or leaves it for recovery) and raises."""
        ...


def _checked_header(batch: Buffer) -> BatchHeader:
    """The batch's header, after checking its length field matches its bytes."""
    _check_length(batch)
    return parse_header(memoryview(batch))


def _check_length(batch: Buffer) -> None:
    """That the batch's length field matches its bytes (read alone: ``append`` parses the
    header once, after stamping the offset)."""
    if len(batch) < HEADER_SIZE:
        raise ValueError(f"record batch of {len(batch)} bytes is shorter than its header")
    size = LOG_OVERHEAD + _INT32.unpack_from(batch, _BATCH_LENGTH_OFFSET)[0]
    if size != len(batch):
        raise ValueError(f"record batch length field says {size} bytes but {len(batch)} were given")


class SegmentedLog(ABC):
    """PartitionLog over segments; subclasses say how segments are made and persisted."""

    def __init__(self, config: LogConfig, segments: list[Segment], log_start_offset: int) -> None:
        if not segments:
            raise ValueError("a log needs at least one segment")
        self._config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._size = sum(s.size for s in segments)
        self._log_start = max(log_start_offset, segments[0].base_offset)

    # -- what subclasses provide ------------------------------------------------------

    @abstractmethod
    def _create_segment(self, base_offset: int) -> Segment: ...

    @abstractmethod
    def _persist_log_start(self) -> None:
        """Make a DeleteRecords log start durable before segments go."""

    @abstractmethod
    def _config_changed(self) -> None:
        """React to update_config (e.g. a new index interval for the active segment)."""

    @abstractmethod
    def compaction_space(self) -> CompactionSpace | None:
        """Where a compaction pass over this log reads and writes; None: no pass now."""

    # -- PartitionLog ------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The segments, oldest first (for diagnostics and tests)."""
        return tuple(self._segments)

    @property
    def config(self) -> LogConfig:
        return self._config

    def append(
        self, batches: Sequence[bytearray], *, now_ms: int, log_append_time: bool
    ) -> AppendInfo:
        if not batches:
            raise ValueError("append needs at least one record batch")
        for batch in batches:  # all or nothing: check every batch before writing any
            _check_length(batch)
        offset = self.log_end_offset
        base_offset = offset
        for batch in batches:
            set_base_offset(batch, offset)
            if log_append_time:
                set_log_append_time(batch, now_ms)
            header = parse_header(memoryview(batch))
            self._write(batch, header, now_ms)
            offset = header.next_offset
        return AppendInfo(
            base_offset=base_offset,
            last_offset=offset - 1,
            log_append_time_ms=now_ms if log_append_time else -1,
            log_start_offset=self._log_start,
        )

    def append_with_offsets(self, batches: Sequence[bytearray | bytes]) -> None:
        expected = self.log_end_offset
        headers = []
        for batch in batches:
            header = _checked_header(batch)
            if header.base_offset < expected:
                raise ValueError(
                    f"batch base offset {header.base_offset} is below the log end offset {expected}"
                )
            headers.append(header)
            expected = header.next_offset
        for batch, header in zip(batches, headers, strict=True):
            self._write(batch, header, None)

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True) -> ReadResult[bytes | memoryview]:
        # Segments answer bytes unless asked for regions.
        return cast(ReadResult[bytes | memoryview], self._read(offset, max_bytes, min_one_batch, False))

    def read_regions(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True
    ) -> ReadResult[bytes | memoryview | FileRegion]:
        return self._read(offset, max_bytes, min_one_batch, True)

    def _read(
        self, offset: int, max_bytes: int, min_one_batch: bool, file_regions: bool
    ) -> ReadResult[bytes | memoryview | FileRegion]:
        end = self.log_end_offset
        if offset < self._log_start or offset > end:
            raise OffsetOutOfRange(offset, self._log_start, end)
        chunks: list[bytes | memoryview | FileRegion] = []
        size = 0
        if offset < end:
            budget = max_bytes
            for segment in self._segments[self._segment_index(offset) :]:
                got, n, reached_end = segment.read(offset, budget, min_one_batch and size == 0, file_regions)
                chunks.extend(got)
                size += n
                budget -= n
                if not reached_end or budget <= 0:
                    break
        return ReadResult(chunks, size, self._log_start, end)

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        self._segments[-1].add_aborted(txn)

    def aborted_txns(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        found: list[AbortedTxn] = []
        if end_offset <= start_offset:
            return found
        # An entry sits with the segment that was active just before its marker was
        # appended (the append may roll): start one segment before start_offset's.
        for segment in self._segments[max(self._segment_index(start_offset) - 1, 0) :]:
            for txn in segment.aborted:
                if txn.last_offset >= start_offset and txn.first_offset < end_offset:
                    found.append(txn)
                if txn.last_stable_offset >= end_offset:
                    # Every transaction open at this abort started at or after its LSO,
                    # and later ones start after its marker: none can reach below.
                    return found
        return found

    def batch_headers(self) -> Iterator[BatchHeader]:
        """Every stored batch's header in offset order, reading headers only."""
        for segment in list(self._segments):
            for _, header in segment.timestamp_candidates(_ANY_TIMESTAMP):
                yield header

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        first = self._segment_index(self._log_start)
        return self._first_record_from(first, timestamp_ms, self._log_start)

    def max_timestamp(self) -> tuple[int, int] | None:
        found = self._max_record_from(self._log_start)
        if found is not None:
            return found
        first = self.read(self._log_start, 0)
        if not first.chunks:
            return None
        # The largest batch timestamp belonged to records below the log start, in the
        # batch that straddles it: compare that batch's visible records with the rest.
        chunk = first.chunks[0]
        header = parse_header(chunk)
        own = None
        for offset, ts in record_offsets_and_timestamps_or_batch(chunk, header):
            if offset >= self._log_start and (own is None or ts > own[1]):
                own = (offset, ts)
        rest = self._max_record_from(header.next_offset)
        if own is None or (rest is not None and rest[1] > own[1]):
            return rest
        return own

    def _max_record_from(self, offset: int) -> tuple[int, int] | None:
        """First record (>= log start) with the largest batch max timestamp among the
        batches whose last offset is >= ``offset``; None if no such record exists."""
        first = self._segment_index(offset)
        best = None
        best_index = first
        for i in range(first, len(self._segments)):
            segment = self._segments[i]
            if segment.size == 0:
                continue
            ts = segment.max_timestamp_from(offset) if i == first else segment.max_timestamp
            if best is None or ts > best:
                best, best_index = ts, i
        if best is None:
            return None
        return self._first_record_from(best_index, best, max(offset, self._log_start))

    def delete_records_before(self, offset: int) -> int:
        end = self.log_end_offset
        if offset < 0 or offset > end:
            raise OffsetOutOfRange(offset, self._log_start, end)
        if offset > self._log_start:
            self._log_start = offset
            self._persist_log_start()
            self._delete_leading(below_log_start_count(self._segments, offset))
        return self._log_start

    def enforce_retention(self, now_ms: int) -> int:
        return self._delete_leading(retention_count(self._config, self._segments, now_ms))

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        self._config_changed()

    def flush(self) -> None:
        self._segments[-1].flush()

    def close(self) -> None:
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        for segment in self._segments:
            segment.delete()

    # -- compaction (see compaction.py) ------------------------------------------------

    def find_segments(self, segments: Sequence[Segment]) -> int | None:
        """Where ``segments`` sit, in order and by identity, among the closed segments."""
        if not segments:
            return None
        for i, segment in enumerate(self._segments[:-1]):
            if segment is segments[0]:
                window = self._segments[i : i + len(segments)]
                closed = i + len(segments) < len(self._segments)
                if closed and all(a is b for a, b in zip(window, segments, strict=True)):
                    return i
                return None
        return None

    def replace_segments(self, old: Sequence[Segment], new: Segment) -> None:
        """Swap consecutive closed segments for one cleaned segment with the same base
        offset. Only the in-memory list changes: the caller has put the data in place
        and disposes of the old segments. The log start and end offsets do not move."""
        start = self.find_segments(old)
        if start is None or new.base_offset != old[0].base_offset:
            raise ValueError("replace_segments needs consecutive closed segments of this log")
        stop = start + len(old)
        self._segments[start:stop] = [new]
        self._bases[start:stop] = [new.base_offset]
        self._size += new.size - sum(s.size for s in old)

    # -- internals ---------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def _write(self, batch: Buffer, header: BatchHeader, now_ms: int | None) -> None:
        active = self._segments[-1]
        if active.size == 0 and header.base_offset != active.base_offset:
            self._replace_empty_active(header.base_offset)
        elif needs_roll(
            self._config,
            active,
            batch_size=header.size,
            base_offset=header.base_offset,
            last_offset=header.last_offset,
            now_ms=now_ms,
        ):
            self._roll(header.base_offset)
        self._segments[-1].append(batch, header, now_ms)
        self._size += header.size

    def _roll(self, base_offset: int) -> None:
        self._segments[-1].seal()
        self._segments.append(self._create_segment(base_offset))
        self._bases.append(base_offset)

    def _replace_empty_active(self, base_offset: int) -> None:
        # An offset jump into an empty active segment: start the segment at the jump.
        only_segment = len(self._segments) == 1
        self._segments.pop().delete()
        self._bases.pop()
        self._segments.append(self._create_segment(base_offset))
        self._bases.append(base_offset)
        if only_segment:
            self._log_start = base_offset

    def _delete_leading(self, count: int) -> int:
        if count <= 0:
            return 0
        if count >= len(self._segments):
            count = len(self._segments)
            if self._segments[-1].size == 0:
                count -= 1  # an empty active segment stays as it is
            else:
                self._roll(self.log_end_offset)
            if count == 0:
                return 0
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for segment in doomed:
            self._size -= segment.size
            segment.delete()
        self._log_start = max(self._log_start, self._segments[0].base_offset)
        return count

    def _first_record_from(
        self, first: int, timestamp_ms: int, start: int
    ) -> tuple[int, int] | None:
        for segment in self._segments[first:]:
            if segment.size == 0 or segment.max_timestamp < timestamp_ms:
                continue
            for position, header in segment.timestamp_candidates(timestamp_ms):
                if header.last_offset < start:
                    continue
                batch = segment.batch_at(position, header)
                found = first_record_at_or_after(batch, header, timestamp_ms, start)
                if found is not None:
                    return found
        return None
