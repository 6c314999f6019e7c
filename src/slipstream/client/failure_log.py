"""Rate-limited warnings for repeated failures (librdkafka and the Java client log each
failed connection; a client retrying in silence looks hung)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_INTERVAL_S = 10.0
_MAX_KEYS = 1024


class RateLimitedWarnings:
    """Logs a warning for a key at most once per ``interval_s``; says how many were held back."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warn(self, key: str, message: str) -> bool:
        """Log ``message`` unless ``key`` was logged within the interval; True if logged."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        held = self._held.pop(key, 0)
        if len(self._last) >= _MAX_KEYS:
            self._last.clear()
        self._last[key] = now
        suffix = f" ({held} more since the last report)" if held else ""
        self.logger.warning("%s%s", message, suffix)
        return True
