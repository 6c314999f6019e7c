"""Transactions through the data source: read_committed reads and the exactly-once sink."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from spark_helpers import create_topic, unique

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
