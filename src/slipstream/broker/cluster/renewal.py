"""When this broker renews its leases, how long a renewal may take, and when they are gone.

Pure timing (no I/O, time passed in, in milliseconds of a monotonic clock), so the
rules are tested with a manual clock; ``member.py`` carries them out.

- A beat is due a third of the session after the last renewal was *sent*, not after the
  last heartbeat's other work ended: a slow tick does not push renewals apart.
- A renewal may wait until the leases would expire: the heartbeat's UPDATE of the lease
  rows does not wait for commits (they lock the rows FOR KEY SHARE, a renewal changes no
  key column), but it does wait for a claim racing it, for an older broker's lease check
  during an upgrade (FOR SHARE), or for a database that is slow to answer; one given up
  after a third of the session left the next try a third later, so one wait that long
  cost the broker all its leases.
- The leases count from when the renewal was sent (the database extends them from a
  moment after that), so this broker never believes it holds a lease longer than the
  database does.
- A failed beat is retried after a quarter of the interval while the leases still hold
  (after the interval once they expired: a database down is not asked more often).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_TIMEOUT_MS = 100  # a renewal sent this close to the deadline still gets a chance


def beat_interval_ms(session_ms: int) -> int:
    """How often a member beats: a third of the session (at least every 50 ms)."""
    return max(session_ms // 3, 50)


@dataclass
class RenewalSchedule:
    session_ms: int
    # How long a beat may take when no lease is at stake (none renewed yet, or all expired).
    idle_timeout_ms: int
    renewed_ms: int | None = None  # when the last renewal that was answered was sent
    failed_ms: int | None = None  # when the last beat failed, if it failed after that renewal

    @property
    def interval_ms(self) -> int:
        return beat_interval_ms(self.session_ms)

    def deadline_ms(self) -> int | None:
        """When the leases renewed last expire, at the earliest; None before any renewal."""
        return None if self.renewed_ms is None else self.renewed_ms + self.session_ms

    def renewed(self, sent_ms: int) -> None:
        """The beat sent at ``sent_ms`` was answered."""
        self.renewed_ms, self.failed_ms = sent_ms, None

    def failed(self, now_ms: int) -> None:
        self.failed_ms = now_ms

    def wait_ms(self, now_ms: int) -> int:
        """How long until the next beat is due (0: now)."""
        if self.failed_ms is not None:
            deadline = self.deadline_ms()
            at_stake = deadline is not None and self.failed_ms < deadline
            due = self.failed_ms + (max(self.interval_ms // 4, 25) if at_stake else self.interval_ms)
        elif self.renewed_ms is not None:
            due = self.renewed_ms + self.interval_ms
        else:
            return 0
        return max(due - now_ms, 0)

    def timeout_ms(self, now_ms: int) -> int:
        """How long a beat sent at ``now_ms`` may take: until the leases would expire."""
        deadline = self.deadline_ms()
        if deadline is None or now_ms >= deadline:
            return self.idle_timeout_ms
        return max(deadline - now_ms, MIN_TIMEOUT_MS)

    def expired(self, now_ms: int) -> bool:
        """Whether a whole session passed since the last renewal was sent (the database
        may have given the leases to another broker by now)."""
        deadline = self.deadline_ms()
        return deadline is not None and now_ms >= deadline
