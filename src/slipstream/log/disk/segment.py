"""One segment on disk: ``<base_offset:020d>.log`` plus its two sparse indexes.

Batches are appended with ``os.write`` on an O_APPEND descriptor (page-cache durable;
``flush`` fsyncs). Reads use ``os.pread`` for just the requested range: the sparse
index gives a nearby batch start, a short forward walk over batch headers finds the
exact one, and the end of a read is cut at a whole-batch boundary the same way.
A read for sending (``file_regions``) answers a large span as a ``FileRegion`` of a
shared descriptor instead, which the connection sends in the kernel (splice or sendfile).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from slipstream.log.api import AbortedTxn
from slipstream.log.disk.index import SegmentIndexes
from slipstream.log.disk.txn_index import encode as encode_aborted
from slipstream.log.disk.txn_index import txn_index_path
from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.record_batch import HEADER_SIZE, BatchHeader, parse_header

_HEADER_BLOCK = 4096  # bytes read at a time when walking batch headers
_MAX_HINTS = 16
# Reads for sending at least this big become file regions; smaller ones are cheaper
# copied (a pread) and written with the rest of the response in one system call.
REGION_MIN_BYTES = 32 * 1024


def data_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}.log"


class CorruptSegment(Exception):
    """A batch header that cannot be where the segment's bookkeeping says it is."""


class HeaderReader:
    """Reads batch headers at arbitrary positions of a file through a small buffer."""

    def __init__(self, fd: int, file_size: int) -> None:
        self._fd = fd
        self._file_size = file_size
        self._buf = b""
        self._buf_start = 0

    def at(self, position: int) -> BatchHeader:
        rel = position - self._buf_start
        if rel < 0 or rel + HEADER_SIZE > len(self._buf):
            want = min(_HEADER_BLOCK, self._file_size - position)
            if want < HEADER_SIZE:
                raise CorruptSegment(f"no room for a batch header at position {position}")
            self._buf = os.pread(self._fd, want, position)
            self._buf_start = position
            rel = 0
            if len(self._buf) < HEADER_SIZE:
                raise CorruptSegment(f"short read of a batch header at position {position}")
        header = parse_header(self._buf, rel)
        if header.magic != 2 or header.size < HEADER_SIZE:
            raise CorruptSegment(f"no batch header at position {position}")
        return header

    def walk(self, position: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of consecutive batches from ``position`` up to ``end``."""
        while position < end:
            header = self.at(position)
            yield position, header
            position += header.size


class SharedDescriptor:
    """A descriptor of a segment file that is closed when nothing holds it any more.

    File regions hold it while their response waits to be sent, so a region stays
    readable after its segment is closed, deleted by retention or replaced by a
    compaction swap (the file's data lives while a descriptor is open; segments are
    never truncated while served). It closes on deallocation because a response can be
    dropped anywhere (client gone, broker stopping): CPython frees it, and the
    descriptor with it, as the last reference goes.
    """

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def __del__(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class DiskSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        *,
        size: int,
        next_offset: int,
        max_timestamp: int,
        indexes: SegmentIndexes,
        first_append_ms: int = -1,
        last_append_ms: int = -1,
    ) -> None:
        self.directory = directory
        self.path = data_path(directory, base_offset)
        self._base = base_offset
        self._fd = fd
        self._size = size
        self._next_offset = next_offset
        self._max_timestamp = max_timestamp
        self.indexes = indexes
        self.first_append_ms = first_append_ms
        self.last_append_ms = last_append_ms
        self._dirty = False
        # flush() may run on another thread (the broker's group commit): the lock keeps
        # the descriptor from being closed under an fsync.
        self._fd_lock = threading.Lock()
        # next offset -> position where a previous read ended: sequential readers skip
        # the index lookup. Positions of stored batches never change.
        self._hints: dict[int, int] = {}
        self._max_from: tuple[int, int, int] | None = None  # (offset, size, value)
        # The aborted-transaction index (txn_index.py): entries in memory, appended to
        # the .txnindex file through a descriptor opened at the first abort.
        self._aborted: list[AbortedTxn] = []
        self._txn_fd = -1
        self._txn_dirty = False
        # Made at the first read for sending; let go (not closed) with the segment.
        self._shared: SharedDescriptor | None = None

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval: int) -> DiskSegment:
        path = data_path(directory, base_offset)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        # Every segment has its (empty) aborted-transaction index: missing means lost.
        os.close(os.open(txn_index_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        return cls(
            directory,
            base_offset,
            fd,
            size=0,
            next_offset=base_offset,
            max_timestamp=-1,
            indexes=SegmentIndexes.empty(path, base_offset, index_interval),
        )

    # -- SegmentStats ------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._base

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def size(self) -> int:
        return self._size

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    # -- writing -----------------------------------------------------------------------

    def append(
        self, batch: bytes | bytearray | memoryview, header: BatchHeader, now_ms: int | None
    ) -> None:
        position = self._size
        view = memoryview(batch)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except BaseException:
            # Never leave part of a batch behind (e.g. disk full).
            os.ftruncate(self._fd, position)
            raise
        self._size = position + header.size
        self._next_offset = header.next_offset
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
        self._dirty = True  # after the write: a concurrent flush covers it or sees this
        self.indexes.observe(position, header)
        if now_ms is not None:
            if self.first_append_ms < 0:
                self.first_append_ms = now_ms
            self.last_append_ms = now_ms

    @property
    def aborted(self) -> list[AbortedTxn]:
        return self._aborted

    def set_aborted(self, entries: list[AbortedTxn]) -> None:
        """The entries recovery loaded or rebuilt (already in the file)."""
        self._aborted = entries

    def add_aborted(self, txn: AbortedTxn) -> None:
        with self._fd_lock:
            if self._txn_fd < 0:
                self._txn_fd = os.open(txn_index_path(self.path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._txn_fd, encode_aborted(txn))
            self._txn_dirty = True
        self._aborted.append(txn)

    def set_index_interval(self, interval: int) -> None:
        self.indexes.interval = interval

    def seal(self) -> None:
        """No more appends: make data and indexes durable, drop the in-memory index."""
        self.flush()
        self.indexes.write_pending(sync=True)
        self.indexes.make_cold()

    def flush(self) -> None:
        """fsync the data file if anything was appended since the last flush.

        Safe to call from another thread while appends go on: an append that lands
        during the fsync leaves the segment dirty for the next flush. The active
        segment's index files are not synced: recovery rebuilds them from the data.
        """
        with self._fd_lock:
            if self._txn_dirty and self._txn_fd >= 0:
                # Before the data: a durable ABORT marker always has its entry.
                self._txn_dirty = False
                os.fsync(self._txn_fd)
            if self._fd < 0 or not self._dirty:
                return
            self._dirty = False
            try:
                os.fsync(self._fd)
            except BaseException:
                self._dirty = True
                raise

    def close(self) -> None:
        if self._fd < 0:
            return
        self.indexes.write_pending()
        self.flush()
        with self._fd_lock:
            os.close(self._fd)
            self._fd = -1
            self._close_txn_index()
        self._shared = None

    def _close_txn_index(self) -> None:
        if self._txn_fd >= 0:
            os.close(self._txn_fd)
            self._txn_fd = -1

    def delete(self) -> None:
        with self._fd_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._close_txn_index()
        self._shared = None  # regions still queued keep their own descriptor
        with contextlib.suppress(FileNotFoundError):
            os.unlink(txn_index_path(self.path))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.indexes.delete()

    # -- reading -----------------------------------------------------------------------

    def _position_of(self, offset: int, reader: HeaderReader) -> int | None:
        """Position of the first batch whose last offset is >= ``offset``."""
        if offset >= self._next_offset:
            return None
        if offset <= self._base:
            return 0
        hint = self._hints.get(offset)
        if hint is not None:
            return hint
        _, start = self.indexes.position_floor(offset)
        for position, header in reader.walk(start, self._size):
            if header.next_offset > offset:
                return position
        return None

    def _remember(self, next_offset: int, position: int) -> None:
        if len(self._hints) >= _MAX_HINTS:
            del self._hints[next(iter(self._hints))]
        self._hints[next_offset] = position

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool, file_regions: bool = False
    ) -> tuple[list[bytes | memoryview | FileRegion], int, bool]:
        reader = HeaderReader(self._fd, self._size)
        start = self._position_of(offset, reader)
        if start is None:
            return [], 0, True
        if max_bytes >= self._size - start:
            end = self._size
            self._remember(self._next_offset, end)
        else:
            end, end_offset = self._whole_batches_end(start, start + max_bytes, reader)
            if end == start:
                if not min_one_batch:
                    return [], 0, False
                header = reader.at(start)
                end, end_offset = start + header.size, header.next_offset
            self._remember(end_offset, end)
        if file_regions and end - start >= REGION_MIN_BYTES:
            shared = self._shared
            if shared is None:
                shared = self._shared = SharedDescriptor(os.dup(self._fd))
            return [FileRegion(shared, start, end - start)], end - start, end == self._size
        data = os.pread(self._fd, end - start, start)
        return [data], len(data), end == self._size

    def _whole_batches_end(self, start: int, limit: int, reader: HeaderReader) -> tuple[int, int]:
        """(position, next offset) of the last batch boundary <= ``limit`` (>= start)."""
        end, end_offset = start, -1
        indexed = self.indexes.position_floor_by_position(limit)
        if indexed is not None and indexed[1] > start:
            end_offset, end = indexed
        for position, header in reader.walk(end, self._size):
            if position + header.size > limit:
                break
            end, end_offset = position + header.size, header.next_offset
        return end, end_offset

    def timestamp_candidates(self, timestamp_ms: int) -> Iterator[tuple[int, BatchHeader]]:
        if self._max_timestamp < timestamp_ms:
            return
        reader = HeaderReader(self._fd, self._size)
        start = self.indexes.scan_start_for_timestamp(timestamp_ms)
        for position, header in reader.walk(start, self._size):
            if header.max_timestamp >= timestamp_ms:
                yield position, header

    def batch_at(self, position: int, header: BatchHeader) -> bytes | memoryview:
        return os.pread(self._fd, header.size, position)

    def max_timestamp_from(self, offset: int) -> int:
        if offset <= self._base:
            return self._max_timestamp
        cached = self._max_from
        if cached is not None and cached[0] == offset and cached[1] == self._size:
            return cached[2]
        reader = HeaderReader(self._fd, self._size)
        start = self._position_of(offset, reader)
        value = -1
        if start is not None:
            for _, header in reader.walk(start, self._size):
                value = max(value, header.max_timestamp)
        self._max_from = (offset, self._size, value)
        return value
