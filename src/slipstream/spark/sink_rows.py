"""The Spark sink's options (``parse_sink_options``: columns and ``kafka.*`` settings) and
how a task's rows become records (``produce_rows``), shared by the plain writer
(sink.py) and the exactly-once one (exactly_once.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
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
from .options import OptionError, bootstrap_of, security_of

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
