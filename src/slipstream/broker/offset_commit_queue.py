"""Group commit of OffsetCommit: the commits of one event-loop turn share one write.

The group adapter (groups.py) hands over each commit the coordinator has handled; at
the end of the turn, or before any other operation, it takes the queue and writes
its records as one batch per offsets partition, replayed; this queue then answers
the commits in order, at once or (fsync policy) once their batches are synced, one
written batch after another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..coordinator import OFFSETS_TOPIC, CoordinatorResult
from ..log.api import PartitionLog
from ..protocol.errors import ErrorCode
from ..protocol.schema import Struct
from .state import BrokerState

log = logging.getLogger(__name__)


@dataclass(slots=True)
class QueuedCommit:
    """A commit already handled by the coordinator whose records wait for the next write."""

    result: CoordinatorResult
    future: asyncio.Future[Struct]
    error: int = ErrorCode.NONE


def commits_by_partition(queued: list[QueuedCommit]) -> dict[int, list[QueuedCommit]]:
    """The commits writing to each offsets partition (a commit spanning several counts
    as failed if any of them fails)."""
    by_partition: defaultdict[int, list[QueuedCommit]] = defaultdict(list)
    for item in queued:
        # OffsetCommit writes to its group's partition only.
        records = item.result.records
        if len(records) == 1:
            by_partition[records[0].partition].append(item)
        else:
            for partition in {r.partition for r in records}:
                by_partition[partition].append(item)
    return by_partition


class OffsetCommitQueue:
    def __init__(
        self,
        state: BrokerState,
        *,
        flush: Callable[[], None],
        deliver: Callable[[CoordinatorResult], None],
        carry_out_later: Callable[[CoordinatorResult], None],
        sync: Callable[[PartitionLog], Awaitable[None]],
    ) -> None:
        self.state = state
        # The adapter's: writes out what ``take`` returns and hands it back to be answered.
        self._flush = flush
        # The adapter's: completes parked requests and records history events.
        self._deliver = deliver
        # The adapter's: a result a commit's callback should not return, carried out in order.
        self._carry_out_later = carry_out_later
        # The adapter's durability barrier for a written offsets partition.
        self._sync = sync
        self._queue: list[QueuedCommit] = []
        self._flush_handle: asyncio.Handle | None = None
        # Written batches awaiting their fsync, the last of them answered last.
        self._syncing: set[asyncio.Task[None]] = set()
        self._last_sync: asyncio.Task[None] | None = None

    def add(self, result: CoordinatorResult) -> asyncio.Future[Struct]:
        """Queue a handled commit; its answer comes once its records are written."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Struct] = loop.create_future()
        self._queue.append(QueuedCommit(result, fut))
        if self._flush_handle is None:
            # Commits handled later in this event-loop turn join the same write.
            self._flush_handle = loop.call_soon(self._flush)
        return fut

    def take(self) -> list[QueuedCommit]:
        """Every commit queued so far, to be written now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        queued, self._queue = self._queue, []
        return queued

    def answer_once_synced(
        self, queued: list[QueuedCommit], written: list[tuple[PartitionLog, list[QueuedCommit]]]
    ) -> None:
        """Answer ``queued`` once each written partition log is synced and every earlier
        batch answered."""
        task = asyncio.get_running_loop().create_task(self._sync_then_answer(queued, written, self._last_sync))
        self._last_sync = task
        self._syncing.add(task)
        task.add_done_callback(self._syncing.discard)

    async def _sync_then_answer(
        self,
        queued: list[QueuedCommit],
        written: list[tuple[PartitionLog, list[QueuedCommit]]],
        previous: asyncio.Task[None] | None,
    ) -> None:
        try:
            for plog, items in written:
                try:
                    await self._sync(plog)
                except Exception as exc:
                    log.error("syncing %s failed: %s", OFFSETS_TOPIC, exc)
                    for item in items:
                        item.error = item.error or ErrorCode.KAFKA_STORAGE_ERROR
            if previous is not None and not previous.done():
                # Answer batches in the order they were written.
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(previous)
        except asyncio.CancelledError:
            for item in queued:
                item.future.cancel()  # stopping: nobody will be answered
            raise
        self.answer(queued)

    def answer(self, queued: list[QueuedCommit]) -> None:
        now = self.state.clock()
        for item in queued:
            try:
                response = self._answer_one(item, now)
            except Exception as exc:  # a coordinator bug must not leave the other commits hanging
                log.exception("answering a queued OffsetCommit failed")
                if not item.future.done():
                    item.future.set_exception(exc)
                continue
            if not item.future.done():
                if response is None:
                    item.future.set_exception(RuntimeError("the coordinator did not answer a queued commit"))
                else:
                    item.future.set_result(response)

    def _answer_one(self, item: QueuedCommit, now: int) -> Struct | None:
        result = item.result
        own = result.pending
        self._deliver(result)
        after = result.after_append
        nxt = after(item.error, now) if after is not None else CoordinatorResult()
        response: Struct | None = None
        rest = []
        for completion in nxt.completions:
            if completion.pending is own:
                response = completion.response
            else:
                rest.append(completion)
        nxt.completions = rest
        self._deliver(nxt)
        if nxt.records or nxt.after_append is not None or nxt.pending is not None:
            # Not what a commit's callback returns; carried out the ordinary way.
            self._carry_out_later(nxt)
        return response

    def stop(self) -> None:
        """Stopping: nothing queued or syncing will be answered."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        for task in list(self._syncing):
            task.cancel()
        for item in self._queue:
            item.future.cancel()
        self._queue.clear()
