"""The poll consumers' timers, sans-I/O: every decision is made from ``now`` (seconds,
monotonic) given by the caller, so they are tested on a manual clock.
"""

from __future__ import annotations

__all__ = ["AutoCommitSchedule", "PollInterval"]


class PollInterval:
    """``max_poll_interval_ms``: when the application last called poll, and whether it
    has stayed away longer than that (the member then leaves the group)."""

    def __init__(self, max_poll_interval_ms: int, now: float) -> None:
        self.limit_s = max_poll_interval_ms / 1000.0
        self.last_poll = now
        self.in_poll = False

    @property
    def check_every_s(self) -> float:
        """How often a watchdog should ask :meth:`exceeded`."""
        return min(0.1, self.limit_s / 4)

    def enter(self, now: float) -> None:
        """A poll starts: the application is back in the consumer."""
        self.last_poll = now
        self.in_poll = True

    def exit(self, now: float) -> None:
        """A poll returns: the interval counts from here."""
        self.last_poll = now
        self.in_poll = False

    def idle_s(self, now: float) -> float:
        return now - self.last_poll

    def exceeded(self, now: float) -> bool:
        """Outside a poll for longer than the limit."""
        return not self.in_poll and self.idle_s(now) > self.limit_s


class AutoCommitSchedule:
    """``auto_commit_interval_ms``: when the next auto-commit is due."""

    def __init__(self, interval_ms: int, now: float) -> None:
        self.interval_s = interval_ms / 1000.0
        self.next_at = now + self.interval_s

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def take(self, now: float) -> bool:
        """Whether a commit is due now; if so the next one is due an interval from now."""
        if not self.due(now):
            return False
        self.next_at = now + self.interval_s
        return True
