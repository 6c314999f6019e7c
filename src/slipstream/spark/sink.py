"""Writing a DataFrame to topics: ``df.write.format("slipstream")`` and ``writeStream``.

Columns, as Spark's Kafka sink takes them:

- ``value`` (binary or string), required
- ``key`` (binary or string), optional
- ``topic`` (string): required unless the ``topic`` option is set (the option wins)
- ``partition`` (int), optional: where null/absent, keyed records go by murmur2 of
  the key (Java-compatible), unkeyed ones by the sticky partitioner
- ``headers`` (array<struct<key string, value binary-or-string>>), optional

Each Spark task writes through one idempotent ``AIOProducer`` (acks=all), on a
private event loop, and flushes before it reports success; a record the broker
refuses fails the task with the broker's error (code and message). Options:
``kafka.bootstrap.servers``, ``topic``, and the producer settings
``kafka.compression.type``, ``kafka.linger.ms``, ``kafka.batch.size``,
``kafka.max.request.size``, ``kafka.delivery.timeout.ms``.

``exactlyOnce=true`` (streaming writes only) writes each micro-batch in Kafka
transactions committed by the driver, so a micro-batch replayed after a failure
writes nothing twice (see exactly_once.py); with it, ``transactionalIdPrefix``
(default ``slipstream-spark-<query id>``) and ``kafka.transaction.timeout.ms``
(default 300000). The name is Spark-style camelCase like ``failOnDataLoss``; Spark's
Kafka sink has no such mode (``kafka.transactional.id`` names one producer, and a
sink needs one id per task, hence a prefix, as Flink's ``transactionalIdPrefix``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from ..client.producer import AIOProducer
from . import exactly_once
from .sink_rows import SinkOptions, produce_rows

log = logging.getLogger(__name__)


class SlipstreamCommitMessage(WriterCommitMessage):
    def __init__(self, records: int, partitions: dict[str, list[int]]) -> None:
        self.records = records
        self.partitions = partitions

    def __repr__(self) -> str:
        return f"SlipstreamCommitMessage(records={self.records}, partitions={self.partitions})"


async def _write(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SlipstreamCommitMessage:
    producer = AIOProducer(
        opts.bootstrap,
        client_id=opts.client_id,
        acks=-1,
        enable_idempotence=True,
        compression=opts.compression,
        linger_ms=opts.linger_ms,
        batch_size=opts.batch_size,
        max_request_size=opts.max_request_size,
        delivery_timeout_ms=opts.delivery_timeout_ms,
        **dataclasses.asdict(opts.security),
    )
    await producer.start()
    try:
        records, written = await produce_rows(producer, opts, batches)
    finally:
        await producer.close()
    return SlipstreamCommitMessage(records, {t: sorted(ps) for t, ps in written.items()})


def write_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SlipstreamCommitMessage:
    """Produce every row of ``batches`` (runs on an executor); raises the first delivery error."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_write(opts, batches))
    finally:
        loop.close()


class SlipstreamWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, SlipstreamCommitMessage))
        log.info("slipstream sink: wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged stay in the log (Kafka sinks are at-least-once).
        total = sum(m.records for m in messages if isinstance(m, SlipstreamCommitMessage))
        log.warning("slipstream sink: write aborted after %d records were written", total)


class SlipstreamStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            transactional_id, batch_id = exactly_once.task_identity(self.opts.transactional_id_prefix)
            loop = asyncio.new_event_loop()
            try:
                return loop.run_until_complete(
                    exactly_once.write_transaction(self.opts, transactional_id, batch_id, iterator)
                )
            finally:
                loop.close()
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            exactly_once.commit_batch(self.opts, list(messages), batchId)
            return
        total = sum(m.records for m in messages if isinstance(m, SlipstreamCommitMessage))
        log.info("slipstream sink: batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            exactly_once.abort_batch(self.opts, list(messages), batchId)
            return
        total = sum(m.records for m in messages if isinstance(m, SlipstreamCommitMessage))
        log.warning("slipstream sink: batch %d aborted after %d records were written", batchId, total)
