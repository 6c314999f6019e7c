"""Streaming reads: exactly-once into Parquet, restarts, group commits, read limits, data loss."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    add_partitions,
    copy_tree,
    create_topic,
    delete_records,
    group_lag,
    produce,
    read_stream,
    run_available_now,
    simple_rows,
    unique,
    write_mixed,
)

pytestmark = pytest.mark.spark


def parquet_keys(spark: Any, path: Path, *, files_only: bool = False) -> list[tuple[int, int]]:
    """(partition, offset) of every row the file sink committed (duplicates kept);
    ``files_only``: of every Parquet file, ignoring the sink's metadata log."""
    if not path.exists():
        return []
    source = str(path / "*.parquet") if files_only else str(path)
    return [(r.partition, r.offset) for r in spark.read.parquet(source).select("partition", "offset").collect()]


def batch_sizes(query: Any) -> list[int]:
    return [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]


def test_available_now_into_parquet_exactly_once_with_group_commits(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    topic = create_topic(broker.bootstrap, unique("stream"), 3)
    group = unique("g")
    placed = produce(broker.bootstrap, topic, simple_rows(3, 100))
    df = read_stream(
        spark,
        broker.bootstrap,
        topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=70,
        includeHeaders="true",
        **{"group.id": group},
    )
    query = run_available_now(df, tmp_path / "out", tmp_path / "ckpt")
    got = parquet_keys(spark, tmp_path / "out")
    assert sorted(got) == sorted(placed)  # every record exactly once
    sizes = batch_sizes(query)
    assert sum(sizes) == 300
    assert max(sizes) <= 70, sizes  # maxOffsetsPerTrigger bounds every batch
    assert len(sizes) == 5  # 300 / 70 -> 4 full batches and one of 20
    # The final batch's end offsets are committed: lag 0 on every partition.
    assert group_lag(broker.bootstrap, group) == {(topic, p): (100, 0) for p in range(3)}
    # The rows carry the columns of the Kafka source.
    row = spark.read.parquet(str(tmp_path / "out")).where("partition = 1 and offset = 3").collect()[0]
    assert (row.key, row.value, row.topic) == (b"k1-3", b"v1-3", topic)
    assert [(h.key, h.value) for h in row.headers] == [("n", b"3")]


def test_restart_from_checkpoint_neither_loses_nor_duplicates(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("restart"), 2)
    group = unique("g")
    placed = produce(broker.bootstrap, topic, simple_rows(2, 300))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    df = read_stream(
        spark, broker.bootstrap, topic, startingOffsets="earliest", maxOffsetsPerTrigger=100, **{"group.id": group}
    )
    # A long-running query, stopped after a few micro-batches.
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress is not None and progress["batchId"] >= 1 and progress["numInputRows"]:
            break
        time.sleep(0.1)
    query.stop()
    first = parquet_keys(spark, out)
    assert 0 < len(first) < 600
    assert len(first) == len(set(first))
    # More data arrives while it is down; the restarted query picks up where it stopped.
    placed += produce(broker.bootstrap, topic, simple_rows(2, 50, tag="late"))
    run_available_now(df, out, ckpt)
    got = parquet_keys(spark, out)
    assert sorted(got) == sorted(placed)
    assert group_lag(broker.bootstrap, group) == {(topic, p): (350, 0) for p in range(2)}


def test_starting_offsets_group_resumes_where_the_group_left_off(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("resume"), 2)
    group = unique("g")
    produce(broker.bootstrap, topic, simple_rows(2, 40))
    opts = {"group.id": group, "startingOffsets": "group", "startingOffsetsFallback": "earliest"}
    run_available_now(read_stream(spark, broker.bootstrap, topic, **opts), tmp_path / "a", tmp_path / "ca")
    assert len(parquet_keys(spark, tmp_path / "a")) == 80  # new group: fallback earliest
    assert group_lag(broker.bootstrap, group) == {(topic, 0): (40, 0), (topic, 1): (40, 0)}
    later = produce(broker.bootstrap, topic, simple_rows(2, 15, tag="more"))
    # A fresh query (new checkpoint) on the same group reads only what came after.
    run_available_now(read_stream(spark, broker.bootstrap, topic, **opts), tmp_path / "b", tmp_path / "cb")
    assert sorted(parquet_keys(spark, tmp_path / "b")) == sorted(later)
    assert group_lag(broker.bootstrap, group) == {(topic, 0): (55, 0), (topic, 1): (55, 0)}


def test_new_partitions_are_picked_up(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("grow"), 1)
    placed = produce(broker.bootstrap, topic, simple_rows(1, 20))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    df = read_stream(spark, broker.bootstrap, topic, startingOffsets="earliest")
    run_available_now(df, out, ckpt)
    add_partitions(broker.bootstrap, topic, 3)
    placed += produce(broker.bootstrap, topic, simple_rows(3, 10, tag="new"))
    run_available_now(df, out, ckpt)
    got = parquet_keys(spark, out)
    assert sorted(got) == sorted(placed)
    assert {p for p, _ in got} == {0, 1, 2}


def test_fail_on_data_loss_after_retention(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("loss"), 1)
    produce(broker.bootstrap, topic, simple_rows(1, 100))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    run_available_now(read_stream(spark, broker.bootstrap, topic, startingOffsets="earliest"), out, ckpt)
    assert len(parquet_keys(spark, out)) == 100
    # Records 100..199 arrive, then retention removes everything below 150 before the
    # query runs again: [100, 150) were never read.
    produce(broker.bootstrap, topic, simple_rows(1, 100, tag="second"))
    delete_records(broker.bootstrap, topic, 0, 150)
    lenient_ckpt = copy_tree(ckpt, tmp_path / "ckpt-lenient")

    strict = read_stream(spark, broker.bootstrap, topic, startingOffsets="earliest")
    with pytest.raises(Exception) as failure:
        run_available_now(strict, out, ckpt)
    message = str(failure.value)
    assert f"data loss on {topic}-0: offset 100 was requested but the log now starts at offset 150" in message
    assert "failOnDataLoss=false" in message
    assert len(parquet_keys(spark, out)) == 100  # nothing of the failed batch was written

    lenient = read_stream(spark, broker.bootstrap, topic, startingOffsets="earliest", failOnDataLoss="false")
    run_available_now(lenient, tmp_path / "out-lenient", lenient_ckpt)
    # (A new output path with a copied checkpoint: its metadata log starts at this batch.)
    offsets = sorted(o for _, o in parquet_keys(spark, tmp_path / "out-lenient", files_only=True))
    assert offsets == list(range(150, 200))


def test_latest_start_and_json_offsets(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("start"), 2)
    produce(broker.bootstrap, topic, simple_rows(2, 10))
    # startingOffsets=latest: only what arrives after the query started.
    df = read_stream(spark, broker.bootstrap, topic, startingOffsets="latest")
    run_available_now(df, tmp_path / "a", tmp_path / "ca")
    assert parquet_keys(spark, tmp_path / "a") == []
    later = produce(broker.bootstrap, topic, simple_rows(2, 3, tag="x"))
    run_available_now(df, tmp_path / "a", tmp_path / "ca")
    assert sorted(parquet_keys(spark, tmp_path / "a")) == sorted(later)
    # JSON offsets per partition.
    start = json.dumps({topic: {"0": 8, "1": -2}})
    run_available_now(
        read_stream(spark, broker.bootstrap, topic, startingOffsets=start), tmp_path / "b", tmp_path / "cb"
    )
    got = parquet_keys(spark, tmp_path / "b")
    assert sorted(got) == sorted([(0, o) for o in range(8, 13)] + [(1, o) for o in range(13)])


def test_progress_listener_commits_each_batch_of_a_running_query(spark: Any, broker: Any, tmp_path: Path) -> None:
    from slipstream.spark import GroupProgressListener

    topic = create_topic(broker.bootstrap, unique("listen"), 2)
    group = unique("g")
    produce(broker.bootstrap, topic, simple_rows(2, 30))
    reports: list[Any] = []
    listener = GroupProgressListener(broker.bootstrap, group, query_name="listened", report=reports.append)
    spark.streams.addListener(listener)
    try:
        # No group.id on the source: only the listener commits.
        df = read_stream(spark, broker.bootstrap, topic, startingOffsets="earliest", maxOffsetsPerTrigger=25)
        query = (
            df.writeStream.queryName("listened")
            .format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(r.rows for r in reports) < 60:
            time.sleep(0.1)
        query.stop()
    finally:
        spark.streams.removeListener(listener)
    assert sum(r.rows for r in reports) == 60
    assert all(r.rows <= 25 for r in reports)
    assert reports[-1].lag == 0
    assert "rows" in reports[-1].line() and "lag 0" in reports[-1].line()
    assert group_lag(broker.bootstrap, group) == {(topic, 0): (30, 0), (topic, 1): (30, 0)}


def test_read_committed_stream_stops_at_the_lso(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap, unique("txn-stream"), 1)
    mixed = write_mixed(broker.bootstrap, topic)
    df = read_stream(
        spark, broker.bootstrap, topic, startingOffsets="earliest", **{"kafka.isolation.level": "read_committed"}
    )
    run_available_now(df.select("offset", "value"), tmp_path / "out", tmp_path / "ckpt")
    rows = sorted(spark.read.parquet(str(tmp_path / "out")).collect())
    assert [r.value for r in rows] == mixed.read_committed
    assert rows[-1].offset < mixed.last_stable_offset
