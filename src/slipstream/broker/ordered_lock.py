"""An asyncio lock that also says whether anyone holds it or waits for it."""

from __future__ import annotations

import asyncio


class OrderedLock:
    """An asyncio.Lock that also knows whether anyone holds it or waits for it.

    The group adapter's commit fast path may skip the lock only when nobody holds or
    wants it: between a release and the next waiter waking up the plain lock looks
    free, and a commit slipping in there would apply before an earlier commit still
    waiting.
    """

    __slots__ = ("_lock", "_wanted")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._wanted = 0  # holders + waiters

    def busy(self) -> bool:
        return self._wanted > 0

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        self._wanted += 1
        try:
            await self._lock.acquire()
        except BaseException:
            self._wanted -= 1
            raise

    async def __aexit__(self, *_exc: object) -> None:
        self._lock.release()
        self._wanted -= 1
