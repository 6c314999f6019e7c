"""A span of an open file standing in for its bytes in an encoded message.

A Fetch answer's record batches already sit in segment files exactly as they go on
the wire. Handing the encoder a ``FileRegion`` instead of the bytes lets the connection
send them with ``splice`` or ``sendfile``: page cache to socket inside the kernel, never
copied into Python. The encoder passes a region through as its own part (it never
inlines one); whoever writes the parts must know how to send it. This module only
describes the span: the I/O belongs to the ``RegionFile`` the log layer supplies.
"""

from __future__ import annotations

from typing import Protocol


class RegionFile(Protocol):
    """An open file that stays open for as long as a region holds it."""

    def fileno(self) -> int: ...

    def pread(self, size: int, offset: int) -> bytes: ...


class FileRegion:
    """``length`` bytes at ``offset`` of ``file``."""

    __slots__ = ("file", "length", "offset")

    def __init__(self, file: RegionFile, offset: int, length: int) -> None:
        self.file = file
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.file.fileno()}, offset={self.offset}, length={self.length})"

    def read(self, start: int = 0, size: int = -1) -> bytes:
        """Bytes of the region from ``start`` (relative to it), at most ``size`` (-1: to its end)."""
        available = max(self.length - start, 0)
        size = available if size < 0 else min(size, available)
        if size == 0:
            return b""
        return self.file.pread(size, self.offset + start)
