"""The client's logging: records of ``slipstream.client.*`` loggers name the client.

Every record logged by the client's modules gets a ``client_id`` attribute (usable in
a format string as ``%(client_id)s``) and its message is prefixed with
``[client-id]``, so the logs of several producers and consumers in one process can be
told apart. Nothing is configured beyond that: handlers and levels are the
application's, through :mod:`logging` as usual.

Which client a record belongs to: a client's own network thread (the blocking
``Producer`` and ``Consumer``) is registered with its id; on the application's event
loop the asyncio clients set a context variable when they start and on each call, so
the tasks they create carry it.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterable

UNKNOWN_CLIENT = "-"

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("slipstream_client_id", default=None)
_threads: dict[int, str] = {}


def bind(client_id: str) -> None:
    """Records logged from here on in this context (and tasks created from it) name ``client_id``."""
    if _current.get() != client_id:
        _current.set(client_id)


def run_as(client_id: str, target: Callable[[], object]) -> Callable[[], None]:
    """A thread target that runs ``target`` with this thread's records naming ``client_id``."""

    def run() -> None:
        ident = threading.get_ident()
        _threads[ident] = client_id
        try:
            target()
        finally:
            _threads.pop(ident, None)

    return run


def current_client_id() -> str:
    return _threads.get(threading.get_ident()) or _current.get() or UNKNOWN_CLIENT


class ClientIdFilter(logging.Filter):
    """Adds ``client_id`` to a record and prefixes its message with it (once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "client_id"):
            client_id = current_client_id()
            record.client_id = client_id
            # The id is text, not a format: escape % when the message is %-formatted.
            shown = client_id.replace("%", "%%") if record.args else client_id
            record.msg = f"[{shown}] {record.msg}"
        return True


_FILTER = ClientIdFilter()


def install(logger_names: Iterable[str]) -> None:
    """Attach the filter to these loggers (a logger's filters see only its own records,
    so each client module's logger gets it)."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def install_for_client_modules() -> None:
    names = [name for name in logging.root.manager.loggerDict if name.startswith("slipstream.client")]
    install(["slipstream.client", *names])
