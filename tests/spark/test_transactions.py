"""Transactions through the data source: read_committed reads and the exactly-once sink."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import admin_call, create_topic, produce, read_stream, unique

from slipstream.client.cluster import Cluster
from slipstream.testing.transactions import MixedLog, write_mixed_transactions

pytestmark = pytest.mark.spark


def write_mixed(bootstrap: str, topic: str) -> MixedLog:
    async def main() -> MixedLog:
        cluster = Cluster(bootstrap)
        try:
            conn = await cluster.leader_connection(topic, 0)
            return await write_mixed_transactions(conn, topic)
        finally:
            await cluster.close()

    return asyncio.run(main())


def test_source_reads_committed_up_to_the_lso(spark: Any, broker: Any) -> None:
    topic = create_topic(broker.bootstrap, unique("txn-src"), 1)
    mixed = write_mixed(broker.bootstrap, topic)

    def read(**options: str) -> list[Any]:
        reader = spark.read.format("slipstream").option("kafka.bootstrap.servers", broker.bootstrap)
        # A small fetch size spreads the log over many Fetch answers.
        reader = reader.option("subscribe", topic).option("fetch.max.bytes", "1024")
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted(reader.load().collect(), key=lambda r: r.offset)

    committed = read(**{"kafka.isolation.level": "read_committed"})
    assert [r.value for r in committed] == mixed.read_committed
    assert max(r.offset for r in committed) < mixed.last_stable_offset
    uncommitted = read()
    assert [r.value for r in uncommitted] == mixed.read_uncommitted
    assert max(r.offset for r in uncommitted) == mixed.end_offset - 1

    # A stream in read_committed mode sees the same records (its latest offset is the LSO).
    stream = (
        spark.readStream.format("slipstream")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    name = unique("rc").replace("-", "_")
    query = stream.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    query.awaitTermination(60)
    assert sorted(spark.sql(f"select value from {name}").collect(), key=lambda r: mixed.read_committed.index(r.value)) == [
        (v,) for v in mixed.read_committed
    ]


def committed_values(spark: Any, bootstrap: str, topic: str, isolation: str = "read_committed") -> Counter[bytes]:
    df = (
        spark.read.format("slipstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", isolation)
        .load()
    )
    return Counter(r.value for r in df.collect())


def test_exactly_once_sink_survives_a_failed_batch_and_a_replayed_one(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, udf
    from pyspark.sql.utils import StreamingQueryException

    source = create_topic(broker.bootstrap, unique("eos-in"), 2)
    sink = create_topic(broker.bootstrap, unique("eos-out"), 2)
    values = [f"v-{i}".encode() for i in range(60)]
    produce(broker.bootstrap, source, [(i % 2, None, v, []) for i, v in enumerate(values)])
    checkpoint = tmp_path / "checkpoint"
    prefix = unique("eos")
    fail_flag = tmp_path / "fail"
    fail_flag.write_text("x")
    flag = str(fail_flag)

    @udf("binary")
    def fail_on_last(value: bytes) -> bytes:
        import os

        if value == b"v-59" and os.path.exists(flag):
            raise RuntimeError("injected failure in the middle of batch 1")
        return value

    def run() -> Any:
        # 2 batches: v-0..v-39 (batch 0), v-40..v-59 (batch 1); one task per input partition.
        df = read_stream(spark, broker.bootstrap, source, startingOffsets="earliest", maxOffsetsPerTrigger=40)
        return (
            df.select(fail_on_last(col("value")).alias("value"))
            .writeStream.format("slipstream")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", sink)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    # 1. Batch 1 fails after a task wrote its rows: only batch 0 is visible.
    with pytest.raises(StreamingQueryException):
        run().awaitTermination(120)
    assert committed_values(spark, broker.bootstrap, sink) == Counter(values[:40])

    # 2. Restarted from the checkpoint, batch 1 runs again and is written once.
    fail_flag.unlink()
    assert run().awaitTermination(120)
    assert committed_values(spark, broker.bootstrap, sink) == Counter(values)

    # 3. Batch 1 committed to Kafka but not to Spark's commit log (a crash in between):
    #    the replay finds each task's batch marker and writes nothing.
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    assert run().awaitTermination(120)
    assert committed_values(spark, broker.bootstrap, sink) == Counter(values)
    markers = {
        p: admin_call(broker.bootstrap, lambda a, p=p: a.list_committed_offsets(f"{prefix}-{p}")) for p in (0, 1)
    }
    assert {p: max(c.offset for c in m.values()) for p, m in markers.items()} == {0: 1, 1: 1}
