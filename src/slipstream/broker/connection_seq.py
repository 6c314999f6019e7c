"""Which connection a request came on, in the order connections were accepted.

Each connection's request tasks run in a context (see parked_waits.py) where
``CONNECTION_SEQ`` holds the connection's number: 1 for the first one this process
accepted, then upwards. The group coordinator compares them to refuse an OffsetCommit
a member sent on a connection it has since replaced (see offset_manager.py).
"""

from __future__ import annotations

import contextvars
import itertools

CONNECTION_SEQ: contextvars.ContextVar[int] = contextvars.ContextVar("slipstream_connection_seq", default=0)

_accepted = itertools.count(1)


def next_connection_seq() -> int:
    """The number of a newly accepted connection."""
    return next(_accepted)


def connection_seq() -> int:
    """The current request's connection number (0 outside a connection's task)."""
    return CONNECTION_SEQ.get()
