"""Producer ids: handed out in blocks, each block recorded before its first id is used.

Apart from producer_state.py (the per-partition sequence checks) because a broker makes
its allocator at start, and the first answers need none of the produce path.
"""

from __future__ import annotations

from collections.abc import Callable

from ..log.metadata import MetadataStore

_ID_BLOCK = 1000
_DOCUMENT = "producer-ids"


class ProducerIdAllocator:
    """Hands out unique producer ids; blocks are persisted so ids never repeat after a restart."""

    def __init__(self, metadata: MetadataStore | None, reserve: Callable[[int, int], int] | None = None) -> None:
        """``reserve(count, floor)``: the first id (at least ``floor``) of a block no other
        broker hands out (a cluster's shared database); without it blocks are recorded in
        ``metadata``."""
        self._metadata = metadata
        self._reserve = reserve
        self._next = 0
        self._block_end = 0
        saved = metadata.load(_DOCUMENT) if metadata is not None else None
        if saved is not None:
            self._next = self._block_end = int(saved.strip() or 0)

    def allocate(self) -> int:
        if self._next >= self._block_end and self._reserve is not None:
            self._next = self._reserve(_ID_BLOCK, self._next)
            self._block_end = self._next + _ID_BLOCK
        if self._next >= self._block_end:
            self._block_end = self._next + _ID_BLOCK
            if self._metadata is not None:
                self._metadata.save(_DOCUMENT, str(self._block_end))
        pid = self._next
        self._next += 1
        return pid
