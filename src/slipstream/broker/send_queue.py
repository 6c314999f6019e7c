"""What is left to write of a connection's responses once file regions are among them.

Pure bookkeeping for ``direct_sender.py``: the parts in order, and how far the writes
got. ``next_write`` says what to write now (a run of in-memory parts for one gathered
write, or the rest of a file region for one splice); ``sent`` records what a write
took, which may be any part of what was offered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ..protocol.codec import Part
from ..protocol.file_region import FileRegion

# In-memory parts offered to one gathered write (the kernel takes at most IOV_MAX, 1024).
MAX_GATHER = 512


class SendQueue:
    __slots__ = ("_done", "_parts", "pending_bytes")

    def __init__(self) -> None:
        self._parts: deque[Part] = deque()
        self._done = 0  # bytes of the head part already written
        self.pending_bytes = 0

    def __bool__(self) -> bool:
        return bool(self._parts)

    def add(self, parts: Iterable[Part]) -> None:
        for part in parts:
            if len(part):
                self._parts.append(part)
                self.pending_bytes += len(part)

    def next_write(self) -> FileRegion | list[bytes | bytearray | memoryview]:
        """The rest of the head region, or the in-memory parts up to the next region
        (the head's unwritten rest first). Only called when not empty."""
        parts = self._parts
        head = parts[0]
        done = self._done
        if isinstance(head, FileRegion):
            if not done:
                return head
            return FileRegion(head.file, head.offset + done, head.length - done)
        run: list[bytes | bytearray | memoryview] = [memoryview(head)[done:] if done else head]
        for i in range(1, min(len(parts), MAX_GATHER)):
            part = parts[i]
            if isinstance(part, FileRegion):
                break
            run.append(part)
        return run

    def sent(self, count: int) -> None:
        """``count`` bytes of what next_write offered were written."""
        self.pending_bytes -= count
        parts = self._parts
        count += self._done
        while parts:
            size = len(parts[0])
            if count < size:
                break
            count -= size
            parts.popleft()
        self._done = count if parts else 0

    def clear(self) -> None:
        self._parts.clear()
        self._done = 0
        self.pending_bytes = 0
