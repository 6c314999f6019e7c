"""A disk log's side of a compaction pass: its segment files read in windows, cleaned
segments written complete and fsynced into ``cleaning/``, and the swap that puts them
in place through the marker of ``swap.py`` (which recovery finishes after a crash)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from slipstream.log.api import AbortedTxn, LogConfig
from slipstream.log.disk.checkpoint import sync_directory
from slipstream.log.disk.index import SegmentIndexes
from slipstream.log.disk.segment import DiskSegment, data_path
from slipstream.log.disk.swap import (
    SEGMENT_SUFFIXES,
    STAGING_DIR,
    SWAP_MARKER,
    segment_file,
    write_swap_marker,
)
from slipstream.log.segmented import CleanedSegment, CompactionError, Segment
from slipstream.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header

log = logging.getLogger(__name__)

_READ_WINDOW = 1 << 20


def _step(name: str) -> None:
    """A point of the swap; tests replace this to simulate a crash right there."""


class _SegmentFile:
    """The first ``size`` bytes of a segment file (they never change), read in windows
    through its own descriptor, so the log may close or delete the segment meanwhile."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.name = str(path)

    def batches(self) -> Iterator[tuple[BatchHeader, bytes | memoryview]]:
        if self.size == 0:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            position = 0
            while position < self.size:
                buf = os.pread(fd, min(_READ_WINDOW, self.size - position), position)
                view = memoryview(buf)
                rel = 0
                while len(view) - rel >= HEADER_SIZE:
                    header = parse_header(view, rel)
                    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                        raise CompactionError(f"{self.name}: bad batch length at {position + rel}")
                    if rel + header.size > len(view):
                        break
                    yield header, view[rel : rel + header.size]
                    rel += header.size
                if rel == 0:  # one batch larger than the window: read it whole
                    if len(view) < HEADER_SIZE:
                        raise CompactionError(f"{self.name}: torn batch header at {position}")
                    header = parse_header(view)
                    if position + header.size > self.size:
                        raise CompactionError(f"{self.name}: batch at {position} runs past the end")
                    yield header, memoryview(os.pread(fd, header.size, position))
                    rel = header.size
                position += rel
        finally:
            os.close(fd)


class _StagedSegment:
    """A cleaned segment written in ``cleaning/``; what install needs is kept on finish."""

    def __init__(self, staging: Path, base: int, index_interval: int) -> None:
        self.segment = DiskSegment.create(staging, base, index_interval)
        self.size = 0
        self.next_offset = base
        self.max_timestamp = -1
        self.aborted: list[AbortedTxn] = []

    def add(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        self.segment.append(batch, header, None)

    def add_aborted(self, txn: AbortedTxn) -> None:
        self.segment.add_aborted(txn)

    def finish(self) -> None:
        segment = self.segment
        segment.seal()  # data and both indexes written and fsynced
        self.size, self.next_offset = segment.size, segment.next_offset
        self.max_timestamp = segment.max_timestamp
        self.aborted = list(segment.aborted)
        segment.close()

    def abandon(self) -> None:
        self.segment.delete()


class _CompactedLog(Protocol):
    """What the space uses of its disk log."""

    directory: Path

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> LogConfig: ...

    def replace_segments(self, old: Sequence[Segment], new: Segment) -> None: ...


class DiskCompactionSpace:
    def __init__(self, log_: _CompactedLog) -> None:
        self._log = log_
        self._directory = log_.directory
        self._staging = log_.directory / STAGING_DIR

    @property
    def _index_interval(self) -> int:
        return self._log.config.index_interval_bytes  # the config may change during a pass

    def source(self, segment: Segment) -> _SegmentFile:
        assert isinstance(segment, DiskSegment)
        return _SegmentFile(segment.path, segment.size)

    def prepare(self) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)
        self._staging.mkdir()

    def new_segment(self, base_offset: int) -> _StagedSegment:
        return _StagedSegment(self._staging, base_offset, self._index_interval)

    def written(self, any_segment: bool) -> None:
        if any_segment:
            sync_directory(self._staging)
        else:
            shutil.rmtree(self._staging, ignore_errors=True)

    def discard(self) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)

    def obstacle(self) -> str | None:
        return "log closed" if self._log.closed else None

    def install(self, replacements: Sequence[tuple[Sequence[Segment], CleanedSegment]]) -> int:
        """The commit point is the marker; a failure after it is finished by recovery."""
        committed = False
        try:
            fds = self._open_staged(replacements)
            committed = True
            return self._swap(replacements, fds)
        except BaseException:
            if not committed:
                for _, cleaned in replacements:
                    with contextlib.suppress(Exception):
                        cleaned.abandon()
                self.discard()
            else:
                log.error(
                    "compaction swap of %s failed after its commit point; "
                    "the swap completes when the log is next opened",
                    self._directory,
                )
            raise

    def _open_staged(self, replacements: Sequence[tuple[Sequence[Segment], CleanedSegment]]) -> dict[int, int]:
        """Descriptors of the staged data files (the new segments keep them), then the marker."""
        fds: dict[int, int] = {}
        try:
            for old, _ in replacements:
                base = old[0].base_offset
                fds[base] = os.open(data_path(self._staging, base), os.O_RDWR | os.O_APPEND)
            write_swap_marker(
                self._directory, [(old[0].base_offset, [s.base_offset for s in old]) for old, _ in replacements]
            )
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            raise
        return fds

    def _swap(
        self, replacements: Sequence[tuple[Sequence[Segment], CleanedSegment]], fds: dict[int, int]
    ) -> int:
        directory, staging = self._directory, self._staging
        _step("committed")
        for old, _ in replacements:
            for replaced in old[1:]:
                replaced.delete()
        _step("replaced-deleted")
        for old, _ in replacements:
            base = old[0].base_offset
            for suffix in SEGMENT_SUFFIXES:
                os.replace(segment_file(staging, base, suffix), segment_file(directory, base, suffix))
                _step(f"moved{suffix}")
            old[0].close()  # its files were just replaced: close, don't unlink
        sync_directory(directory)
        _step("moved")
        size = 0
        for old, cleaned in replacements:
            assert isinstance(cleaned, _StagedSegment)
            base = old[0].base_offset
            new = DiskSegment(
                directory,
                base,
                fds.pop(base),
                size=cleaned.size,
                next_offset=cleaned.next_offset,
                max_timestamp=cleaned.max_timestamp,
                indexes=SegmentIndexes.cold(data_path(directory, base), base, self._index_interval),
                first_append_ms=old[0].first_append_ms,
                last_append_ms=max(s.last_append_ms for s in old),
            )
            new.set_aborted(cleaned.aborted)
            self._log.replace_segments(old, new)
            size += new.size
        (directory / SWAP_MARKER).unlink()
        sync_directory(directory)
        shutil.rmtree(staging, ignore_errors=True)
        return size
