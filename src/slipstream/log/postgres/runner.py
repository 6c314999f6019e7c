"""A private event loop thread that owns the asyncpg connection pool.

The log interface is synchronous (the broker calls it on its event loop, and the
group committer calls ``flush`` on a worker thread), while asyncpg is asyncio-only:
each call submits a coroutine to this thread's loop and waits for its result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


# A database that hangs (a host cut off, a failover leaving connections dangling) fails
# calls after these instead of holding the broker's commits forever; the statement
# timeout is Kafka's default request.timeout.ms, as a large group commit may take a while.
CONNECT_TIMEOUT_S = 10.0
STATEMENT_TIMEOUT_S = 30.0


async def keep_session(conn: Any) -> None:
    """The pools' reset of a connection handed back (``create_pool(reset=...)``): nothing.
    asyncpg's default sends ``RESET ALL; CLOSE ALL; UNLISTEN *; pg_advisory_unlock_all()``,
    one more round trip and transaction per use (a commit round's included), to undo
    session state this code never leaves: no SET, LISTEN or session advisory lock, and
    cursors only inside transactions. A transaction left open is still rolled back (the
    pool does that before calling this)."""


class DatabaseError(OSError):
    """The database failed a call or could not be reached (restarting, connection lost).

    An OSError, as a failing disk's errors are: the broker answers the request with a
    retriable storage error (KAFKA_STORAGE_ERROR, or the coordinators' NOT_COORDINATOR)
    and the next call reconnects through the pool."""


class DatabaseThread:
    def __init__(self, url: str, *, min_connections: int = 1, max_connections: int = 4) -> None:
        try:
            import asyncpg  # the `postgres` extra; imported only when this store is used
        except ImportError:
            raise RuntimeError(
                "storage 'postgres' needs the asyncpg driver: pip install 'slipstream[postgres]'"
            ) from None

        # Everything asyncpg raises (SQL errors, lost connections, a server shutting down,
        # a statement past its timeout).
        self._driver_errors: tuple[type[Exception], ...] = (
            asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError, TimeoutError,
        )  # fmt: skip
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="slipstream-postgres", daemon=True
        )
        self._thread.start()
        try:

            async def connect() -> Any:  # the pool binds to the loop it is made on
                return await asyncpg.create_pool(
                    url, min_size=min_connections, max_size=max_connections,
                    timeout=CONNECT_TIMEOUT_S, command_timeout=STATEMENT_TIMEOUT_S, reset=keep_session,
                )  # fmt: skip

            self.pool: Any = self.run(connect())
        except BaseException:
            self._stop_loop()
            raise

    def run(self, coro: Awaitable[T]) -> T:
        """Run ``coro`` on the database loop and wait for its result (blocking)."""

        async def wrapped() -> T:
            return await coro

        try:
            return asyncio.run_coroutine_threadsafe(wrapped(), self._loop).result()
        except self._driver_errors as exc:
            raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc

    def with_connection(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``work(conn)`` with a pooled connection."""

        async def go() -> T:
            async with self.pool.acquire() as conn:
                return await work(conn)

        return self.run(go())

    def close(self) -> None:
        if self._thread.is_alive():
            try:
                self.run(self.pool.close())
            finally:
                self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
