"""Garbage-collector settings for a process that is only a broker (``slipstream serve``).

Why: a request allocates tens of container objects and hundreds of requests are in
flight at once, so with CPython's defaults (a young pass every 700 allocations, a full
pass over every module, class and codec loaded at start now and then) the collector
took 10-15% of the broker's CPU under pipelined OffsetCommit load. Nearly all of that
garbage is freed by reference counting; the collector only has cycles to find, so it
can run far less often, and never needs to look at what was loaded at start.

An embedded broker shares its interpreter with the application, so only
``Broker.serve_forever`` applies this, and it restores the previous settings on exit.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# Young-generation threshold: allocations (minus deallocations) between young passes.
# Each pass costs about the objects alive at that moment (the requests in flight), so
# a larger threshold mostly means fewer passes over the same survivors.
YOUNG_THRESHOLD = 50_000
# A full pass at least this long is logged: it stalls every connection for its length.
SLOW_PASS_S = 0.1


class ServingGC:
    """Freeze the start-up heap and collect less often; ``restore`` undoes both."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._previous: tuple[int, int, int] | None = None
        self._clock = clock
        self._pass_started = 0.0

    def apply(self) -> None:
        if self._previous is not None:
            return
        self._previous = gc.get_threshold()
        gc.collect()
        # Everything alive now (modules, compiled codecs, configuration) moves to the
        # permanent generation: no later pass traverses it.
        gc.freeze()
        _, older, oldest = self._previous
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
        gc.callbacks.append(self._timed)

    def _timed(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._pass_started = self._clock()
            return
        took = self._clock() - self._pass_started
        if took >= SLOW_PASS_S:
            log.warning(
                "a full garbage-collector pass stalled the broker for %.0f ms (%d objects collected)",
                took * 1000, info["collected"],
            )

    def restore(self) -> None:
        if self._previous is None:
            return
        if self._timed in gc.callbacks:
            gc.callbacks.remove(self._timed)
        gc.set_threshold(*self._previous)
        gc.unfreeze()
        self._previous = None
