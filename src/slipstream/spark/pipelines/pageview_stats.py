"""pageview-stats: page views per page per minute, from a topic to Parquet and a topic.

Reads JSON page views (``{"page": ..., "user": ..., "ts": epoch-ms}``, see demo.py)
from ``--input-topic`` as consumer group ``--group`` (starting from the group's
committed offsets; the earliest offset for a new group), counts views per page
per ``--window`` of event time with a ``--watermark`` for late events, and when a
window closes (append mode) writes its counts

- to Parquet under ``--output-dir`` (one ``batch_id=N`` directory per micro-batch,
  overwritten if Spark replays the batch, so the files hold each count once), and
- to ``--output-topic`` as JSON ``{"window_start": ms, "window_end": ms, "page":
  ..., "views": n}`` keyed by page (at-least-once if a batch is replayed).

After each micro-batch the source offsets are committed to the group, so
``slipstream groups describe pageview-stats`` shows the pipeline's position and
lag; a progress line per batch reports rows, rate and lag.

    slipstream pipeline demo-data --count 100000
    slipstream pipeline run pageview-stats --available-now
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...client.admin import Admin
from ...client.cluster import TopicInfo
from ...protocol.errors import KafkaError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from ..progress import BatchReport

DESCRIPTION = "page views per page per minute (JSON events -> Parquet + topic), as consumer group pageview-stats"
EVENT_SCHEMA = "page STRING, user STRING, ts LONG"


@dataclass
class PageviewStatsConfig:
    bootstrap: str = "127.0.0.1:9092"
    input_topic: str = "pageviews"
    output_topic: str | None = "pageview-stats"
    group: str = "pageview-stats"
    output_dir: str = "pageview-stats-output"
    checkpoint_dir: str | None = None  # default: <output_dir>-checkpoint
    window: str = "1 minute"
    watermark: str = "1 minute"
    trigger: str = "5 seconds"
    available_now: bool = False
    starting_offsets: str = "group"
    starting_offsets_fallback: str = "earliest"
    max_offsets_per_trigger: int | None = None
    shuffle_partitions: int = 4
    query_name: str = "pageview-stats"

    @property
    def checkpoint(self) -> str:
        return self.checkpoint_dir or self.output_dir.rstrip("/") + "-checkpoint"


@dataclass
class RunResult:
    batches: int = 0
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    reports: list[BatchReport] = field(default_factory=list)
    rows_out_by_batch: dict[int, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.rows_in / self.seconds if self.seconds > 0 else 0.0


# ---------------------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = PageviewStatsConfig()
    p.add_argument("--bootstrap-server", "-b", default=d.bootstrap, help=f"host:port[,...] (default {d.bootstrap})")
    p.add_argument("--input-topic", default=d.input_topic, help=f"page views to read (default {d.input_topic})")
    p.add_argument(
        "--output-topic", default=d.output_topic,
        help=f"topic for the counts (default {d.output_topic}; '' for none)",
    )
    p.add_argument("--group", default=d.group, help=f"consumer group (default {d.group})")
    p.add_argument("--output-dir", default=d.output_dir, help=f"Parquet output directory (default {d.output_dir})")
    p.add_argument("--checkpoint-dir", help="Spark checkpoint directory (default: <output-dir>-checkpoint)")
    p.add_argument("--window", default=d.window, help=f"window length (default '{d.window}')")
    p.add_argument("--watermark", default=d.watermark, help=f"allowed lateness (default '{d.watermark}')")
    p.add_argument("--trigger", default=d.trigger, help=f"micro-batch interval (default '{d.trigger}')")
    p.add_argument(
        "--available-now", action="store_true",
        help="process what is in the topic now (in batches), commit, and exit",
    )
    p.add_argument(
        "--starting-offsets", default=d.starting_offsets,
        help="group (default: the group's committed offsets), earliest, latest or JSON",
    )
    p.add_argument(
        "--starting-offsets-fallback", default=d.starting_offsets_fallback, choices=["earliest", "latest"],
        help="where partitions without a committed offset start (default earliest)",
    )
    p.add_argument("--max-offsets-per-trigger", type=int, help="at most this many records per micro-batch")
    p.add_argument(
        "--shuffle-partitions", type=int, default=d.shuffle_partitions,
        help=f"state/shuffle partitions of the aggregation (default {d.shuffle_partitions}; fixed by the checkpoint)",
    )
    p.add_argument("--master", help="Spark master when not run by spark-submit (default local[*])")
    p.add_argument("--spark-log-level", default="WARN", help="Spark's log level (default WARN)")
    p.add_argument("--timeout", type=float, help="stop after this many seconds")


def config_from_args(args: argparse.Namespace) -> PageviewStatsConfig:
    return PageviewStatsConfig(
        bootstrap=args.bootstrap_server,
        input_topic=args.input_topic,
        output_topic=args.output_topic or None,
        group=args.group,
        output_dir=args.output_dir,
        checkpoint_dir=args.checkpoint_dir,
        window=args.window,
        watermark=args.watermark,
        trigger=args.trigger,
        available_now=args.available_now,
        starting_offsets=args.starting_offsets,
        starting_offsets_fallback=args.starting_offsets_fallback,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        shuffle_partitions=args.shuffle_partitions,
    )


def run_from_args(args: argparse.Namespace) -> int:
    from ..session import get_session

    cfg = config_from_args(args)
    problem = check_input(cfg)
    if problem:
        print(f"pageview-stats: {problem}", file=sys.stderr, flush=True)
        return 1
    spark = get_session("slipstream pageview-stats", args.master, log_level=args.spark_log_level)
    try:
        result = run(spark, cfg, timeout_s=args.timeout)
    except Exception as exc:
        print(f"pageview-stats failed: {short_error(exc)}", file=sys.stderr, flush=True)
        return 1
    finally:
        spark.stop()
    print(
        f"pageview-stats: {result.batches} batches, {result.rows_in} page views in, "
        f"{result.rows_out} window counts out, {result.rate:,.0f} rows/s over {result.seconds:.1f} s",
        flush=True,
    )
    return 0


def check_input(cfg: PageviewStatsConfig) -> str | None:
    """Why the pipeline cannot start (broker unreachable, no input topic), before Spark starts."""
    from ..kafka_io import run as run_admin

    async def topics(admin: Admin) -> dict[str, TopicInfo]:
        return await admin.cluster.refresh_metadata([cfg.input_topic])

    try:
        found = run_admin(cfg.bootstrap, topics, client_id="slipstream-pipeline", timeout_s=10)
    except (OSError, KafkaError) as exc:
        return f"cannot reach {cfg.bootstrap}: {exc}"
    info = found.get(cfg.input_topic)
    if info is None or info.error_code:
        return (
            f"input topic {cfg.input_topic!r} does not exist at {cfg.bootstrap} "
            "(create it, or produce demo data: slipstream pipeline demo-data)"
        )
    return None


_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Closed)): (.+)$")


def short_error(exc: BaseException) -> str:
    """The innermost "SomeError: message" line of a (Spark-wrapped) Python error."""
    lines = [line.strip() for line in str(exc).splitlines()]
    found = [m for m in (_ERROR_LINE.match(line) for line in lines) if m]
    for m in reversed(found):
        if not m.group(1).startswith(("Py4J", "Streaming", "Spark", "Python")):
            return f"{m.group(1)}: {m.group(2)}"
    return next((line for line in lines if line), type(exc).__name__)


# ---------------------------------------------------------------------------- the pipeline


def counts(spark: SparkSession, cfg: PageviewStatsConfig) -> DataFrame:
    """The streaming DataFrame of closed windows: window_start, window_end, page, views."""
    from pyspark.sql import functions as F

    from .. import register

    register(spark)
    reader = (
        spark.readStream.format("slipstream")
        .option("kafka.bootstrap.servers", cfg.bootstrap)
        .option("subscribe", cfg.input_topic)
        .option("group.id", cfg.group)
        .option("startingOffsets", cfg.starting_offsets)
        .option("startingOffsetsFallback", cfg.starting_offsets_fallback)
        .option("includeHeaders", "false")
    )
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    raw = reader.load()
    events = raw.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"), F.col("timestamp").alias("log_time")
    ).select(
        F.col("e.page").alias("page"),
        F.coalesce(F.timestamp_millis(F.col("e.ts")), F.col("log_time")).alias("event_time"),
    ).where(F.col("page").isNotNull())
    return (
        events.withWatermark("event_time", cfg.watermark)
        .groupBy(F.window("event_time", cfg.window), F.col("page"))
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            F.col("page"),
            F.col("count").alias("views"),
        )
    )


def start(spark: SparkSession, cfg: PageviewStatsConfig, result: RunResult) -> StreamingQuery:
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
    output_dir = cfg.output_dir.rstrip("/")
    lock = threading.Lock()

    def write_batch(df: DataFrame, batch_id: int) -> None:
        df = df.persist()
        try:
            n = df.count()
            if n:
                df.write.mode("overwrite").parquet(f"{output_dir}/batch_id={batch_id}")
                if cfg.output_topic:
                    payload = F.to_json(
                        F.struct(
                            F.unix_millis("window_start").alias("window_start"),
                            F.unix_millis("window_end").alias("window_end"),
                            F.col("page"),
                            F.col("views"),
                        )
                    )
                    (
                        df.select(F.col("page").alias("key"), payload.alias("value"))
                        .write.format("slipstream")
                        .option("kafka.bootstrap.servers", cfg.bootstrap)
                        .option("topic", cfg.output_topic)
                        .mode("append")
                        .save()
                    )
        finally:
            df.unpersist()
        with lock:
            result.rows_out_by_batch[batch_id] = n

    writer = (
        counts(spark, cfg)
        .writeStream.queryName(cfg.query_name)
        .outputMode("append")
        .option("checkpointLocation", cfg.checkpoint)
        .foreachBatch(write_batch)
    )
    writer = writer.trigger(availableNow=True) if cfg.available_now else writer.trigger(processingTime=cfg.trigger)
    return writer.start()


def _on_interrupt(stop: threading.Event) -> Callable[[], None]:
    """Make Ctrl-C (SIGINT) set ``stop`` instead of cancelling Spark jobs mid-batch; a second
    Ctrl-C interrupts at once. Returns a function restoring the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        stop.set()

    signal.signal(signal.SIGINT, handler)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore


def _stop_between_batches(query: StreamingQuery, wait_s: float = 60.0) -> None:
    """Stop ``query`` once its running micro-batch (if any) has finished, so the batch's output
    and commits complete instead of being cancelled half-way (bounded by ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    with contextlib.suppress(Exception):
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
    query.stop()


def run(
    spark: SparkSession,
    cfg: PageviewStatsConfig,
    *,
    timeout_s: float | None = None,
    report: Callable[[BatchReport], None] | None = None,
) -> RunResult:
    """Run the pipeline until it is done (availableNow), ``timeout_s`` passes, or Ctrl-C.

    ``report`` gets each batch's BatchReport; by default a progress line is printed.
    """
    from ..progress import GroupProgressListener

    result = RunResult()

    def on_report(r: BatchReport) -> None:
        result.reports.append(r)
        if report is not None:
            report(r)
            return
        out = result.rows_out_by_batch.get(r.batch_id)
        suffix = "" if out is None else f", {out} window counts out"
        print(r.line() + suffix, flush=True)

    listener = GroupProgressListener(cfg.bootstrap, cfg.group, query_name=cfg.query_name, report=on_report)
    spark.streams.addListener(listener)
    began = time.monotonic()
    query = start(spark, cfg, result)
    if report is None:
        sinks = f"Parquet -> {cfg.output_dir}" + (f", counts -> topic {cfg.output_topic}" if cfg.output_topic else "")
        print(f"pageview-stats: reading {cfg.input_topic} at {cfg.bootstrap} as group {cfg.group}; {sinks}", flush=True)
    stop = threading.Event()
    restore = _on_interrupt(stop)
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not stop.is_set() and query.isActive:
            if deadline is not None and time.monotonic() >= deadline:
                break
            query.awaitTermination(1)  # raises if the query failed
    finally:
        if query.isActive:
            print("pageview-stats: stopping after the current micro-batch", file=sys.stderr, flush=True)
            _stop_between_batches(query)
        restore()
        result.seconds = time.monotonic() - began
        # Progress events are delivered asynchronously: wait (briefly) for the last one.
        last = query.lastProgress
        deadline = time.monotonic() + 10
        while last is not None and time.monotonic() < deadline:
            if any(r.batch_id >= last["batchId"] for r in result.reports):
                break
            time.sleep(0.05)
        spark.streams.removeListener(listener)
    exc = query.exception()
    if exc is not None:
        raise RuntimeError(f"pageview-stats failed: {exc}")
    result.batches = len(result.reports)
    result.rows_in = sum(r.rows for r in result.reports)
    result.rows_out = sum(result.rows_out_by_batch.values())
    return result
