"""Injected time: a keyed timer interface and a manual implementation for tests.

The coordinator never reads a clock; handlers receive ``now_ms`` and schedule
work through a ``Timer``. Scheduling a key replaces any timer with that key
(Kafka's ``CoordinatorTimer``). When a timer fires, its callback must be run
through the same ordered path as requests, with the current time, and the
``CoordinatorResult`` it returns carried out like a handler's.

``ManualTimer`` is both the test double (like Kafka's ``MockCoordinatorTimer``)
and a ready-made timer store for an event loop: ``next_deadline()`` says when
to wake up, ``pop_expired(now)`` hands out what is due.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .result import CoordinatorResult, TimerCallback


class Timer(Protocol):
    def schedule(self, key: str, delay_ms: int, callback: TimerCallback) -> None:
        """Run ``callback`` after ``delay_ms``, replacing any timer scheduled under ``key``."""

    def cancel(self, key: str) -> None:
        """Forget the timer under ``key`` (no-op if there is none)."""


@dataclass(frozen=True, slots=True)
class ExpiredTimer:
    key: str
    deadline_ms: int
    callback: TimerCallback


@dataclass(frozen=True, slots=True)
class FiredTimer:
    key: str
    at_ms: int
    result: CoordinatorResult


class ManualTimer:
    """A keyed timer over a caller-driven clock.

    ``clock`` returns the current time in ms; it is read only by ``schedule``
    (deadline = clock() + delay). ``advance`` moves a ``ManualTimer``-owned
    clock and fires due timers in deadline order, each at its own deadline.
    """

    def __init__(self, clock: Callable[[], int] | None = None, start_ms: int = 0) -> None:
        self._now = start_ms
        self._clock = clock
        self._entries: dict[str, tuple[int, int, TimerCallback]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    # ---- Timer protocol

    def schedule(self, key: str, delay_ms: int, callback: TimerCallback) -> None:
        deadline = self.now_ms + max(0, delay_ms)
        seq = next(self._seq)
        self._entries[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))
        if len(self._heap) > 2 * len(self._entries) + 1024:
            # Rescheduling (every heartbeat) leaves stale entries behind: rebuild now
            # and then so the heap stays proportional to the live timers.
            self._heap = [(d, s, k) for k, (d, s, _cb) in self._entries.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: str) -> None:
        self._entries.pop(key, None)

    # ---- inspection

    @property
    def now_ms(self) -> int:
        return self._clock() if self._clock is not None else self._now

    def set_now(self, now_ms: int) -> None:
        if self._clock is not None:
            raise RuntimeError("this ManualTimer reads an external clock")
        self._now = now_ms

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def deadline(self, key: str) -> int | None:
        entry = self._entries.get(key)
        return entry[0] if entry else None

    def keys(self) -> list[str]:
        return sorted(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now_ms: int) -> ExpiredTimer | None:
        """The earliest timer due at ``now_ms`` (removed), or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        deadline, _seq, key = heapq.heappop(self._heap)
        _, _, callback = self._entries.pop(key)
        return ExpiredTimer(key, deadline, callback)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _deadline, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    # ---- driving (tests)

    def advance(
        self,
        delta_ms: int,
        on_fired: Callable[[FiredTimer], None] | None = None,
    ) -> list[FiredTimer]:
        """Move the owned clock forward, firing due timers at their deadlines, in order.

        ``on_fired`` is called with each result before the next timer fires, so
        a caller can carry the result out (append, replay) in order.
        """
        if self._clock is not None:
            raise RuntimeError("advance() needs a ManualTimer that owns its clock")
        target = self._now + delta_ms
        fired: list[FiredTimer] = []
        while True:
            nxt = self.next_deadline()
            if nxt is None or nxt > target:
                break
            self._now = max(self._now, nxt)
            expired = self.pop_expired(self._now)
            if expired is None:  # pragma: no cover - next_deadline said otherwise
                break
            item = FiredTimer(expired.key, self._now, expired.callback(self._now))
            fired.append(item)
            if on_fired is not None:
                on_fired(item)
        self._now = target
        return fired


class GuardedTimer:
    """The coordinator's view of a ``Timer``: a callback runs only if still current.

    A timer implementation driven by an event loop may fire a callback that was
    already due and queued when its key was rescheduled or cancelled; the guard
    turns such stale callbacks into no-ops, so correctness does not depend on
    the timer implementation's races.
    """

    def __init__(self, timer: Timer) -> None:
        self._timer = timer
        self._tokens: dict[str, _Guarded] = {}

    def schedule(self, key: str, delay_ms: int, callback: TimerCallback) -> None:
        guarded = _Guarded(self._tokens, key, callback)
        self._tokens[key] = guarded
        self._timer.schedule(key, delay_ms, guarded)

    def cancel(self, key: str) -> None:
        if self._tokens.pop(key, None) is not None:
            self._timer.cancel(key)

    def is_scheduled(self, key: str) -> bool:
        return key in self._tokens

    def keys(self) -> list[str]:
        return sorted(self._tokens)


class _Guarded:
    """A scheduled callback that runs only while it is still the one under its key.

    One object, where a closure was a function and four cells: every member of every
    group has its session timer, rescheduled by each heartbeat, and each object is one
    more for every full garbage-collector pass to walk.
    """

    __slots__ = ("callback", "key", "tokens")

    def __init__(self, tokens: dict[str, _Guarded], key: str, callback: TimerCallback) -> None:
        self.tokens = tokens
        self.key = key
        self.callback = callback

    def __call__(self, now_ms: int) -> CoordinatorResult:
        if self.tokens.get(self.key) is not self:
            return CoordinatorResult()
        del self.tokens[self.key]
        return self.callback(now_ms)
