"""Wakes long-polling fetches when data is appended (the fetch side of Kafka's purgatory)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

PartitionKey = tuple[str, int]


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: defaultdict[PartitionKey, set[asyncio.Future[None]]] = defaultdict(set)

    async def wait(self, keys: Iterable[PartitionKey], timeout_s: float) -> bool:
        """Wait until any of ``keys`` gets an append or the timeout passes; True if woken."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        registered = list(keys)
        for key in registered:
            self._waiters[key].add(fut)
        try:
            async with asyncio.timeout(timeout_s):
                await fut
            return True
        except TimeoutError:
            return False
        finally:
            for key in registered:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, key: PartitionKey) -> None:
        waiters = self._waiters.get(key)
        if not waiters:
            return
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
