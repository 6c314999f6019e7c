"""A one-line progress display on stderr for long CLI commands (produce, consume).

Shown when stderr is a terminal, or when asked (``--progress``); ``--no-progress`` hides
it. The line is redrawn in place (carriage return) at most ``MIN_REDRAW_S`` apart and
ends with a newline at ``finish``. ``render`` is a pure function of the figures, so the
layout is tested without a terminal or a clock.

    orders  [###########.............]  45%  12.3/27.1 MiB  45,000 records  9,800 rec/s  ETA 2 s
    orders  120,000 records  9,800 rec/s  12.2 s           (no known total: stdin, consume)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 24
MIN_REDRAW_S = 0.1
_MIB = 1024 * 1024


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    minutes, seconds = divmod(int(s), 60)
    return f"{minutes} min {seconds:02d} s"


def _size(done: int, total: int) -> str:
    if total >= _MIB:
        return f"{done / _MIB:.1f}/{total / _MIB:.1f} MiB"
    return f"{done / 1024:.1f}/{total / 1024:.1f} KiB"


def render(label: str, records: int, elapsed_s: float, done_bytes: int = 0, total_bytes: int | None = None) -> str:
    """The progress line for these figures (no carriage return, no newline)."""
    rate = records / elapsed_s if elapsed_s > 0 else 0.0
    parts = [label]
    if total_bytes:
        fraction = min(1.0, done_bytes / total_bytes)
        filled = round(fraction * BAR_WIDTH)
        parts.append("[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]")
        parts.append(f"{fraction * 100:3.0f}%")
        parts.append(_size(done_bytes, total_bytes))
    parts.append(f"{records:,} records")
    parts.append(f"{rate:,.0f} rec/s")
    if total_bytes and 0 < done_bytes < total_bytes and elapsed_s > 0:
        parts.append("ETA " + _seconds(elapsed_s * (total_bytes - done_bytes) / done_bytes))
    else:
        parts.append(_seconds(elapsed_s))
    return "  ".join(parts)


class Progress:
    """Redraws ``render``'s line on ``stream``; a no-op when not ``enabled``."""

    def __init__(
        self,
        stream: TextIO,
        label: str,
        *,
        enabled: bool,
        total_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.label = label
        self.enabled = enabled
        self.total_bytes = total_bytes
        self.clock = clock
        self.records = 0
        self.done_bytes = 0
        self._started = clock()
        self._drawn_at: float | None = None
        self._width = 0

    def update(self, records: int, done_bytes: int = 0) -> None:
        self.records, self.done_bytes = records, done_bytes
        if not self.enabled:
            return
        now = self.clock()
        if self._drawn_at is not None and now - self._drawn_at < MIN_REDRAW_S:
            return
        self._draw(now)

    def finish(self) -> None:
        if not self.enabled:
            return
        self._draw(self.clock())
        self.stream.write("\n")
        self.stream.flush()

    def _draw(self, now: float) -> None:
        self._drawn_at = now
        line = render(self.label, self.records, now - self._started, self.done_bytes, self.total_bytes)
        # Pad over the end of a longer previous line.
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)


def wanted(flag: bool | None, stream: TextIO) -> bool:
    """``--progress`` / ``--no-progress`` when given, else whether ``stream`` is a terminal."""
    if flag is not None:
        return flag
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
