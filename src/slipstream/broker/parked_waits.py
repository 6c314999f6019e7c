"""What ends a connection's parked waits early (a Fetch long-poll), with what they have.

Each connection runs its request tasks in a context where ``PARKED_WAITS`` holds the
connection's ``ParkedWaitEnds``; a parked wait watches two of its signals:

- ``gone``, completed for good when the client closes (EOF) or the connection is lost, so
  a client that goes away frees its task, its waiters and its socket at once instead of
  when a produce happens to wake them (a long-poll may ask for max_wait 2^31-1);
- ``request_behind()``, completed when another request of the same connection is waiting
  behind the parked one. Responses go out in request order, so that request would wait
  the long-poll out: Kafka holds it (e.g. the ListOffsets librdkafka sends on its fetch
  connection) for up to fetch.wait.max.ms. We answer the long-poll at once with what it
  has (an empty answer is one a client must take anyway: its max wait may pass), then
  the request behind it; the client fetches again after it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable


class ParkedWaitEnds:
    """One connection's signals to its parked waits."""

    __slots__ = ("_behind", "_queued", "gone")

    def __init__(self, gone: asyncio.Future[None], queued: Callable[[], bool]) -> None:
        self.gone = gone
        self._queued = queued  # whether a request of the connection waits to start
        self._behind: asyncio.Future[None] | None = None

    def request_behind(self) -> asyncio.Future[None]:
        """Completed when a request waits behind the current one (at once if one does)."""
        behind = self._behind
        if behind is None or behind.done():
            behind = self._behind = self.gone.get_loop().create_future()
            if self._queued():
                behind.set_result(None)
        return behind

    def signal_request_behind(self) -> None:
        """A request waits behind the one in flight: a parked wait answers now."""
        behind = self._behind
        if behind is not None and not behind.done():
            behind.set_result(None)

    def signal_gone(self) -> None:
        if not self.gone.done():
            self.gone.set_result(None)


PARKED_WAITS: contextvars.ContextVar[ParkedWaitEnds | None] = contextvars.ContextVar(
    "slipstream_parked_waits", default=None
)


def parked_wait_ends() -> ParkedWaitEnds | None:
    """The current request's connection signals (None outside a connection's task)."""
    return PARKED_WAITS.get()


def context_for_connection(ends: ParkedWaitEnds) -> contextvars.Context:
    """A context for a connection's request tasks in which ``parked_wait_ends()`` is ``ends``."""
    context = contextvars.copy_context()
    context.run(PARKED_WAITS.set, ends)
    return context
