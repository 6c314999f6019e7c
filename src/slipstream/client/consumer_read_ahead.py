"""The thread consumer's read-ahead: records drained on the network thread for the
next polls, taken by the application thread without a round trip through the loop.

No I/O and no event loop: the two threads share it under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["READ_AHEAD_POLLS", "ReadAheadBuffer"]

READ_AHEAD_POLLS = 4
"""Polls' worth of records read ahead at most."""

M = TypeVar("M")


class ReadAheadBuffer(Generic[M]):
    """Up to ``READ_AHEAD_POLLS`` polls' worth of records (``max_poll_records`` each),
    in the order the fetcher drained them."""

    def __init__(self, max_poll_records: int) -> None:
        self.max_poll_records = max_poll_records
        self._records: list[M] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def __bool__(self) -> bool:
        return bool(self._records)

    def __iter__(self) -> Iterator[M]:
        return iter(self._records)

    def room(self) -> int:
        """How many records a refill may add."""
        return READ_AHEAD_POLLS * self.max_poll_records - len(self._records)

    def take(self) -> tuple[list[M], bool]:
        """One poll's worth (at most ``max_poll_records``), and whether to top up: the
        rest is under half the read-ahead, so the next one is made while the
        application works through it."""
        limit = self.max_poll_records
        with self._lock:
            records = self._records
            if len(records) <= limit:
                taken, self._records = records, []
            else:
                taken, self._records = records[:limit], records[limit:]
            left = len(self._records)
        return taken, left < limit * (READ_AHEAD_POLLS // 2)

    def add(self, fresh: list[M]) -> None:
        """Append a refill behind what the application has not taken yet."""
        with self._lock:
            records = self._records
            self._records = records + fresh if records else fresh

    def take_all(self) -> list[M]:
        with self._lock:
            records, self._records = self._records, []
        return records
