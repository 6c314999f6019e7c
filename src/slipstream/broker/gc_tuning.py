"""Garbage-collector settings for a process that is only a broker (``slipstream serve``).

Why: a request allocates tens of container objects and hundreds of requests are in
flight at once, so with CPython's defaults (a young pass every 700 allocations, a full
pass over every module, class and codec loaded at start now and then) the collector
took 10-15% of the broker's CPU under pipelined OffsetCommit load. Nearly all of that
garbage is freed by reference counting; the collector only has cycles to find, so it
can run far less often, and never needs to look at what was loaded at start.

An embedded broker shares its interpreter with the application, so only
``Broker.serve_forever`` applies this, and it restores the previous settings on exit.

Start-up: ``slipstream serve`` switches the collector off before it imports the broker
(loading allocates some 30k long-lived objects and almost no garbage, and the young
passes over them cost ~5% of the start's instructions), and ``serve_forever`` switches it back
on with the serving threshold at once (counted from what start-up left in the young
generation, so no young pass walks the start-up heap first) but runs the full pass that
precedes the freeze (30-50 ms over the start-up heap on a 2-core machine) only
``FREEZE_AFTER_S`` later, so the first requests do not wait for it.
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
# How long after the listener opens the start-up heap is collected and frozen.
FREEZE_AFTER_S = 1.0


class ServingGC:
    """Freeze the start-up heap and collect less often; ``restore`` undoes both."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._previous: tuple[int, int, int] | None = None
        self._was_enabled = True
        self._frozen = False
        self._clock = clock
        self._pass_started = 0.0
        # The young threshold in force (above YOUNG_THRESHOLD only until the freeze).
        self.young_threshold = YOUNG_THRESHOLD

    def apply(self, *, freeze: bool = True) -> None:
        """Serving thresholds, collector on; with ``freeze`` also ``freeze_start_up_heap`` now."""
        if self._previous is None:
            self._previous = gc.get_threshold()
            self._was_enabled = gc.isenabled()
            _, older, oldest = self._previous
            self.young_threshold = YOUNG_THRESHOLD
            if not self._was_enabled and not freeze:
                # Everything allocated while the collector was off (all of start-up under
                # `slipstream serve`) is still young: counted from there, or the next
                # allocation starts a young pass over the whole start-up heap (20-40 ms
                # once the admin listener's imports take it past the threshold), which
                # the freeze pass then walks again. The freeze sets YOUNG_THRESHOLD.
                self.young_threshold += gc.get_count()[0]
            gc.set_threshold(self.young_threshold, older, oldest)
            gc.callbacks.append(self._timed)
            gc.enable()
        if freeze:
            self.freeze_start_up_heap()

    def freeze_start_up_heap(self) -> None:
        """Collect once, then move everything alive (modules, compiled codecs, configuration)
        to the permanent generation: no later pass traverses it. Once, after ``apply``."""
        if self._previous is None or self._frozen:
            return
        self._frozen = True
        gc.collect()
        gc.freeze()
        self.young_threshold = YOUNG_THRESHOLD
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)

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
        if self._frozen:
            gc.unfreeze()
        if not self._was_enabled:
            gc.disable()
        self._previous = None
        self._frozen = False
