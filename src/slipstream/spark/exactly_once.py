"""The streaming sink's exactly-once mode (``exactlyOnce=true``): Kafka transactions
with a two-phase commit between Spark's tasks and its driver.

Spark's own Kafka sink is at-least-once: a micro-batch that is run again after a
failure writes its rows again. Here a replayed micro-batch writes nothing twice.

Design
------
Each task (partition ``p`` of micro-batch ``B`` of the query) uses the transactional id
``<prefix>-<p>``, where ``<prefix>`` is the option ``transactionalIdPrefix`` or else
``slipstream-spark-<query id>`` (Spark keeps a query's id in its checkpoint, so a
restarted query gets the same ids). The task, on the executor:

1. ``init_transactions()``: fences any earlier attempt of the same task (a retried
   or zombie task, or the task of a crashed run) and aborts its open transaction;
2. reads the *batch marker* of its id: the committed offset of the consumer group
   named like the transactional id (no consumer ever joins it). If the marker is
   ``>= B`` this task's rows of batch ``B`` are already committed: it writes nothing;
3. otherwise begins a transaction, produces its rows, and adds the marker
   ``offset = B`` to the same transaction (``send_offsets_to_transaction``), so the
   marker becomes visible exactly when the rows do;
4. flushes and leaves the transaction *open*, returning (transactional id, producer
   id, epoch) to the driver as its commit message.

The driver's ``commit(messages, B)`` ends each open transaction with EndTxn(commit)
(:func:`slipstream.client.transactions.end_transaction`); ``abort(messages, B)`` ends
them with EndTxn(abort). Only then does Spark record ``B`` in its commit log.

Crash points (Spark re-runs batch ``B`` from its offset log after a restart, with the
same input; task retries re-run single tasks):

- a task fails or dies while writing: its transaction is open; the retry's (or the
  replay's) ``init_transactions`` aborts it, the marker is < ``B``, the rows are
  written again, once;
- after the tasks, before or while the driver commits: transactions the driver had
  committed carry marker ``B``, so their tasks skip on replay; the others are still
  open (or were aborted by their timeout) and are aborted by the replay's
  ``init_transactions``, then written again. A commit the coordinator had accepted
  (PrepareCommit) completes on its own; ``init_transactions`` waits for it;
- after the driver committed, before Spark's commit log: every marker is ``B``; the
  replay writes nothing;
- a transaction that outlives ``kafka.transaction.timeout.ms`` before the driver
  commits is aborted by the coordinator; the driver's EndTxn then fails
  (INVALID_PRODUCER_EPOCH), the batch fails and is replayed: nothing is lost or doubled.

Requirements: the replayed batch must give each task the same rows as the first run
(true of Spark's deterministic plans over a replayable source like ``slipstream`` or
``kafka``; not of nondeterministic expressions or a changed
``spark.sql.shuffle.partitions``), and speculative execution must be off (a
speculative copy of a task fences its twin; the batch then fails and is replayed,
which is safe but wasteful). Readers must use ``read_committed`` to see only
committed rows. Each task id leaves one transactional id and one small consumer group
behind on the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from ..client.admin import Admin
from ..client.cluster import Cluster
from ..client.producer import AIOProducer
from ..client.transactions import ConsumerGroupMetadata, TransactionError, end_transaction
from .sink_rows import SinkOptions, produce_rows

log = logging.getLogger(__name__)

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY


class TransactionalCommitMessage(WriterCommitMessage):
    """What a task hands the driver: its open transaction (``producer_id`` -1 when the
    task wrote nothing, or skipped rows already committed by an earlier run)."""

    def __init__(
        self, transactional_id: str, producer_id: int, producer_epoch: int, records: int, *, skipped: bool = False
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.records = records
        self.skipped = skipped

    @property
    def is_open(self) -> bool:
        return self.producer_id >= 0

    def __repr__(self) -> str:
        return (
            f"TransactionalCommitMessage({self.transactional_id!r}, producer {self.producer_id} epoch "
            f"{self.producer_epoch}, records={self.records}, skipped={self.skipped})"
        )


def task_identity(prefix: str | None) -> tuple[str, int]:
    """(transactional id, batch id) of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the exactly-once sink runs only inside Spark tasks")
    batch = context.getLocalProperty(BATCH_ID_PROPERTY)
    query = context.getLocalProperty(QUERY_ID_PROPERTY)
    if batch is None or (prefix is None and query is None):
        raise RuntimeError("exactlyOnce=true works only in streaming queries (no micro-batch id in the task)")
    base = prefix if prefix is not None else f"slipstream-spark-{query}"
    return f"{base}-{context.partitionId()}", int(batch)


async def last_committed_batch(admin: Admin, transactional_id: str) -> int:
    """The marker of ``transactional_id``: the last batch it committed, -1 if none."""
    committed = await admin.list_committed_offsets(transactional_id)
    return max((c.offset for c in committed.values()), default=-1)


async def write_transaction(
    opts: SinkOptions, transactional_id: str, batch_id: int, batches: Iterator[pa.RecordBatch]
) -> TransactionalCommitMessage:
    """Steps 1-4 of the module docstring, on the executor."""
    producer = AIOProducer(
        opts.bootstrap,
        client_id=opts.client_id,
        transactional_id=transactional_id,
        transaction_timeout_ms=opts.transaction_timeout_ms,
        compression=opts.compression,
        linger_ms=opts.linger_ms,
        batch_size=opts.batch_size,
        max_request_size=opts.max_request_size,
        delivery_timeout_ms=opts.delivery_timeout_ms,
        **dataclasses.asdict(opts.security),
    )
    await producer.start()
    try:
        await producer.init_transactions()
        last = await last_committed_batch(Admin(producer.cluster), transactional_id)
        if last >= batch_id:
            log.info("%s: batch %d was committed before (marker %d): nothing to write", transactional_id, batch_id, last)
            return TransactionalCommitMessage(transactional_id, -1, -1, 0, skipped=True)
        producer.begin_transaction()
        try:
            records, written = await produce_rows(producer, opts, batches)
            if not records:
                await producer.abort_transaction()
                return TransactionalCommitMessage(transactional_id, -1, -1, 0)
            marker_topic = opts.topic or min(written)
            await producer.send_offsets_to_transaction(
                {(marker_topic, 0): batch_id}, ConsumerGroupMetadata(transactional_id)
            )
            await producer.flush()
        except BaseException:
            # Release the partitions' LSO now rather than at the transaction timeout.
            try:
                await producer.abort_transaction()
            except Exception as exc:  # the original error matters more
                log.warning("%s: abort after a failed write failed too: %s", transactional_id, exc)
            raise
        return TransactionalCommitMessage(transactional_id, producer.producer_id, producer.producer_epoch, records)
    finally:
        await producer.close()  # leaves the transaction open: the driver ends it


def end_transactions(opts: SinkOptions, messages: list[Any], *, commit: bool) -> list[BaseException]:
    """EndTxn for every open transaction among ``messages`` (on the driver), concurrently.
    Returns the failures."""
    open_ones = [m for m in messages if isinstance(m, TransactionalCommitMessage) and m.is_open]
    if not open_ones:
        return []

    async def main() -> list[BaseException]:
        cluster = Cluster(opts.bootstrap, client_id=opts.client_id, security=opts.security)
        try:
            results = await asyncio.gather(
                *(
                    end_transaction(
                        cluster, m.transactional_id, m.producer_id, m.producer_epoch, commit=commit,
                        timeout_s=opts.delivery_timeout_ms / 1000,
                    )
                    for m in open_ones
                ),
                return_exceptions=True,
            )
        finally:
            await cluster.close()
        return [r for r in results if isinstance(r, BaseException)]

    return asyncio.run(main())


def commit_batch(opts: SinkOptions, messages: list[Any], batch_id: int) -> None:
    failures = end_transactions(opts, messages, commit=True)
    if failures:
        first = failures[0]
        detail = str(first) if isinstance(first, TransactionError) else repr(first)
        raise RuntimeError(
            f"slipstream exactly-once sink: {len(failures)} transaction(s) of batch {batch_id} could not be "
            f"committed ({detail}); the batch is replayed from the checkpoint on restart"
        ) from first
    total = sum(m.records for m in messages if isinstance(m, TransactionalCommitMessage))
    skipped = sum(1 for m in messages if isinstance(m, TransactionalCommitMessage) and m.skipped)
    log.info("slipstream sink: batch %d committed %d records (%d tasks had committed before)", batch_id, total, skipped)


def abort_batch(opts: SinkOptions, messages: list[Any], batch_id: int) -> None:
    for failure in end_transactions(opts, messages, commit=False):
        # An abort that fails leaves the transaction to the replay's fencing or its timeout.
        log.warning("slipstream sink: aborting batch %d: %s", batch_id, failure)


__all__ = [
    "TransactionalCommitMessage",
    "abort_batch",
    "commit_batch",
    "end_transactions",
    "last_committed_batch",
    "task_identity",
    "write_transaction",
]
