"""Recent FindCoordinator lookups per group: a hint that consumers are on their way.

A consumer looks up its group's coordinator before its first JoinGroup. When a
group leaves Empty, lookups from more connections than could belong to the
members already there mean more consumers started together and are still
connecting, so the initial rebalance delay should not end yet (group_manager).

Only the last ``horizon_ms`` are kept: each lookup is one entry in a time-ordered
queue plus the latest time per (group, connection); old entries are dropped as
new ones arrive, and never more than ``max_entries`` are kept (a client flooding
FindCoordinator with keys only shortens the window, it cannot grow the memory).
"""

from __future__ import annotations

from collections import deque

MAX_ENTRIES = 100_000


class RecentLookups:
    def __init__(self, horizon_ms: int, max_entries: int = MAX_ENTRIES) -> None:
        self.horizon_ms = horizon_ms
        self.max_entries = max_entries
        self._queue: deque[tuple[int, str, str]] = deque()
        self._latest: dict[str, dict[str, int]] = {}

    def note(self, group_id: str, connection: str, now_ms: int) -> None:
        if self.horizon_ms <= 0:
            return
        self._expire(now_ms)
        if len(self._queue) >= self.max_entries:
            self._drop_oldest()
        self._queue.append((now_ms, group_id, connection))
        self._latest.setdefault(group_id, {})[connection] = now_ms

    def connections_since(self, group_id: str, since_ms: int, now_ms: int) -> int:
        """Distinct connections that looked ``group_id`` up at or after ``since_ms``."""
        self._expire(now_ms)
        latest = self._latest.get(group_id)
        if not latest:
            return 0
        return sum(1 for t in latest.values() if t >= since_ms)

    def __len__(self) -> int:
        return len(self._queue)

    def _expire(self, now_ms: int) -> None:
        queue = self._queue
        oldest = now_ms - self.horizon_ms
        while queue and queue[0][0] < oldest:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        t, group_id, connection = self._queue.popleft()
        latest = self._latest.get(group_id)
        if latest is not None and latest.get(connection) == t:
            del latest[connection]
            if not latest:
                del self._latest[group_id]
