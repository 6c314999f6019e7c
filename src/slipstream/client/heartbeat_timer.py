"""When the classic group member heartbeats next, and whether its session may have lapsed.

Pure arithmetic on a monotonic clock passed in (``now``, seconds): the member's core
(:class:`~.classic_member_core.MemberCore`) decides *whether* it heartbeats at all; this
says *when*, from the last heartbeat sent, the last answer and the last failure.
"""

from __future__ import annotations


class HeartbeatTimer:
    """The classic member's heartbeat schedule: every ``interval_s`` after the last one sent,
    ``retry_backoff_s`` after a failure, one at a time; the session has lapsed once no
    answer came for ``session_timeout_s``."""

    def __init__(self, interval_s: float, retry_backoff_s: float, session_timeout_s: float) -> None:
        self.interval_s = interval_s
        self.retry_backoff_s = retry_backoff_s
        self.session_timeout_s = session_timeout_s
        self.last_send: float | None = None
        self.last_receive: float | None = None
        """When the coordinator last answered (any answer proves it alive)."""
        self.in_flight = False
        self.failed_at: float | None = None

    def restart(self, now: float) -> None:
        """The coordinator answered a join or gave an assignment: count from ``now``."""
        self.last_send = self.last_receive = now
        self.failed_at = None

    def time_to_next(self, now: float) -> float | None:
        """Seconds until the next heartbeat is due; None while one is in flight."""
        if self.in_flight:
            return None
        if self.failed_at is not None:
            return max(0.0, self.failed_at + self.retry_backoff_s - now)
        if self.last_send is None:
            return 0.0
        return max(0.0, self.last_send + self.interval_s - now)

    def sent(self, now: float) -> None:
        self.last_send = now
        self.in_flight = True
        if self.last_receive is None:
            self.last_receive = now

    def answered(self, now: float) -> None:
        """An answer came (the coordinator is alive): the regular schedule resumes."""
        self.in_flight = False
        self.last_receive = now
        self.failed_at = None

    def failed(self, now: float) -> None:
        """No usable answer: retry after the backoff."""
        self.in_flight = False
        self.failed_at = now

    def session_expired(self, now: float) -> bool:
        return self.last_receive is not None and now - self.last_receive > self.session_timeout_s
