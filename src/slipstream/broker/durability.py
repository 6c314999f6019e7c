"""When appended data reaches the disk: page cache, fsync on an interval, or fsync before ack.

The fsync-before-ack policy batches: every produce that arrives while a sync runs
waits for the next one, so concurrent producers share one fsync (group commit).
Rounds run back to back on one worker thread while produces keep waiting, each
answered as soon as its round is done: the storage is never idle for a trip through
the event loop between two rounds. Logs that commit their whole store at once
(``SharedCommitLog``) are flushed only when a waiter's writes to them are not
committed yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from ..log.api import PartitionLog, SharedCommitLog

log = logging.getLogger(__name__)

# A waiter: its log, its mark (the log's queued writes when it asked, SharedCommitLog
# only) and the future it awaits.
_Waiter = tuple[PartitionLog, int | None, "asyncio.Future[None]"]


class GroupCommitter:
    def __init__(self, *, round_wait_s: float = 0.0, round_waiters: int = 2) -> None:
        """``round_wait_s``: a round that would start with the committer idle first waits
        up to this long for ``round_waiters`` waiters (0: starts at once). Rounds that
        follow one another never wait: their waiters gathered during the commit before."""
        self._lock = threading.Lock()  # the waiters: added on the loop, taken by the worker
        self._waiters: list[_Waiter] = []
        self._running = False
        self._worker: asyncio.Future[None] | None = None
        self.round_wait_s = round_wait_s
        self.round_waiters = round_waiters
        self._timed_start: asyncio.TimerHandle | None = None

    async def sync(self, plog: PartitionLog) -> None:
        """Return once ``plog`` (and everything appended with it) is fsynced."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        mark = plog.queued_writes if isinstance(plog, SharedCommitLog) else None
        with self._lock:
            self._waiters.append((plog, mark, fut))
            start, self._running = not self._running, True
            gathered = len(self._waiters) >= self.round_waiters
        if start and self.round_wait_s > 0 and not gathered:
            self._timed_start = loop.call_later(self.round_wait_s, self._start, loop)
        elif start or (gathered and self._timed_start is not None):
            if self._timed_start is not None:  # enough waiters came before the wait ended
                self._timed_start.cancel()
                self._timed_start = None
            # After this loop turn: syncs asked in it (a request's partitions) go in one round.
            loop.call_soon(self._start, loop)
        await fut

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timed_start = None
        self._worker = loop.run_in_executor(None, self._rounds, loop)

    def _rounds(self, loop: asyncio.AbstractEventLoop) -> None:
        """On a worker thread: one round per batch of waiters, until none is left."""
        while True:
            with self._lock:
                waiters, self._waiters = self._waiters, []
                if not waiters:
                    self._running = False
                    return
            error: Exception | None = None
            try:
                _flush_all(waiters)
            except Exception as exc:  # storage failure: fail the produces, keep serving
                log.error("fsync failed: %s", exc)
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, [fut for _, _, fut in waiters], error)


def _settle(futures: list[asyncio.Future[None]], error: Exception | None) -> None:
    for fut in futures:
        if fut.done():
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)


def _flush_all(waiters: list[_Waiter]) -> None:
    marks: dict[PartitionLog, int | None] = {}
    for plog, mark, _ in waiters:
        known = marks.get(plog, mark)
        marks[plog] = None if mark is None or known is None else max(mark, known)
    for plog, mark in marks.items():
        if mark is not None and plog.committed_writes >= mark:  # type: ignore[attr-defined]
            continue  # a commit run for another log of its store took them
        plog.flush()
