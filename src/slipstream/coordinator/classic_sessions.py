"""Session timers of classic group members: one keyed timer per member.

A heartbeat or commit that extends a session whose timer is already armed no later
than the new end only notes the new end; the timer re-arms for the rest when it
fires. Heartbeats arrive far more often than sessions end, so this saves a timer
reschedule on nearly every one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .result import CoordinatorResult
from .timer import GuardedTimer

# Called when a member's session really ended: (group id, member id, now) -> result.
SessionExpired = Callable[[str, str, int], CoordinatorResult]


def heartbeat_key(group_id: str, member_id: str) -> str:
    # Length-prefixed: ids may contain "-", and ("a-b", "c") must not collide with ("a", "b-c").
    return f"heartbeat-{len(group_id)}:{group_id}-{member_id}"


class SessionTimers:
    def __init__(self, timer: GuardedTimer, on_expired: SessionExpired) -> None:
        self.timer = timer
        self._on_expired = on_expired
        # By heartbeat key: when the armed timer fires, and the session's latest end if
        # a heartbeat moved it since (see extend).
        self.armed: dict[str, int] = {}
        self.due: dict[str, int] = {}

    def schedule(self, group_id: str, member_id: str, timeout_ms: int, now_ms: int | None = None) -> None:
        """(Re)arm the member's timer to fire ``timeout_ms`` from now."""
        key = heartbeat_key(group_id, member_id)
        self.due.pop(key, None)
        if now_ms is None:
            self.armed.pop(key, None)
        else:
            self.armed[key] = now_ms + timeout_ms
        # A partial, not a closure: fewer objects per member for the garbage collector.
        self.timer.schedule(key, timeout_ms, partial(self._fired, group_id, member_id))

    def cancel(self, group_id: str, member_id: str) -> None:
        key = heartbeat_key(group_id, member_id)
        self.armed.pop(key, None)
        self.due.pop(key, None)
        self.timer.cancel(key)

    def extend(self, group_id: str, member_id: str, session_timeout_ms: int, now_ms: int | None = None) -> None:
        """Push the member's session end to ``now_ms`` + ``session_timeout_ms``.

        With ``now_ms``, a timer already armed no later than the new end is left alone
        and only the new end is noted. Without it the timer is re-armed outright.
        """
        if now_ms is not None:
            key = heartbeat_key(group_id, member_id)
            armed = self.armed.get(key)
            due = now_ms + session_timeout_ms
            if armed is not None and armed <= due and self.timer.is_scheduled(key):
                self.due[key] = due
                return
        self.schedule(group_id, member_id, session_timeout_ms, now_ms)

    def _fired(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult:
        key = heartbeat_key(group_id, member_id)
        self.armed.pop(key, None)
        due = self.due.pop(key, None)
        if due is not None and due > now_ms:
            # The session was extended after this timer was armed: wait for its real end.
            self.schedule(group_id, member_id, due - now_ms, now_ms)
            return CoordinatorResult()
        return self._on_expired(group_id, member_id, now_ms)
