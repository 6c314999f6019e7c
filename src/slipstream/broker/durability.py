"""When appended data reaches the disk: page cache, fsync on an interval, or fsync before ack.

The fsync-before-ack policy batches: every produce that arrives while a sync runs
waits for the next one, so concurrent producers share one fsync (group commit).
Logs that commit their whole store at once (``SharedCommitLog``) are flushed only when
the round's writes to them are not committed yet.
"""

from __future__ import annotations

import asyncio
import logging

from ..log.api import PartitionLog, SharedCommitLog

log = logging.getLogger(__name__)


class GroupCommitter:
    def __init__(self) -> None:
        self._dirty: set[PartitionLog] = set()
        self._waiters: list[asyncio.Future[None]] = []
        self._running = False
        self._task: asyncio.Task[None] | None = None

    async def sync(self, plog: PartitionLog) -> None:
        """Return once ``plog`` (and everything appended with it) is fsynced."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._dirty.add(plog)
        self._waiters.append(fut)
        if not self._running:
            self._running = True
            self._task = loop.create_task(self._run())
        await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiters:
                dirty, self._dirty = self._dirty, set()
                waiters, self._waiters = self._waiters, []
                # On the loop, where appends happen: what this round's waiters wrote.
                marks: dict[PartitionLog, int] = {
                    plog: plog.queued_writes for plog in dirty if isinstance(plog, SharedCommitLog)
                }
                try:
                    await loop.run_in_executor(None, _flush_all, dirty, marks)
                except Exception as exc:  # storage failure: fail the produces, keep serving
                    log.error("fsync failed: %s", exc)
                    for fut in waiters:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(None)
        finally:
            self._running = False


def _flush_all(logs: set[PartitionLog], marks: dict[PartitionLog, int]) -> None:
    for plog in logs:
        mark = marks.get(plog)
        if mark is not None and plog.committed_writes >= mark:  # type: ignore[attr-defined]
            continue  # a commit run for another log of its store took them
        plog.flush()
