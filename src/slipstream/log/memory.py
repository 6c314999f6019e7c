"""In-memory partition logs: the same segmented log, with segments held in lists.

Used by tests and the embedded broker fixture. Batches are copied once on append
(the caller's buffer may be reused) and handed out as the stored ``bytes`` objects.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Sequence

from slipstream.log.api import AbortedTxn, LogConfig
from slipstream.log.segmented import Buffer, CleanedSegment, Segment, SegmentedLog
from slipstream.protocol.record_batch import BatchHeader, parse_header


class MemorySegment:
    """Batches of one segment plus parallel arrays for bisecting by offset/size/time."""

    def __init__(self, base_offset: int) -> None:
        self._base = base_offset
        self._batches: list[bytes] = []
        self._next_offsets = array("q")
        self._ends = array("q")  # cumulative byte position after each batch
        self._max_timestamps = array("q")
        self._running_max = array("q")  # non-decreasing: bisect for timestamp lookups
        self.first_append_ms = -1
        self.last_append_ms = -1
        self._aborted: list[AbortedTxn] = []

    @property
    def aborted(self) -> list[AbortedTxn]:
        return self._aborted

    def add_aborted(self, txn: AbortedTxn) -> None:
        self._aborted.append(txn)

    @property
    def base_offset(self) -> int:
        return self._base

    @property
    def next_offset(self) -> int:
        return self._next_offsets[-1] if self._batches else self._base

    @property
    def size(self) -> int:
        return self._ends[-1] if self._batches else 0

    @property
    def max_timestamp(self) -> int:
        return self._running_max[-1] if self._batches else -1

    def append(self, batch: Buffer, header: BatchHeader, now_ms: int | None) -> None:
        size, running_max = self.size, max(self.max_timestamp, header.max_timestamp)
        self._batches.append(bytes(batch))
        self._next_offsets.append(header.next_offset)
        self._ends.append(size + header.size)
        self._max_timestamps.append(header.max_timestamp)
        self._running_max.append(running_max)
        if now_ms is not None:
            if self.first_append_ms < 0:
                self.first_append_ms = now_ms
            self.last_append_ms = now_ms

    def last_batch(self) -> bytes:
        """The stored bytes of the newest batch (no copy)."""
        return self._batches[-1]

    def batches(self) -> list[bytes]:
        """The stored batches in offset order: a copy of the list, safe to walk on another
        thread while this segment grows or is deleted (compaction)."""
        return list(self._batches)

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool, file_regions: bool = False
    ) -> tuple[list[bytes | memoryview], int, bool]:
        count = len(self._batches)
        first = bisect.bisect_right(self._next_offsets, offset)
        if first >= count:
            return [], 0, True
        start = self._ends[first - 1] if first else 0
        stop = bisect.bisect_right(self._ends, start + max_bytes)
        if stop <= first:
            if not min_one_batch:
                return [], 0, False
            stop = first + 1
        chunks: list[bytes | memoryview] = list(self._batches[first:stop])
        return chunks, self._ends[stop - 1] - start, stop == count

    def timestamp_candidates(self, timestamp_ms: int) -> Iterator[tuple[int, BatchHeader]]:
        for i in range(bisect.bisect_left(self._running_max, timestamp_ms), len(self._batches)):
            if self._max_timestamps[i] >= timestamp_ms:
                yield i, parse_header(self._batches[i])

    def batch_at(self, position: int, header: BatchHeader) -> bytes | memoryview:
        return self._batches[position]

    def max_timestamp_from(self, offset: int) -> int:
        first = bisect.bisect_right(self._next_offsets, offset)
        return max(self._max_timestamps[first:], default=-1)

    def seal(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self._batches.clear()
        self._aborted.clear()
        for column in (self._next_offsets, self._ends, self._max_timestamps, self._running_max):
            del column[:]


class _SegmentBatches:
    """A compaction pass's view of a segment: its list of batches when the pass was planned."""

    def __init__(self, segment: MemorySegment) -> None:
        self._batches = segment.batches()
        self.name = f"segment {segment.base_offset}"

    def batches(self) -> Iterator[tuple[BatchHeader, bytes | memoryview]]:
        for batch in self._batches:
            yield parse_header(batch), batch


class _CleanedMemorySegment:
    def __init__(self, base_offset: int) -> None:
        self.segment = MemorySegment(base_offset)

    def add(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        self.segment.append(batch, header, None)

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.segment.add_aborted(txn)

    def finish(self) -> None:
        pass

    def abandon(self) -> None:
        self.segment.delete()


class _MemoryCompactionSpace:
    """Compaction of a memory log: cleaned segments are built in memory and swapped into
    the segment list (``replace_segments``, which the postgres log also writes through)."""

    def __init__(self, log: MemoryLog) -> None:
        self._log = log

    def source(self, segment: Segment) -> _SegmentBatches:
        assert isinstance(segment, MemorySegment)
        return _SegmentBatches(segment)

    def prepare(self) -> None:
        pass

    def new_segment(self, base_offset: int) -> _CleanedMemorySegment:
        return _CleanedMemorySegment(base_offset)

    def written(self, any_segment: bool) -> None:
        pass

    def discard(self) -> None:
        pass

    def obstacle(self) -> str | None:
        return None

    def install(self, replacements: Sequence[tuple[Sequence[Segment], CleanedSegment]]) -> int:
        size = 0
        for old, cleaned in replacements:
            assert isinstance(cleaned, _CleanedMemorySegment)
            new = cleaned.segment
            new.first_append_ms = old[0].first_append_ms
            new.last_append_ms = max(s.last_append_ms for s in old)
            self._log.replace_segments(old, new)
            size += new.size
        return size


class MemoryLog(SegmentedLog):
    def __init__(self, config: LogConfig) -> None:
        super().__init__(config, [MemorySegment(0)], 0)

    def _create_segment(self, base_offset: int) -> Segment:
        return MemorySegment(base_offset)

    def _persist_log_start(self) -> None:
        pass  # nothing outlives the process

    def _config_changed(self) -> None:
        pass  # segments read the config only through the log

    def compaction_space(self) -> _MemoryCompactionSpace:
        return _MemoryCompactionSpace(self)


class MemoryLogStore:
    """Logs kept for the life of the process: reopening a partition finds its data."""

    def __init__(self) -> None:
        self._logs: dict[tuple[str, int], MemoryLog] = {}

    def open(self, topic: str, partition: int, config: LogConfig) -> MemoryLog:
        log = self._logs.get((topic, partition))
        if log is None:
            log = self._logs[(topic, partition)] = MemoryLog(config)
        else:
            log.update_config(config)
        return log

    def remove(self, topic: str, partition: int) -> None:
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            log.delete()

    def existing(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
