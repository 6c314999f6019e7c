"""Recent FindCoordinator lookups per group: a hint that consumers are on their way.

A consumer looks up its group's coordinator before its first JoinGroup. When a
group leaves Empty, lookups from more connections than could belong to the
members already there mean more consumers started together and are still
connecting, so the initial rebalance delay should not end yet (group_manager).

Only the last ``horizon_ms`` are kept: each lookup is one entry in a time-ordered
queue plus the latest time per (group, connection); old entries are dropped as
new ones arrive, so memory is bounded by the lookup rate times the horizon.
"""

from __future__ import annotations

from collections import deque


class RecentLookups:
    def __init__(self, horizon_ms: int) -> None:
        self.horizon_ms = horizon_ms
        self._queue: deque[tuple[int, str, str]] = deque()
        self._latest: dict[str, dict[str, int]] = {}

    def note(self, group_id: str, connection: str, now_ms: int) -> None:
        if self.horizon_ms <= 0:
            return
        self._expire(now_ms)
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
            t, group_id, connection = queue.popleft()
            latest = self._latest.get(group_id)
            if latest is not None and latest.get(connection) == t:
                del latest[connection]
                if not latest:
                    del self._latest[group_id]
