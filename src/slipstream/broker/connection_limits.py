"""Broker-wide bounds on connections: how many, how many per source IP, how long idle.

Kafka's ``max.connections`` and ``max.connections.per.ip`` (a connection over either
cap is closed as soon as it is accepted) and ``connections.max.idle.ms`` (a connection
with nothing in flight and no bytes read or written for that long is closed). Idle
time is measured on the broker's clock (injectable); a sweep runs a few times per
idle period.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Protocol

log = logging.getLogger(__name__)

# The sweep runs this many times per idle period, within these bounds (seconds).
_SWEEPS_PER_PERIOD = 4
_MIN_SWEEP_S = 0.01
_MAX_SWEEP_S = 1.0


class LimitedConnection(Protocol):
    """What the sweep needs from a connection (server.KafkaConnection)."""

    last_active_ms: int

    @property
    def busy(self) -> bool: ...

    def close(self, reason: str | None) -> None: ...


class ConnectionLimits:
    def __init__(
        self, max_connections: int, max_per_ip: int, max_idle_ms: int, clock: Callable[[], int]
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.max_idle_ms = max_idle_ms
        self.clock = clock
        self._per_ip: Counter[str] = Counter()
        self._total = 0

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the reason to refuse it, or None when admitted."""
        if self._total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        if self._per_ip[ip] >= self.max_per_ip:
            return f"max.connections.per.ip={self.max_per_ip} reached for {ip}"
        self._total += 1
        self._per_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        """Forget an admitted connection from ``ip`` (once, when it closes)."""
        self._total -= 1
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]

    def close_idle(self, connections: Iterable[LimitedConnection]) -> int:
        """Close every connection idle past ``max_idle_ms``; returns how many."""
        deadline = self.clock() - self.max_idle_ms
        idle = [c for c in connections if c.last_active_ms < deadline and not c.busy]
        for conn in idle:
            conn.close(f"idle for more than connections.max.idle.ms={self.max_idle_ms}")
        return len(idle)

    async def sweep_idle(self, connections: Collection[LimitedConnection]) -> None:
        """Run ``close_idle`` periodically, forever (the broker cancels it at stop)."""
        interval = min(_MAX_SWEEP_S, max(_MIN_SWEEP_S, self.max_idle_ms / 1000 / _SWEEPS_PER_PERIOD))
        while True:
            await asyncio.sleep(interval)
            try:
                self.close_idle(list(connections))
            except Exception:  # one bad connection must not stop the sweep
                log.exception("closing idle connections failed")
