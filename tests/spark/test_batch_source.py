"""Batch reads through the slipstream data source (Spark local[2])."""

from __future__ import annotations

import json
from typing import Any

import pytest
from spark_helpers import create_topic, delete_records, produce, simple_rows, unique, write_mixed

pytestmark = pytest.mark.spark


def read(spark: Any, bootstrap: str, **options: Any) -> Any:
    """A batch read; with headers unless ``includeHeaders`` is given (the rows compared carry them)."""
    options.setdefault("includeHeaders", "true")
    reader = spark.read.format("slipstream").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v) if isinstance(v, dict) else str(v))
    return reader.load()


def as_tuples(rows: list[Any]) -> set[tuple[Any, ...]]:
    return {
        (
            r.topic,
            r.partition,
            r.offset,
            r.key,
            r.value,
            tuple((h.key, h.value) for h in r.headers or ()),
        )
        for r in rows
    }


@pytest.fixture(scope="module")
def dataset(broker: Any) -> tuple[str, set[tuple[Any, ...]]]:
    """3 partitions with 40/40/40 records: keys, values, headers (some), one null key and value."""
    topic = create_topic(broker.bootstrap, unique("batch"), 3)
    rows = simple_rows(3, 40)
    rows.append((1, None, None, [("nil", None)]))
    placed = produce(broker.bootstrap, topic, rows)
    expected = {
        (topic, p, o, key, value, tuple(headers))
        for (p, o), (_, key, value, headers) in zip(placed, rows, strict=True)
    }
    return topic, expected


def test_schema_matches_spark_kafka_source(spark: Any, broker: Any, dataset: Any) -> None:
    topic, _ = dataset
    df = spark.read.format("slipstream").option("kafka.bootstrap.servers", broker.bootstrap)
    df = df.option("subscribe", topic).load()
    columns = [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == columns  # Spark: no headers
    with_headers = read(spark, broker.bootstrap, subscribe=topic)
    assert [(f.name, f.dataType.simpleString()) for f in with_headers.schema.fields] == [
        *columns,
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    no_headers = read(spark, broker.bootstrap, subscribe=topic, includeHeaders="false")
    assert "headers" not in no_headers.columns


def test_records_without_headers_have_null_headers(spark: Any, broker: Any, dataset: Any) -> None:
    topic, _ = dataset
    rows = read(spark, broker.bootstrap, subscribe=topic).where("partition = 0").collect()
    assert {r.offset: r.headers is None for r in rows} == {i: i % 3 != 0 for i in range(40)}


def test_batch_read_returns_exactly_the_rows(spark: Any, broker: Any, dataset: Any) -> None:
    topic, expected = dataset
    rows = read(spark, broker.bootstrap, subscribe=topic).collect()
    assert len(rows) == len(expected) == 121
    assert as_tuples(rows) == expected
    assert all(r.timestampType == 0 and r.timestamp is not None for r in rows)
    # The same through assign and subscribePattern.
    assigned = read(spark, broker.bootstrap, assign={topic: [0, 2]}).collect()
    assert as_tuples(assigned) == {e for e in expected if e[1] in (0, 2)}
    pattern = read(spark, broker.bootstrap, subscribePattern=topic.replace("batch-", "b.tch-")).collect()
    assert as_tuples(pattern) == expected


def test_batch_read_per_partition_ranges(spark: Any, broker: Any, dataset: Any) -> None:
    topic, expected = dataset
    df = read(
        spark,
        broker.bootstrap,
        subscribe=topic,
        startingOffsets={topic: {"0": 10, "1": -2, "2": 35}},
        endingOffsets={topic: {"0": 20, "1": 5, "2": -1}},
    )
    got = as_tuples(df.collect())
    want = {e for e in expected if (e[1] == 0 and 10 <= e[2] < 20) or (e[1] == 1 and e[2] < 5) or (e[1] == 2 and e[2] >= 35)}
    assert got == want
    assert len(got) == 10 + 5 + 5


def test_min_partitions_splits_ranges(spark: Any, broker: Any, dataset: Any) -> None:
    topic, expected = dataset
    df = read(spark, broker.bootstrap, subscribe=topic, minPartitions=9)
    assert df.rdd.getNumPartitions() == 9
    rows = df.collect()
    assert len(rows) == len(expected)
    assert as_tuples(rows) == expected
    # Each Spark partition holds one contiguous range of one topic-partition.
    spans = df.rdd.mapPartitions(
        lambda it: [sorted((r.partition, r.offset) for r in it)]
    ).collect()
    for span in spans:
        assert len({p for p, _ in span}) <= 1
        offsets = [o for _, o in span]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True


def test_bad_options_are_reported(spark: Any, broker: Any, dataset: Any) -> None:
    topic, _ = dataset
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        read(spark, broker.bootstrap, subscribe=topic, assign={topic: [0]}).collect()
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):
        spark.read.format("slipstream").option("subscribe", topic).load().collect()
    with pytest.raises(Exception, match="startingOffsets=latest is not allowed for a batch"):
        read(spark, broker.bootstrap, subscribe=topic, startingOffsets="latest").collect()


def test_batch_read_after_retention_fail_on_data_loss(spark: Any, broker: Any) -> None:
    topic = create_topic(broker.bootstrap, unique("loss-batch"), 1)
    produce(broker.bootstrap, topic, simple_rows(1, 50))
    delete_records(broker.bootstrap, topic, 0, 20)
    start = {topic: {"0": 5}}
    with pytest.raises(Exception, match=rf"data loss on {topic}-0: offset 5 was requested but the log now starts at offset 20"):
        read(spark, broker.bootstrap, subscribe=topic, startingOffsets=start).collect()
    rows = read(spark, broker.bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(20, 50))


def test_read_committed_stops_at_the_lso_and_drops_aborted_records(spark: Any, broker: Any) -> None:
    topic = create_topic(broker.bootstrap, unique("txn-src"), 1)
    mixed = write_mixed(broker.bootstrap, topic)
    # A small fetch size spreads the log (and its aborted transactions) over many Fetch answers.
    committed = read(spark, broker.bootstrap, subscribe=topic, **{"fetch.max.bytes": "1024",
                     "kafka.isolation.level": "read_committed"}).collect()
    assert [r.value for r in sorted(committed, key=lambda r: r.offset)] == mixed.read_committed
    assert max(r.offset for r in committed) < mixed.last_stable_offset
    uncommitted = read(spark, broker.bootstrap, subscribe=topic, **{"fetch.max.bytes": "1024"}).collect()
    assert [r.value for r in sorted(uncommitted, key=lambda r: r.offset)] == mixed.read_uncommitted
