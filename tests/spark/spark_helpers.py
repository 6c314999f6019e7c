"""Helpers for the Spark tests: the broker subprocess (slipstream.testing.broker_process),
topics, producing, group and admin calls."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slipstream.client.admin import Admin
from slipstream.client.cluster import Cluster
from slipstream.testing.broker_process import BrokerProcess
from slipstream.testing.transactions import MixedLog, write_mixed_transactions

# The Spark tests' broker: in memory, no initial rebalance delay, quiet.
SPARK_BROKER_ARGS = (
    "--storage", "memory", "--set", "group.initial.rebalance.delay.ms=0", "--log-level", "WARNING",
)


def start_broker(tmp: Path) -> BrokerProcess:
    broker = BrokerProcess(tmp / "data", tmp / "broker.log", extra_args=SPARK_BROKER_ARGS, test_defaults=False)
    broker.start(timeout=20)
    return broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin_call(bootstrap: str, fn: Any) -> Any:
    async def main() -> Any:
        cluster = Cluster(bootstrap)
        try:
            return await fn(Admin(cluster))
        finally:
            await cluster.close()

    return asyncio.run(main())


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> str:
    admin_call(bootstrap, lambda a: a.create_topic(name, partitions, configs=configs))
    return name


Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def produce(bootstrap: str, topic: str, rows: Sequence[Row]) -> list[tuple[int, int]]:
    """Produce (partition, key, value, headers) rows in order with a third-party client
    (confluent-kafka), so the source is tested on data our own producer did not write;
    returns (partition, offset) each."""
    from confluent_kafka import Producer as ThirdPartyProducer

    results: list[Any] = [None] * len(rows)

    def done(i: int) -> Any:
        def cb(err: Any, msg: Any) -> None:
            results[i] = err if err is not None else (msg.partition(), msg.offset())

        return cb

    p = ThirdPartyProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i, (partition, key, value, headers) in enumerate(rows):
        p.produce(topic, value, key=key, headers=headers or None, partition=partition, on_delivery=done(i))
    p.flush(30)
    for r in results:
        if not isinstance(r, tuple):
            raise AssertionError(f"produce failed: {r}")
    return results


def simple_rows(partitions: int, per_partition: int, tag: str = "v") -> list[Row]:
    return [
        (p, f"k{p}-{i}".encode(), f"{tag}{p}-{i}".encode(), [("n", str(i).encode())] if i % 3 == 0 else [])
        for i in range(per_partition)
        for p in range(partitions)
    ]


def group_lag(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    lags = admin_call(bootstrap, lambda a: a.group_lag(group))
    return {(x.topic, x.partition): (x.committed, x.lag) for x in lags}


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """DeleteRecords through confluent-kafka's AdminClient (moves the log start to ``before``)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": bootstrap})
    futures = client.delete_records([TopicPartition(topic, partition, before)], request_timeout=30)
    for fut in futures.values():
        fut.result(timeout=30)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    client = AdminClient({"bootstrap.servers": bootstrap})
    for fut in client.create_partitions([NewPartitions(topic, total)], request_timeout=30).values():
        fut.result(timeout=30)


def read_stream(spark: Any, bootstrap: str, topic: str, **options: Any) -> Any:
    reader = spark.readStream.format("slipstream").option("kafka.bootstrap.servers", bootstrap)
    reader = reader.option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def run_available_now(df: Any, path: Path, checkpoint: Path, timeout: float = 90) -> Any:
    """Stream ``df`` into Parquet at ``path`` with trigger(availableNow); wait for the end."""
    query = (
        df.writeStream.format("parquet")
        .option("path", str(path))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(timeout)
    if not finished:
        query.stop()
        raise AssertionError(f"query did not finish in {timeout} s")
    return query


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def write_mixed(bootstrap: str, topic: str) -> MixedLog:
    """Committed, aborted and open transactions on partition 0 (testing.transactions)."""

    async def main() -> MixedLog:
        cluster = Cluster(bootstrap)
        try:
            conn = await cluster.leader_connection(topic, 0)
            return await write_mixed_transactions(conn, topic)
        finally:
            await cluster.close()

    return asyncio.run(main())
