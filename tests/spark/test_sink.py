"""Writing DataFrames to topics through the slipstream sink (batch and streaming)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import admin_call, create_topic, produce, read_stream, simple_rows, unique

pytestmark = pytest.mark.spark


def read_all(spark: Any, bootstrap: str, topic: str) -> list[Any]:
    return (
        spark.read.format("slipstream")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )


def test_writer_round_trips_keys_values_and_headers(spark: Any, broker: Any) -> None:
    topic = create_topic(broker.bootstrap, unique("sink"), 3)
    rows = [
        (
            f"key-{i}".encode() if i % 5 else None,
            f"value-{i}".encode() if i % 7 else None,
            [{"key": "i", "value": str(i).encode()}, {"key": "null", "value": None}] if i % 2 else [],
            i % 3 if i % 4 else None,
        )
        for i in range(200)
    ]
    df = spark.createDataFrame(
        rows, "key binary, value binary, headers array<struct<key: string, value: binary>>, partition int"
    ).repartition(3)
    df.write.format("slipstream").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).mode(
        "append"
    ).save()
    got = read_all(spark, broker.bootstrap, topic)
    assert len(got) == 200

    def norm(key: Any, value: Any, headers: Any) -> tuple[Any, ...]:
        return (key, value, tuple((h["key"], h["value"]) for h in headers or ()))

    assert Counter(norm(r.key, r.value, [h.asDict() for h in r.headers or ()]) for r in got) == Counter(
        norm(k, v, h) for k, v, h, _ in rows
    )
    # An explicit partition is honoured; keyed records without one go by murmur2 of the key.
    from slipstream.client.partitioner import partition_for_key

    by_value = {r.value: r for r in got if r.value is not None}
    for key, value, _, partition in rows:
        if value is None:
            continue
        if partition is not None:
            assert by_value[value].partition == partition
        elif key is not None:
            assert by_value[value].partition == partition_for_key(key, 3)


def test_writer_takes_strings_and_a_topic_column(spark: Any, broker: Any) -> None:
    a = create_topic(broker.bootstrap, unique("sink-a"), 1)
    b = create_topic(broker.bootstrap, unique("sink-b"), 2)
    df = spark.createDataFrame(
        [(a if i % 2 else b, f"k{i}", f"v{i}") for i in range(40)], "topic string, key string, value string"
    )
    df.write.format("slipstream").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    assert sorted(r.value.decode() for r in read_all(spark, broker.bootstrap, a)) == sorted(
        f"v{i}" for i in range(40) if i % 2
    )
    assert len(read_all(spark, broker.bootstrap, b)) == 20


def test_writer_errors_carry_the_brokers_reason(spark: Any, broker: Any) -> None:
    topic = create_topic(broker.bootstrap, unique("small"), 1, {"max.message.bytes": "1024"})
    df = spark.createDataFrame([(b"x" * 5000,)], "value binary")
    with pytest.raises(Exception, match=r"MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE"):
        df.write.format("slipstream").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", topic
        ).mode("append").save()
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="needs a 'value' column"):
        no_value.write.format("slipstream").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", topic
        ).mode("append").save()


def test_streaming_write_topic_to_topic(spark: Any, broker: Any, tmp_path: Path) -> None:
    source = create_topic(broker.bootstrap, unique("from"), 2)
    target = create_topic(broker.bootstrap, unique("to"), 2)
    produce(broker.bootstrap, source, simple_rows(2, 60))
    df = read_stream(
        spark, broker.bootstrap, source, startingOffsets="earliest", maxOffsetsPerTrigger=50, includeHeaders="true"
    )
    query = (
        df.select("key", "value", "headers")
        .writeStream.format("slipstream")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(90)
    got = read_all(spark, broker.bootstrap, target)
    want = read_all(spark, broker.bootstrap, source)

    def content(rows: list[Any]) -> Counter[tuple[Any, ...]]:
        return Counter((r.key, r.value, tuple((h.key, h.value) for h in r.headers or ())) for r in rows)

    assert content(got) == content(want)
    assert len(got) == 120


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
    from pyspark.errors import StreamingQueryException
    from pyspark.sql.functions import col, udf

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


def test_sink_and_source_over_sasl_ssl_with_spark_kafka_options(spark: Any, tmp_path: Path) -> None:
    """Spark's Kafka security options (kafka.security.protocol, kafka.sasl.jaas.config,
    kafka.ssl.truststore.location) reach the executors' clients."""
    from slipstream.broker.broker import Broker
    from slipstream.cli.certs import make_dev_certs

    make_dev_certs(tmp_path)
    with Broker(
        storage="memory", port=0, listeners="SASL_SSL://127.0.0.1:0", ssl_certfile=str(tmp_path / "broker.pem"),
        ssl_keyfile=str(tmp_path / "broker-key.pem"), scram_bootstrap_users="spark:spark-secret",
    ) as broker:
        options = {
            "kafka.bootstrap.servers": broker.bootstrap_for("SASL_SSL"),
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                      'username="spark" password="spark-secret";',
            "kafka.ssl.truststore.location": str(tmp_path / "ca.pem"),
        }
        topic = unique("secure")
        df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(30)], "key string, value string")
        df.write.format("slipstream").options(**options).option("topic", topic).mode("append").save()
        got = spark.read.format("slipstream").options(**options).option("subscribe", topic).load().collect()
        assert sorted(bytes(r.value).decode() for r in got) == sorted(f"v{i}" for i in range(30))
