"""Task helpers shared by the client's asyncio adapters."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None] | None]) -> None:
    """Cancel tasks and wait until they are done.

    Cancels again until each has finished: on Python 3.11 ``asyncio.wait_for``
    can swallow a cancellation that races with its inner future completing.
    """
    all_tasks = [t for t in tasks if t is not None]
    pending = [t for t in all_tasks if not t.done()]
    for t in pending:
        t.cancel()
    while pending:
        _done, still = await asyncio.wait(pending, timeout=0.1)
        for t in still:
            t.cancel()
        pending = list(still)
    for t in all_tasks:
        if not t.cancelled():
            t.exception()  # retrieved: no "exception was never retrieved" warning


@contextlib.asynccontextmanager
async def deadline(seconds: float, what: str) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)`` whose TimeoutError says what was waited for and how long
    (a bare ``TimeoutError()`` tells a user nothing)."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise TimeoutError(f"{what}: gave up after {seconds:g} s{detail}") from exc
