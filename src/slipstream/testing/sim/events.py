"""The simulator's one clock and its event queue.

Everything that happens in a simulated history is an event at an integer
millisecond. Ties are broken by insertion order (a counter), never by object
identity or hashing, so a seed always yields the same interleaving.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heappush

# What an event says in the trace: a string, or parts joined only when a trace is kept
# (formatting every label of every event costs more than many events do).
Label = str | tuple[object, ...]


def label_text(label: Label) -> str:
    return label if isinstance(label, str) else "".join(map(str, label))


@dataclass(slots=True)
class Event:
    """One scheduled callback; ``cancel()`` turns it into a no-op (cheaper than removal)."""

    at_ms: int
    seq: int
    label: Label
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True

    @property
    def text(self) -> str:
        return label_text(self.label)


class EventQueue:
    def __init__(self) -> None:
        self.now_ms = 0
        self._heap: list[tuple[int, int, Event]] = []
        self._seq = itertools.count()

    def at(self, at_ms: int, label: Label, action: Callable[[], None]) -> Event:
        # Never schedule into the past: a late event runs "now", after what is already due.
        if at_ms < self.now_ms:
            at_ms = self.now_ms
        seq = next(self._seq)
        event = Event(at_ms, seq, label, action)
        heappush(self._heap, (at_ms, seq, event))
        return event

    def after(self, delay_ms: int, label: Label, action: Callable[[], None]) -> Event:
        # ``at`` inlined: most events are scheduled relative to now.
        at_ms = self.now_ms + delay_ms if delay_ms > 0 else self.now_ms
        seq = next(self._seq)
        event = Event(at_ms, seq, label, action)
        heappush(self._heap, (at_ms, seq, event))
        return event

    def next_time(self) -> int | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def peek(self) -> Event | None:
        """The next live event, left in the queue (cancelled ones before it are dropped)."""
        heap = self._heap
        while heap:
            event = heap[0][2]
            if not event.cancelled:
                return event
            heapq.heappop(heap)
        return None

    def pop_peeked(self) -> Event:
        """Take the event ``peek`` just returned (nothing was scheduled since); the clock moves to it."""
        event = heapq.heappop(self._heap)[2]
        if event.at_ms > self.now_ms:
            self.now_ms = event.at_ms
        return event

    def pop(self) -> Event | None:
        """The next live event (the clock moves to its time), or None when nothing is left."""
        while self._heap:
            _at, _seq, event = heapq.heappop(self._heap)
            if event.cancelled:
                continue
            self.now_ms = max(self.now_ms, event.at_ms)
            return event
        return None

    def advance_to(self, at_ms: int) -> None:
        self.now_ms = max(self.now_ms, at_ms)
