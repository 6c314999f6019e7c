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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from ..client.producer import AIOProducer
from ..client.security import PLAINTEXT, ClientSecurity
from . import exactly_once
from .options import OptionError, bootstrap_of, security_of

log = logging.getLogger(__name__)

_KEY_TYPES = (BinaryType, StringType)
_INT_TYPES = (IntegerType, LongType, ShortType)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool
    compression: str = "none"
    linger_ms: float = 5.0
    batch_size: int = 256 * 1024
    max_request_size: int = 4 * 1024 * 1024
    delivery_timeout_ms: float = 120_000.0
    client_id: str = "slipstream-spark-writer"
    exactly_once: bool = False
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = 300_000
    security: ClientSecurity = PLAINTEXT


def _check_type(schema: StructType, name: str, allowed: tuple[type, ...], what: str) -> bool:
    if name not in schema.fieldNames():
        return False
    data_type = schema[name].dataType
    if not isinstance(data_type, allowed):
        raise OptionError(f"column {name!r} must be {what}, not {data_type.simpleString()}")
    return True


def parse_sink_options(options: Mapping[str, str], schema: StructType, *, streaming: bool = True) -> SinkOptions:
    opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    exactly = opts.get("exactlyonce", "false").strip().lower()
    if exactly not in ("true", "false"):
        raise OptionError(f"option exactlyOnce must be true or false, not {exactly!r}")
    if exactly == "true" and not streaming:
        raise OptionError("exactlyOnce=true is for streaming writes (writeStream); a batch write has no batch id")
    bootstrap = bootstrap_of(opts)
    if not _check_type(schema, "value", _KEY_TYPES, "binary or string"):
        raise OptionError(
            f"a DataFrame written to slipstream needs a 'value' column (binary or string); it has "
            f"{', '.join(schema.fieldNames()) or 'no columns'}"
        )
    has_key = _check_type(schema, "key", _KEY_TYPES, "binary or string")
    has_topic = _check_type(schema, "topic", (StringType,), "string")
    topic = opts.get("topic") or None
    if topic is None and not has_topic:
        raise OptionError("set the option topic, or give the DataFrame a 'topic' column")
    has_partition = _check_type(schema, "partition", _INT_TYPES, "int")
    has_headers = False
    if "headers" in schema.fieldNames():
        headers_type = schema["headers"].dataType
        ok = (
            isinstance(headers_type, ArrayType)
            and isinstance(headers_type.elementType, StructType)
            and {"key", "value"} <= set(headers_type.elementType.fieldNames())
            and isinstance(headers_type.elementType["key"].dataType, StringType)
            and isinstance(headers_type.elementType["value"].dataType, _KEY_TYPES)
        )
        if not ok:
            raise OptionError(
                "column 'headers' must be array<struct<key: string, value: binary>>, "
                f"not {headers_type.simpleString()}"
            )
        has_headers = True

    def num(name: str, default: float) -> float:
        value = opts.get(name)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError:
            raise OptionError(f"option {name} must be a number, not {value!r}") from None

    return SinkOptions(
        bootstrap=bootstrap,
        topic=topic,
        has_key=has_key,
        has_topic=has_topic,
        has_partition=has_partition,
        has_headers=has_headers,
        compression=opts.get("kafka.compression.type", "none"),
        linger_ms=num("kafka.linger.ms", 5.0),
        batch_size=int(num("kafka.batch.size", 256 * 1024)),
        max_request_size=int(num("kafka.max.request.size", 4 * 1024 * 1024)),
        delivery_timeout_ms=num("kafka.delivery.timeout.ms", 120_000.0),
        client_id=opts.get("kafka.client.id", "slipstream-spark-writer"),
        exactly_once=exactly == "true",
        transactional_id_prefix=opts.get("transactionalidprefix") or None,
        transaction_timeout_ms=int(num("kafka.transaction.timeout.ms", 300_000)),
        security=security_of(opts),
    )


class SlipstreamCommitMessage(WriterCommitMessage):
    def __init__(self, records: int, partitions: dict[str, list[int]]) -> None:
        self.records = records
        self.partitions = partitions

    def __repr__(self) -> str:
        return f"SlipstreamCommitMessage(records={self.records}, partitions={self.partitions})"


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _headers(value: Any) -> list[tuple[str, bytes | None]] | None:
    if not value:
        return None
    out = []
    for item in value:
        if item is None:
            continue
        name, data = item.get("key"), item.get("value")
        if name is None:
            raise ValueError("a header in the 'headers' column has a null key")
        out.append((name, data.encode() if isinstance(data, str) else data))
    return out


async def produce_rows(
    producer: AIOProducer, opts: SinkOptions, batches: Iterator[pa.RecordBatch]
) -> tuple[int, dict[str, set[int]]]:
    """Send every row of ``batches`` through ``producer`` and flush; raises the first
    delivery error. Returns the number of records and the partitions written per topic."""
    records = 0
    pending: list[asyncio.Future[Any]] = []
    written: dict[str, set[int]] = {}
    for batch in batches:
        values = _column(batch, "value") or []
        keys = _column(batch, "key") if opts.has_key else None
        topics = _column(batch, "topic") if opts.has_topic and opts.topic is None else None
        partitions = _column(batch, "partition") if opts.has_partition else None
        headers = _column(batch, "headers") if opts.has_headers else None
        for i, value in enumerate(values):
            topic = opts.topic if topics is None else topics[i]
            if topic is None:
                raise ValueError("a row has a null 'topic' and no topic option is set")
            fut = await producer.send(
                topic,
                value,
                key=None if keys is None else keys[i],
                headers=None if headers is None else _headers(headers[i]),
                partition=None if partitions is None else partitions[i],
            )
            pending.append(fut)
        records += len(values)
        if len(pending) >= 50_000:
            pending = _check(pending, written, wait=False)
    await producer.flush()
    _check(pending, written, wait=True)
    return records, written


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


def _check(pending: list[asyncio.Future[Any]], written: dict[str, set[int]], *, wait: bool) -> list[asyncio.Future[Any]]:
    """Raise the first delivery error among done futures; return the ones still pending."""
    left = []
    for fut in pending:
        if not fut.done():
            if wait:
                raise RuntimeError("a record was neither delivered nor failed after flush")
            left.append(fut)
            continue
        exc = fut.exception()
        if exc is not None:
            raise exc
        md = fut.result()
        written.setdefault(md.topic, set()).add(md.partition)
    return left


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
