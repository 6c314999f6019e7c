"""How a finished batch reaches its records' waiters: futures get their RecordMetadata
or error, delivery callbacks go to a sink in one list per batch; ``send`` calls
waiting for memory are woken as the batch's bytes are freed."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .accumulator import ProducerBatch, RecordAccumulator
from .producer_types import ProducerClosedError, RecordMetadata
from .transactions import TransactionState

log = logging.getLogger("slipstream.client.producer")

_new_tuple = tuple.__new__  # RecordMetadata without the NamedTuple __new__ frame (hot path)

CallbackItems = list[tuple[Any, BaseException | None, RecordMetadata]]


def _run_callbacks(items: Iterable[tuple[Any, BaseException | None, RecordMetadata]]) -> None:
    for callback, error, metadata in items:
        try:
            callback(error, metadata)
        except Exception:
            log.exception("delivery callback %r raised", callback)


class BatchOutcomes:
    """Completes batches: ``succeed``, ``fail`` (releasing it from the accumulator) or
    ``finish`` (already released). A transactional producer's transaction takes any
    failure but a close as its abortable error."""

    def __init__(
        self,
        acc: RecordAccumulator,
        memory_waiters: deque[asyncio.Future[None]],
        txn: TransactionState | None,
    ) -> None:
        self._acc = acc
        self.memory_waiters = memory_waiters
        self.txn = txn
        # Delivery callbacks (callables given as waiters) are handed to this sink in one
        # list per batch; the default runs them right away on the loop.
        self.callback_sink: Callable[[CallbackItems], None] = _run_callbacks

    def succeed(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._acc.complete(batch, acked=True)
        topic, partition = batch.topic, batch.partition
        ts_type = 1 if log_append_time is not None and log_append_time >= 0 else 0
        callbacks: CallbackItems | None = None
        future_type = asyncio.Future
        records = batch.records
        for i, waiter in enumerate(batch.waiters):
            if waiter is None:
                continue
            md = _new_tuple(
                RecordMetadata,
                (
                    topic,
                    partition,
                    base_offset + i if base_offset >= 0 else -1,
                    log_append_time if ts_type else records[i][3],
                    ts_type,
                ),
            )
            if isinstance(waiter, future_type):
                if not waiter.done():
                    waiter.set_result(md)
            else:
                if callbacks is None:
                    callbacks = []
                callbacks.append((waiter, None, md))
        if callbacks:
            self.callback_sink(callbacks)
        self.done(batch)

    def fail(self, batch: ProducerBatch, error: BaseException) -> None:
        self._acc.complete(batch, acked=False)
        self.finish(batch, error)

    def finish(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail every record of a batch already released from the accumulator."""
        if self.txn is not None and not isinstance(error, ProducerClosedError):
            self.txn.fail(error)  # the transaction can only be aborted now
        log.warning(
            "delivery of %d record(s) to %s-%d failed: %s",
            len(batch.records),
            batch.topic,
            batch.partition,
            error,
        )
        callbacks: CallbackItems | None = None
        future_type = asyncio.Future
        for i, waiter in enumerate(batch.waiters):
            if waiter is None:
                continue
            if isinstance(waiter, future_type):
                if not waiter.done():
                    waiter.set_exception(error)
                    waiter.exception()  # logged above; don't also warn at garbage collection
            else:
                if callbacks is None:
                    callbacks = []
                md = RecordMetadata(batch.topic, batch.partition, -1, batch.records[i][3])
                callbacks.append((waiter, error, md))
        if callbacks:
            self.callback_sink(callbacks)
        self.done(batch)

    def done(self, batch: ProducerBatch) -> None:
        batch.waiters = []
        fut = batch.done_future
        if fut is not None and not fut.done():
            fut.set_result(None)
        if self.memory_waiters:
            for waiter in self.memory_waiters:
                if not waiter.done():
                    waiter.set_result(None)
