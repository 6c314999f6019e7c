"""A per-connection signal that the client has gone, for requests parked on its behalf.

Each connection runs its request tasks in a context where ``CONNECTION_GONE`` holds a
future the connection completes when the client closes (EOF) or the connection is
lost. A parked wait (a Fetch long-poll with max_wait 2^31-1) watches it, so a client
that goes away frees its task, its waiters and its socket at once instead of when a
produce happens to wake them.
"""

from __future__ import annotations

import asyncio
import contextvars

CONNECTION_GONE: contextvars.ContextVar[asyncio.Future[None] | None] = contextvars.ContextVar(
    "slipstream_connection_gone", default=None
)


def connection_gone() -> asyncio.Future[None] | None:
    """The current request's connection-gone future (None outside a connection's task)."""
    return CONNECTION_GONE.get()


def context_for_connection(gone: asyncio.Future[None]) -> contextvars.Context:
    """A context for a connection's request tasks in which ``connection_gone()`` is ``gone``."""
    context = contextvars.copy_context()
    context.run(CONNECTION_GONE.set, gone)
    return context


def signal_gone(gone: asyncio.Future[None] | None) -> None:
    if gone is not None and not gone.done():
        gone.set_result(None)
