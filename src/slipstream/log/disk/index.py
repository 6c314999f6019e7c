"""Sparse per-segment indexes: offset -> file position and timestamp -> offset.

Files (big-endian, fixed-size entries, Kafka-like):

- ``.index``: relative offset int32, position int32 (8 bytes).
- ``.timeindex``: timestamp int64, relative offset int32 (12 bytes).

Both get one entry at the same batches: the first batch at least
``index_interval_bytes`` after the previous entry. The offset entry maps that batch's
relative base offset to its position; the time entry holds the segment's running max
timestamp *including* that batch. So, for a target time T, the last time entry below T
names a batch before which no batch reaches T, and the next entry bounds the scan to
one interval.

An index is *loaded* (entries in compact arrays, new entries buffered until written)
while its segment is active, and *cold* afterwards: lookups then binary-search the
file with ``os.pread``, so memory does not grow with the amount of data on disk.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from array import array
from pathlib import Path

from slipstream.protocol.record_batch import BatchHeader

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _FileColumn:
    """One column of a cold index file, as a sequence ``bisect`` can search."""

    def __init__(self, fd: int, entry: struct.Struct, column: int, count: int) -> None:
        self._fd = fd
        self._entry = entry
        self._column = column
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> int:
        size = self._entry.size
        value: int = self._entry.unpack(os.pread(self._fd, size, i * size))[self._column]
        return value


class IndexFile:
    """Fixed-size entries in a file, with an optional in-memory copy of the columns."""

    def __init__(self, path: Path, entry: struct.Struct, typecodes: str) -> None:
        self.path = path
        self._entry = entry
        self._typecodes = typecodes
        self._columns: list[array[int]] | None = None
        self._pending = bytearray()  # loaded mode: entries not yet in the file
        self._count = 0

    # -- modes -------------------------------------------------------------------------

    @classmethod
    def cold(cls, path: Path, entry: struct.Struct, typecodes: str) -> IndexFile:
        index = cls(path, entry, typecodes)
        index._count = os.path.getsize(path) // entry.size
        return index

    @classmethod
    def empty(cls, path: Path, entry: struct.Struct, typecodes: str) -> IndexFile:
        """A loaded index with no entries; ``rewrite`` or ``write_pending`` makes the file."""
        index = cls(path, entry, typecodes)
        index._columns = [array(code) for code in typecodes]
        return index

    def make_cold(self) -> None:
        self.write_pending()
        self._columns = None

    @property
    def loaded(self) -> bool:
        return self._columns is not None

    @property
    def count(self) -> int:
        return self._count

    # -- writing -----------------------------------------------------------------------

    def append(self, first: int, second: int) -> None:
        """One entry (every index here is a pair: offset and position, time and offset)."""
        columns = self._columns
        if columns is None:
            raise RuntimeError(f"index {self.path} is sealed")
        columns[0].append(first)
        columns[1].append(second)
        self._pending += self._entry.pack(first, second)
        self._count += 1

    def write_pending(self, *, sync: bool = False) -> None:
        if not self._pending and not sync:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _write_all(fd, self._pending)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._pending.clear()

    def rewrite(self) -> None:
        """Replace the file with the in-memory entries (after a rebuild)."""
        if self._columns is None:
            raise RuntimeError(f"index {self.path} is not loaded")
        data = bytearray()
        for values in zip(*self._columns, strict=True):
            data += self._entry.pack(*values)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        self._pending.clear()

    def delete(self) -> None:
        self._columns = None
        self._pending.clear()
        self._count = 0
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    # -- reading -----------------------------------------------------------------------

    def floor(self, column: int, value: int, *, strict: bool = False) -> tuple[int, ...] | None:
        """The last entry whose ``column`` is <= value (< value when strict), if any.

        Requires that column to be non-decreasing.
        """
        if self._count == 0:
            return None
        search = bisect.bisect_left if strict else bisect.bisect_right
        if self._columns is not None:
            i = search(self._columns[column], value) - 1
            if i < 0:
                return None
            return tuple(c[i] for c in self._columns)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            i = search(_FileColumn(fd, self._entry, column, self._count), value) - 1
            if i < 0:
                return None
            size = self._entry.size
            return tuple(self._entry.unpack(os.pread(fd, size, i * size)))
        finally:
            os.close(fd)

    def last(self) -> tuple[int, ...] | None:
        if self._count == 0:
            return None
        if self._columns is not None:
            return tuple(c[-1] for c in self._columns)
        size = self._entry.size
        with open(self.path, "rb") as f:
            f.seek((self._count - 1) * size)
            return tuple(self._entry.unpack(f.read(size)))


class SegmentIndexes:
    """The offset and time index of one segment, and when to add entries to them."""

    def __init__(
        self, base_offset: int, offsets: IndexFile, times: IndexFile, interval: int
    ) -> None:
        self.base_offset = base_offset
        self.offsets = offsets
        self.times = times
        self.interval = interval
        self._bytes_since_entry = 0
        self._running_max = -1

    @classmethod
    def empty(cls, data_path: Path, base_offset: int, interval: int) -> SegmentIndexes:
        return cls(
            base_offset,
            IndexFile.empty(data_path.with_suffix(".index"), _OFFSET_ENTRY, "ii"),
            IndexFile.empty(data_path.with_suffix(".timeindex"), _TIME_ENTRY, "qi"),
            interval,
        )

    @classmethod
    def cold(cls, data_path: Path, base_offset: int, interval: int) -> SegmentIndexes:
        return cls(
            base_offset,
            IndexFile.cold(data_path.with_suffix(".index"), _OFFSET_ENTRY, "ii"),
            IndexFile.cold(data_path.with_suffix(".timeindex"), _TIME_ENTRY, "qi"),
            interval,
        )

    @staticmethod
    def entry_sizes() -> tuple[int, int]:
        return _OFFSET_ENTRY.size, _TIME_ENTRY.size

    def observe(self, position: int, header: BatchHeader) -> None:
        """Account for a batch just stored at ``position`` (in offset order)."""
        if header.max_timestamp > self._running_max:
            self._running_max = header.max_timestamp
        if self._bytes_since_entry >= self.interval:
            relative = header.base_offset - self.base_offset
            self.offsets.append(relative, position)
            self.times.append(self._running_max, relative)
            self._bytes_since_entry = 0
        self._bytes_since_entry += header.size

    def position_floor(self, offset: int) -> tuple[int, int]:
        """(base offset, position) of the last indexed batch starting at or before
        ``offset``; (segment base, 0) when there is none."""
        entry = self.offsets.floor(0, offset - self.base_offset)
        if entry is None:
            return self.base_offset, 0
        return self.base_offset + entry[0], entry[1]

    def position_floor_by_position(self, position: int) -> tuple[int, int] | None:
        """(base offset, position) of the last indexed batch starting at or before
        ``position``, if any."""
        entry = self.offsets.floor(1, position)
        if entry is None:
            return None
        return self.base_offset + entry[0], entry[1]

    def scan_start_for_timestamp(self, timestamp_ms: int) -> int:
        """A position from which the first batch reaching ``timestamp_ms`` lies ahead."""
        entry = self.times.floor(0, timestamp_ms, strict=True)
        if entry is None:
            return 0
        return self.position_floor(self.base_offset + entry[1])[1]

    def write_pending(self, *, sync: bool = False) -> None:
        self.offsets.write_pending(sync=sync)
        self.times.write_pending(sync=sync)

    def rewrite(self) -> None:
        self.offsets.rewrite()
        self.times.rewrite()

    def make_cold(self) -> None:
        self.offsets.make_cold()
        self.times.make_cold()

    def delete(self) -> None:
        self.offsets.delete()
        self.times.delete()


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
