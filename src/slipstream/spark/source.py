"""The ``slipstream`` data source: batch and streaming reads (and, via sink.py, writes).

Columns are those of Spark's Kafka source: key binary, value binary, topic string,
partition int, offset long, timestamp timestamp, timestampType int, and headers
array<struct<key string, value binary>> (dropped with ``includeHeaders=false``).

Readers are pickled to executors, so they hold only options; every driver-side
call opens its own short-lived connection and ``read()`` relies only on its
InputPartition (one topic-partition offset range).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..client.admin import Admin
from ..client.log_offsets_admin import EARLIEST, LATEST
from ..client.security import PLAINTEXT, ClientSecurity
from ..protocol.records import Record
from . import kafka_io
from .kafka_io import DataLossError, RangeFetcher, data_loss_message, retention_loss_message
from .options import (
    OffsetMap,
    OffsetRange,
    OffsetSpec,
    SourceOptions,
    TopicPartition,
    offsets_from_json,
    offsets_to_dict,
    parse_source_options,
    plan_ranges,
    rate_limit,
)

log = logging.getLogger(__name__)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class OffsetRangePartition(InputPartition):
    """[start, end) of one topic-partition, plus everything ``read()`` needs to fetch it."""

    def __init__(
        self, bootstrap: str, r: OffsetRange, *, fail_on_data_loss: bool, client_id: str, max_bytes: int,
        timeout_s: float, read_committed: bool = False, security: ClientSecurity = PLAINTEXT,
    ) -> None:
        super().__init__((r.topic, r.partition, r.start, r.end))
        self.bootstrap = bootstrap
        self.security = security
        self.topic = r.topic
        self.partition = r.partition
        self.start = r.start
        self.end = r.end
        self.fail_on_data_loss = fail_on_data_loss
        self.client_id = client_id
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.read_committed = read_committed

    def __repr__(self) -> str:
        return f"OffsetRangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def _make_partitions(opts: SourceOptions, ranges: list[OffsetRange]) -> list[OffsetRangePartition]:
    return [
        OffsetRangePartition(
            opts.bootstrap, r, fail_on_data_loss=opts.fail_on_data_loss, client_id=opts.client_id,
            max_bytes=opts.fetch_max_bytes, timeout_s=opts.request_timeout_s, security=opts.security,
            read_committed=opts.isolation_level == 1,
        )
        for r in ranges
    ]


def records_to_arrow(
    records: list[Record], topic: str, partition: int, schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    n = len(records)
    columns: list[pa.Array] = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], schema.field("timestamp").type),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if include_headers:
        headers_type = schema.field("headers").type
        # Spark's Kafka source gives null, not an empty array, for a record without headers.
        if any(r.headers for r in records):
            columns.append(
                pa.array(
                    [[{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in records],
                    headers_type,
                )
            )
        else:
            columns.append(pa.nulls(n, headers_type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_partition(partition: InputPartition, schema: StructType, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """Fetch exactly the partition's offset range, as Arrow batches (runs on executors)."""
    if not isinstance(partition, OffsetRangePartition):
        return  # Spark plans one empty InputPartition(None) when there is nothing to read
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    fetcher = RangeFetcher(
        partition.bootstrap,
        partition.topic,
        partition.partition,
        partition.start,
        partition.end,
        fail_on_data_loss=partition.fail_on_data_loss,
        client_id=partition.client_id,
        max_bytes=partition.max_bytes,
        timeout_s=partition.timeout_s,
        read_committed=partition.read_committed,
        security=partition.security,
    )
    for chunk in fetcher:
        yield records_to_arrow(chunk, partition.topic, partition.partition, arrow_schema, include_headers)


# ---------------------------------------------------------------------------- offsets on the driver


async def _resolve_spec(
    admin: Admin, opts: SourceOptions, spec: OffsetSpec, tps: list[TopicPartition]
) -> OffsetMap:
    """Concrete offsets for ``spec`` on every partition in ``tps``."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return await kafka_io.log_offsets(admin, tps, EARLIEST)
    if spec.kind == "latest":
        return await kafka_io.log_offsets(admin, tps, LATEST, opts.isolation_level)
    if spec.kind == "timestamp":
        if spec.timestamp is not None:
            stamps = dict.fromkeys(tps, spec.timestamp)
        else:
            missing = sorted(set(tps) - set(spec.timestamps))
            if missing:
                raise ValueError(
                    f"OffsetsByTimestamp has no timestamp for {', '.join(f'{t}-{p}' for t, p in missing)}"
                )
            stamps = {tp: spec.timestamps[tp] for tp in tps}
        return await kafka_io.offsets_for_times(admin, stamps, opts.isolation_level)
    fallback = EARLIEST if spec.fallback == "earliest" else LATEST
    given: OffsetMap = {}
    if spec.kind == "group":
        assert opts.group_id is not None
        given = await kafka_io.committed_offsets(admin, opts.group_id, tps)
    elif spec.kind == "json":
        wanted = set(tps)
        given = {tp: o for tp, o in spec.offsets.items() if tp in wanted}
        unknown = sorted(set(spec.offsets) - set(tps))
        if unknown:
            log.warning("offsets given for partitions outside the subscription are ignored: %s", unknown)
    needs: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        o = given.get(tp, fallback)
        if o < 0:
            needs.setdefault(o, []).append(tp)
    out = {tp: o for tp, o in given.items() if o >= 0}
    for when, group in needs.items():
        out.update(await kafka_io.log_offsets(admin, sorted(group), when, opts.isolation_level))
    return {tp: out[tp] for tp in tps}


# ---------------------------------------------------------------------------- batch


class SlipstreamBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts

        async def plan(admin: Admin) -> tuple[OffsetMap, OffsetMap, OffsetMap]:
            tps = await kafka_io.resolve_partitions(admin, opts)
            start = await _resolve_spec(admin, opts, opts.starting, tps)
            end = await _resolve_spec(admin, opts, opts.ending, tps)
            earliest = await kafka_io.log_offsets(admin, tps, EARLIEST)
            return start, end, earliest

        start, end, earliest = kafka_io.run(
            opts.bootstrap, plan, client_id=opts.client_id, timeout_s=opts.request_timeout_s,
            security=opts.security,
        )
        for tp, s in sorted(start.items()):
            if s < earliest[tp] and s < end[tp]:
                message = retention_loss_message(tp[0], tp[1], s, earliest[tp])
                if opts.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s", message)
                start[tp] = earliest[tp]
        return _make_partitions(opts, plan_ranges(start, end, opts.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.schema, self.opts.include_headers)


# ---------------------------------------------------------------------------- streaming


class SlipstreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Offsets are JSON ``{"topic": {"partition": offset}}``.

    Lives in Spark's streaming-source runner process on the driver; only ``read()``
    runs on executors (on a pickled copy).
    """

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._target: OffsetMap | None = None  # availableNow: never read past this
        self._latest: OffsetMap = {}
        self._committed: OffsetMap | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors need only the options and the schema.
        return {"opts": self.opts, "schema": self.schema, "_target": None, "_latest": {}, "_committed": None}

    def _run(self, fn: Any) -> Any:
        return kafka_io.run(
            self.opts.bootstrap, fn, client_id=self.opts.client_id, timeout_s=self.opts.request_timeout_s,
            security=self.opts.security,
        )

    def initialOffset(self) -> dict:
        opts = self.opts

        async def initial(admin: Admin) -> OffsetMap:
            tps = await kafka_io.resolve_partitions(admin, opts)
            return await _resolve_spec(admin, opts, opts.starting, tps)

        offsets: OffsetMap = self._run(initial)
        log.info("slipstream source %s starts at %s", opts.subscription, offsets_to_dict(offsets))
        return offsets_to_dict(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        async def latest(admin: Admin) -> OffsetMap:
            tps = await kafka_io.resolve_partitions(admin, self.opts)
            return await kafka_io.log_offsets(admin, tps, LATEST, self.opts.isolation_level)

        self._target = self._run(latest)
        log.info("slipstream source: availableNow target %s", offsets_to_dict(self._target or {}))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        opts = self.opts
        begin = offsets_from_json(start or {}, what="start offset")
        # Everything before ``start`` has been processed by a completed micro-batch (or is
        # where the query begins): record it as the group's position. This also covers the
        # final batch of an availableNow query, for which Spark never calls commit().
        self._commit_group(begin)

        async def current(admin: Admin) -> tuple[list[TopicPartition], OffsetMap, OffsetMap]:
            tps = await kafka_io.resolve_partitions(admin, opts)
            latest = await kafka_io.log_offsets(admin, tps, LATEST, opts.isolation_level)
            new = [tp for tp in tps if tp not in begin]
            earliest = await kafka_io.log_offsets(admin, new, EARLIEST)
            return tps, latest, earliest

        tps, latest, earliest_new = self._run(current)
        self._latest = dict(latest)
        full_start: OffsetMap = {}
        for tp in tps:
            if tp in begin:
                full_start[tp] = begin[tp]
            else:
                full_start[tp] = earliest_new[tp]
                log.info("slipstream source: new partition %s-%s from offset %d", tp[0], tp[1], earliest_new[tp])
        gone = sorted(set(begin) - set(tps))
        if gone:
            message = (
                f"data loss: partitions {', '.join(f'{t}-{p}' for t, p in gone)} are gone "
                "(topic deleted?); set failOnDataLoss=false to continue without them"
            )
            if opts.fail_on_data_loss:
                raise DataLossError(message)
            log.warning("%s", message)
        upto: OffsetMap = {}
        for tp in tps:
            first, last = full_start[tp], latest[tp]
            if last < first:
                message = data_loss_message(
                    tp[0], tp[1], first, f"the log now ends at offset {last} (truncated or recreated)"
                )
                if opts.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s", message)
                upto[tp] = last
            elif self._target is not None:
                upto[tp] = max(first, min(last, self._target.get(tp, first)))
            else:
                upto[tp] = last
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(full_start, upto, limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            backlog = sum(max(0, upto[tp] - full_start[tp]) for tp in tps)
            end = upto if backlog >= limit.min_rows else full_start
        else:
            end = upto
        if end == begin:
            return start
        return offsets_to_dict(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_dict(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        opts = self.opts
        begin = offsets_from_json(start or {}, what="start offset")
        until = offsets_from_json(end or {}, what="end offset")
        new = [tp for tp in until if tp not in begin]
        tps = sorted(until)

        async def bounds(admin: Admin) -> OffsetMap:
            return await kafka_io.log_offsets(admin, tps, EARLIEST) if tps else {}

        earliest: OffsetMap = self._run(bounds) if until else {}
        first = dict(begin)
        for tp in new:
            # A partition that appeared during this batch is read from its start.
            first[tp] = earliest.get(tp, 0)
        for tp in tps:
            if tp in earliest and first[tp] < earliest[tp] and first[tp] < until[tp]:
                message = retention_loss_message(tp[0], tp[1], first[tp], earliest[tp])
                if opts.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s", message)
                first[tp] = earliest[tp]
        return _make_partitions(opts, plan_ranges(first, until, opts.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.schema, self.opts.include_headers)

    def commit(self, end: dict) -> None:
        self._commit_group(offsets_from_json(end or {}, what="end offset"))

    def _commit_group(self, offsets: OffsetMap) -> None:
        group = self.opts.group_id
        if not group or not offsets or offsets == self._committed:
            return
        try:
            kafka_io.commit_offsets_sync(
                self.opts.bootstrap, group, offsets, client_id=self.opts.client_id, security=self.opts.security
            )
        except Exception as exc:  # a failed commit must not fail the query: the next one retries
            log.warning("slipstream source: committing offsets to group %r failed: %s", group, exc)
            return
        self._committed = dict(offsets)
        log.info("slipstream source: committed %s to group %r", offsets_to_dict(offsets), group)

    def stop(self) -> None:
        pass


# ---------------------------------------------------------------------------- the data source


class SlipstreamDataSource(DataSource):
    """``spark.read.format("slipstream")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "slipstream"

    def _include_headers(self) -> bool:
        value = str(dict((str(k).lower(), v) for k, v in self.options.items()).get("includeheaders", "false"))
        return value.strip().lower() not in ("false", "0", "no")

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        return SlipstreamBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SlipstreamStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import SlipstreamWriter
        from .sink_rows import parse_sink_options

        return SlipstreamWriter(parse_sink_options(self.options, schema, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import SlipstreamStreamWriter
        from .sink_rows import parse_sink_options

        return SlipstreamStreamWriter(parse_sink_options(self.options, schema))
