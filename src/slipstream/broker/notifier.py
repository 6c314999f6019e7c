"""Wakes long-polling fetches when data is appended (the fetch side of Kafka's purgatory)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from .parked_waits import parked_wait_ends

PartitionKey = tuple[str, int]


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: defaultdict[PartitionKey, set[asyncio.Future[bool]]] = defaultdict(set)

    async def wait(self, keys: Iterable[PartitionKey], timeout_s: float) -> bool:
        """Wait until any of ``keys`` gets an append or the timeout passes; True if woken.

        False too, at once, when the requesting connection has gone or has another request
        waiting behind this one (parked_waits.py).
        """
        ends = parked_wait_ends()
        enders: tuple[asyncio.Future[None], ...] = ()
        if ends is not None:
            enders = (ends.gone, ends.request_behind())
            if any(f.done() for f in enders):
                return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        registered = list(keys)
        for key in registered:
            self._waiters[key].add(fut)

        def on_end(_: asyncio.Future[None]) -> None:
            if not fut.done():
                fut.set_result(False)

        for ender in enders:
            ender.add_done_callback(on_end)
        try:
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError:
            return False
        finally:
            for ender in enders:
                ender.remove_done_callback(on_end)
            for key in registered:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

    def waiting(self) -> int:
        """Parked waits right now (each counted once however many partitions it watches)."""
        return len({id(fut) for waiters in self._waiters.values() for fut in waiters})

    def notify(self, key: PartitionKey) -> None:
        waiters = self._waiters.get(key)
        if not waiters:
            return
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)
