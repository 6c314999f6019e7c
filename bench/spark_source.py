#!/usr/bin/env python3
"""The slipstream Spark data source against a single kafka-python reader, in one run.

    python bench/spark_source.py                 # 1M records per topic, a few minutes
    python bench/spark_source.py --quick         # 200k records, about a minute
    python bench/spark_source.py --records 2000000 --partitions 1 4 8 16

Measures, against one Slipstream broker subprocess (memory storage, 127.0.0.1):

* rows/s from the source into Spark's ``noop`` sink (batch read, and a streaming
  availableNow query) for topics of 1, 4 and 8 partitions holding the same
  records (100-byte values, 8-byte keys);
* the same records read by one kafka-python ``KafkaConsumer`` (assign all
  partitions, from the beginning, no group) in this process;
* the packaged pageview-stats pipeline end to end (demo JSON page views ->
  windowed counts -> Parquet + topic, availableNow), rows/s including query start.

Spark runs ``local[*]``: as many task slots as cores, shared with the broker and
the Python workers. A small warm-up read runs first so JVM start-up and class
loading are not measured. Progress goes to stderr; the Markdown report to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from harness import create_topics, log, slipstream_broker

from slipstream.client.producer import Producer


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Produce ``records`` (100-byte values) spread evenly over the partitions; returns rows/s."""
    create_topics(bootstrap, {topic: partitions}, 30)
    value = b"v" * 100
    began = time.perf_counter()
    with Producer(bootstrap, linger_ms=20, batch_size=512 * 1024, buffer_memory=256 * 1024 * 1024) as p:
        for i in range(records):
            p.produce(topic, value, key=i.to_bytes(8, "big"), partition=i % partitions)
            if i % 50_000 == 0:
                p.poll(0)
        p.flush()
    return records / (time.perf_counter() - began)


def timed(fn: Callable[[], Any]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def spark_batch(spark: Any, bootstrap: str, topic: str) -> float:
    df = (
        spark.read.format("slipstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "false")
        .load()
    )
    return timed(lambda: df.write.format("noop").mode("overwrite").save())


def spark_stream(spark: Any, bootstrap: str, topic: str, checkpoint: Path) -> float:
    df = (
        spark.readStream.format("slipstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "false")
        .load()
    )

    def run() -> None:
        q = (
            df.writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        if not q.awaitTermination(900):
            q.stop()
            raise RuntimeError("streaming read did not finish in 900 s")

    return timed(run)


def kafka_python_read(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        group_id=None,
        max_partition_fetch_bytes=4 * 1024 * 1024,
        fetch_max_bytes=16 * 1024 * 1024,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        seen = 0
        began = time.perf_counter()
        deadline = time.monotonic() + 900
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"kafka-python read only {seen} of {records} records in 900 s")
            for batch in consumer.poll(timeout_ms=1000, max_records=100_000).values():
                seen += len(batch)
        return time.perf_counter() - began
    finally:
        consumer.close()


def pipeline_rate(spark: Any, bootstrap: str, workdir: Path, events: int, tag: str) -> tuple[float, float, int]:
    """Run pageview-stats (availableNow) over ``events`` fresh page views; returns the wall-clock
    rate (query start to finish), the rate over the batches' own durations, and the counts out."""
    from slipstream.spark.pipelines.demo import produce_demo_data
    from slipstream.spark.pipelines.pageview_stats import PageviewStatsConfig, run

    start_ms = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    topic = f"pageviews-{tag}"
    with open(os.devnull, "w") as quiet:
        produce_demo_data(
            bootstrap, topic, count=events, seed=1, start_ms=start_ms, step_ms=20, partitions=4, out=quiet
        )
    cfg = PageviewStatsConfig(
        bootstrap=bootstrap,
        input_topic=topic,
        output_topic=f"pageview-stats-{tag}",
        group=f"pageview-stats-{tag}",
        output_dir=str(workdir / f"pageview-stats-{tag}"),
        available_now=True,
        shuffle_partitions=4,
    )
    began = time.perf_counter()
    result = run(spark, cfg, report=lambda r: log("  " + r.line()))
    seconds = time.perf_counter() - began
    busy = sum(r.duration_ms for r in result.reports) / 1000
    return result.rows_in / seconds, result.rows_in / busy, result.rows_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per topic (default 1000000)")
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--pipeline-events", type=int, default=200_000, help="page views for the pipeline run")
    parser.add_argument("--storage", choices=["memory", "disk"], default="memory")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--quick", action="store_true", help="200k records, 50k page views")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.pipeline_events = 200_000, 50_000
    command = "python bench/spark_source.py " + " ".join(argv if argv is not None else sys.argv[1:])

    workdir = Path(tempfile.mkdtemp(prefix="slipstream-spark-bench-"))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
        broker = cleanup.enter_context(slipstream_broker(
            workdir, "--storage", args.storage, "--log-level", "WARNING",
            "--set", "group.initial.rebalance.delay.ms=0", timeout=20,
        ))
        bootstrap = broker.bootstrap
        from slipstream.spark.session import get_session

        log(f"broker at {bootstrap}; starting Spark ({args.master})")
        spark = get_session("slipstream-bench", args.master, {"spark.sql.shuffle.partitions": "4"})
        cores = spark.sparkContext.defaultParallelism
        # Warm-up: JVM class loading and Python worker start-up are not what we measure.
        fill(bootstrap, "warmup", 2, 20_000)
        spark_batch(spark, bootstrap, "warmup")
        spark_stream(spark, bootstrap, "warmup", workdir / "ckpt-warmup")

        rows = []
        for partitions in args.partitions:
            topic = f"bench-{partitions}"
            produce_rate = fill(bootstrap, topic, partitions, args.records)
            log(f"{topic}: {args.records} records produced at {produce_rate:,.0f} rows/s")
            batch_s = spark_batch(spark, bootstrap, topic)
            log(f"  spark batch -> noop: {batch_s:.2f} s")
            stream_s = spark_stream(spark, bootstrap, topic, workdir / f"ckpt-{partitions}")
            log(f"  spark availableNow -> noop: {stream_s:.2f} s")
            kp_s = kafka_python_read(bootstrap, topic, partitions, args.records)
            log(f"  kafka-python: {kp_s:.2f} s")
            rows.append((partitions, args.records / batch_s, args.records / stream_s, args.records / kp_s))

        log("pageview-stats pipeline (warm-up on 5000 events, then the measured run)")
        pipeline_rate(spark, bootstrap, workdir, 5000, "warmup")
        pipe_rate, pipe_busy_rate, pipe_out = pipeline_rate(spark, bootstrap, workdir, args.pipeline_events, "bench")
        spark.stop()

    import pyspark

    print(f"Spark data source read rate ({args.records:,} records of 100 B per topic, broker storage "
          f"{args.storage}; Spark {pyspark.__version__} {args.master} = {cores} task slots on "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, shared with the broker)\n")
    print("| partitions | Spark batch -> noop (rows/s) | Spark availableNow -> noop (rows/s) "
          "| kafka-python, 1 process (rows/s) | batch / kafka-python |")
    print("|---:|---:|---:|---:|---:|")
    for partitions, batch, stream, kp in rows:
        print(f"| {partitions} | {batch:,.0f} | {stream:,.0f} | {kp:,.0f} | {batch / kp:.2f}x |")
    print(f"\npageview-stats end to end (availableNow; {args.pipeline_events:,} JSON page views in 4 partitions "
          f"-> {pipe_out} window counts to Parquet + a topic, group commits): {pipe_rate:,.0f} rows/s from query "
          f"start to finish, {pipe_busy_rate:,.0f} rows/s over the micro-batches' own durations\n")
    print(f"Command: `{command.strip()}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
