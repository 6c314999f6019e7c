"""Bringing a partition directory back after a restart or a crash.

- The last segment is always validated batch by batch (magic, length, CRC32C via
  ``record_batch.scan_valid_prefix``, and contiguous base offsets starting at the
  segment's base, which catches damage to the base offset the CRC does not cover).
  Everything after the last good batch is truncated and both indexes are rebuilt.
- Earlier segments are trusted (they were fsynced when they were rolled): their
  indexes are sanity-checked (entry sizes, last entry pointing at a batch with the
  right base offset, the two indexes ending on the same batch) and the headers after
  the last index entry are walked to find the segment's end. A missing or inconsistent
  index, or a bad header in that walk, sends the segment through the full validation.
- The data file is read in bounded windows, never whole.
- Leftovers are cleaned: temporary files and index files without a data file; an
  interrupted compaction swap is completed or discarded first (``swap.py``).
- Sealed segments may have offset gaps between batches (compaction); the last segment
  is never compacted and must stay contiguous.
- A ``log-start-offset`` checkpoint beyond the recovered end truncates the log fully
  and restarts it at the checkpoint (Kafka does the same).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from slipstream.log.disk.checkpoint import read_offset
from slipstream.log.disk.index import SegmentIndexes
from slipstream.log.disk.segment import CorruptSegment, DiskSegment, HeaderReader, data_path
from slipstream.log.disk.swap import finish_interrupted_compaction
from slipstream.log.policy import INT32_MAX
from slipstream.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
    scan_valid_prefix,
)

LOG_START_FILE = "log-start-offset"
_WINDOW = 1 << 20
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def scan_segment(
    fd: int, base_offset: int, file_size: int, *, allow_gaps: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each valid batch from the start of the file.

    Stops at the first batch that is incomplete, damaged, or whose base offset is not
    the next expected one (with ``allow_gaps``, for compacted segments: below it).
    Reads ``_WINDOW`` bytes at a time (more only for a batch larger than that).
    """
    expected = base_offset
    position = 0
    window = _WINDOW
    while position < file_size:
        buf = os.pread(fd, min(window, file_size - position), position)
        consumed = 0
        for rel, header in scan_valid_prefix(memoryview(buf)):
            misplaced = (
                header.base_offset < expected if allow_gaps else header.base_offset != expected
            )
            if misplaced or header.last_offset - base_offset > INT32_MAX:
                return
            yield position + rel, header
            expected = header.next_offset
            consumed = rel + header.size
        position += consumed
        if consumed:
            window = _WINDOW
        if position + HEADER_SIZE > file_size:
            return  # nothing left, or a torn header at the end of the file
        rest = len(buf) - consumed
        if rest < HEADER_SIZE:
            continue  # the window cut the next header: read again from it
        header = parse_header(buf, consumed)
        if header.magic != 2 or header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return
        if header.size <= rest or position + header.size > file_size:
            return  # damaged while fully in view, or torn at the end of the file
        window = header.size  # a batch larger than the window: view it whole


def _mtime_ms(fd: int) -> int:
    return int(os.fstat(fd).st_mtime * 1000)


def recover_segment(
    directory: Path, base_offset: int, index_interval: int, *, allow_gaps: bool = False
) -> DiskSegment:
    """Validate every batch, truncate after the last good one, rebuild the indexes.

    The result is ready to be the active segment (indexes loaded).
    """
    path = data_path(directory, base_offset)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        file_size = os.fstat(fd).st_size
        indexes = SegmentIndexes.empty(path, base_offset, index_interval)
        end, next_offset, max_timestamp = 0, base_offset, -1
        for position, header in scan_segment(fd, base_offset, file_size, allow_gaps=allow_gaps):
            indexes.observe(position, header)
            end = position + header.size
            next_offset = header.next_offset
            max_timestamp = max(max_timestamp, header.max_timestamp)
        if end < file_size:
            os.ftruncate(fd, end)
            os.fsync(fd)
        indexes.rewrite()
        mtime = _mtime_ms(fd)
        return DiskSegment(
            directory,
            base_offset,
            fd,
            size=end,
            next_offset=next_offset,
            max_timestamp=max_timestamp,
            indexes=indexes,
            first_append_ms=mtime,
            last_append_ms=mtime,
        )
    except BaseException:
        os.close(fd)
        raise


def _load_trusted(directory: Path, base_offset: int, index_interval: int) -> DiskSegment | None:
    path = data_path(directory, base_offset)
    offset_entry, time_entry = SegmentIndexes.entry_sizes()
    try:
        index_size = os.path.getsize(path.with_suffix(".index"))
        time_size = os.path.getsize(path.with_suffix(".timeindex"))
    except FileNotFoundError:
        return None
    if index_size % offset_entry or time_size % time_entry:
        return None
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        file_size = os.fstat(fd).st_size
        indexes = SegmentIndexes.cold(path, base_offset, index_interval)
        last, last_time = indexes.offsets.last(), indexes.times.last()
        start, next_offset, max_timestamp = 0, base_offset, -1
        if (last is None) != (last_time is None):
            raise CorruptSegment("offset and time index disagree")
        if last is not None and last_time is not None:
            relative, start = last
            max_timestamp, time_relative = last_time
            if relative < 0 or time_relative != relative or not 0 <= start < file_size:
                raise CorruptSegment("index points outside the segment")
            next_offset = base_offset + relative
        # The indexed batch must be exactly where the index says; after it, compaction
        # may have left gaps between batches (never a step back).
        exact = last is not None
        for position, header in HeaderReader(fd, file_size).walk(start, file_size):
            misplaced = (
                header.base_offset != next_offset if exact else header.base_offset < next_offset
            )
            if misplaced or position + header.size > file_size:
                raise CorruptSegment(f"unexpected batch at position {position}")
            exact = False
            next_offset = header.next_offset
            max_timestamp = max(max_timestamp, header.max_timestamp)
        mtime = _mtime_ms(fd)
        return DiskSegment(
            directory,
            base_offset,
            fd,
            size=file_size,
            next_offset=next_offset,
            max_timestamp=max_timestamp,
            indexes=indexes,
            first_append_ms=mtime,
            last_append_ms=mtime,
        )
    except CorruptSegment:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise


def open_sealed_segment(directory: Path, base_offset: int, index_interval: int) -> DiskSegment:
    """Open a segment that is not the last one (trusted unless its indexes are bad)."""
    segment = _load_trusted(directory, base_offset, index_interval)
    if segment is None:
        segment = recover_segment(directory, base_offset, index_interval, allow_gaps=True)
        segment.seal()
    return segment


def _segment_files(directory: Path) -> list[int]:
    """Base offsets of the data files; removes temporary and orphaned index files."""
    bases: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for entry in os.scandir(directory):
        path = Path(entry.path)
        if entry.name.endswith(".tmp"):
            path.unlink(missing_ok=True)
            continue
        stem, suffix = path.stem, path.suffix
        if suffix not in _SEGMENT_SUFFIXES or len(stem) != 20 or not stem.isdigit():
            continue
        if suffix == ".log":
            bases.add(int(stem))
        else:
            indexes.append((int(stem), path))
    for base, path in indexes:
        if base not in bases:
            path.unlink(missing_ok=True)
    return sorted(bases)


def recover_log(directory: Path, index_interval: int) -> tuple[list[DiskSegment], int]:
    """Open every segment of a partition directory; returns (segments, log start)."""
    directory.mkdir(parents=True, exist_ok=True)
    finish_interrupted_compaction(directory)
    bases = _segment_files(directory)
    checkpoint = read_offset(directory / LOG_START_FILE)
    log_start = checkpoint if checkpoint is not None and checkpoint >= 0 else 0
    segments: list[DiskSegment] = []
    try:
        for base in bases[:-1]:
            segments.append(open_sealed_segment(directory, base, index_interval))
        if bases:
            segments.append(recover_segment(directory, bases[-1], index_interval))
        else:
            segments.append(DiskSegment.create(directory, log_start, index_interval))
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    if log_start > segments[-1].next_offset:
        for segment in segments:
            segment.delete()
        segments = [DiskSegment.create(directory, log_start, index_interval)]
    return segments, log_start
