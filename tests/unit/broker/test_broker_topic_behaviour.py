"""Topic configs the broker honours, seen by real clients: timestamps, size limits,
retention, and topics surviving a restart on disk."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import TopicPartition as ATopicPartition
from broker_helpers import TIMEOUT_S, create_topic, quiet_admin, result
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    OffsetSpec,
    ResourceType,
)
from kafka.admin import KafkaAdminClient

from slipstream.broker.broker import Broker

pytestmark = pytest.mark.timeout(30)


def produce_one(broker: Broker, topic: str, value: bytes, **kwargs: object) -> Message:
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers,
        "log_level": 0,
        "compression.type": "none",
        "message.timeout.ms": int(TIMEOUT_S * 1000),
    })
    reports: list[Message] = []
    producer.produce(topic, value, on_delivery=lambda err, msg: reports.append(msg), **kwargs)
    assert producer.flush(TIMEOUT_S) == 0
    assert len(reports) == 1
    return reports[0]


def consume(broker: Broker, topic: str, count: int, partition: int = 0) -> list[Message]:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "unused",
        "enable.auto.commit": False,
        "log_level": 0,
    })
    try:
        consumer.assign([TopicPartition(topic, partition, -2)])
        out: list[Message] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg)
        return out
    finally:
        consumer.close()


# ---------------------------------------------------------------- timestamps and sizes


def test_log_append_time_gives_broker_timestamps(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "stamped", 1, {"message.timestamp.type": "LogAppendTime"})
    create_topic(admin, "as-sent", 1)
    before = int(time.time() * 1000)
    produce_one(broker, "stamped", b"x", timestamp=1_000)
    produce_one(broker, "as-sent", b"x", timestamp=1_000)
    after = int(time.time() * 1000)
    (stamped,) = consume(broker, "stamped", 1)
    kind, ts = stamped.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before <= ts <= after
    (kept,) = consume(broker, "as-sent", 1)
    assert kept.timestamp() == (TIMESTAMP_CREATE_TIME, 1_000)


def test_max_message_bytes_gives_message_too_large(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "small", 1, {"max.message.bytes": "1024"})
    report = produce_one(broker, "small", b"z" * 4000)
    assert report.error() is not None
    assert report.error().code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(broker, "small", b"fits").error() is None
    # Raising the limit with IncrementalAlterConfigs takes effect at once.
    entry = ConfigEntry("max.message.bytes", "65536", incremental_operation=AlterConfigOpType.SET)
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "small", incremental_configs=[entry])])
    result(next(iter(futures.values())))
    assert produce_one(broker, "small", b"z" * 4000).error() is None
    assert [m.value() for m in consume(broker, "small", 2)] == [b"fits", b"z" * 4000]


# ---------------------------------------------------------------- retention (async: state on the broker loop)


async def _fill(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    try:
        for i in range(count):
            # keyed: compacted topics refuse keyless records
            value = bytes([65 + i % 26]) * size
            await producer.send_and_wait(topic, value, key=b"k%d" % i, partition=0)
    finally:
        await producer.stop()


async def _offsets(bootstrap: str, topic: str) -> tuple[int, int, list[int]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    tp = ATopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        start = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        await consumer.seek_to_beginning(tp)
        batch = await consumer.getmany(tp, timeout_ms=2000) if end > start else {}
        return start, end, [m.offset for m in batch.get(tp, [])]
    finally:
        await consumer.stop()


async def test_retention_bytes_advances_earliest_offset() -> None:
    async with Broker(storage="memory", port=0) as b:
        assert b.state is not None
        admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("bounded", 1, 1, topic_configs={
                "segment.bytes": "1024", "retention.bytes": "2048",
            })])
        finally:
            await admin.close()
        await _fill(b.bootstrap_servers, "bounded", 30, 200)
        assert (await _offsets(b.bootstrap_servers, "bounded"))[0] == 0
        deleted = b.state.topics.enforce_retention(b.state.clock())
        assert deleted > 0
        start, end, offsets = await _offsets(b.bootstrap_servers, "bounded")
        assert 0 < start < end == 30
        # Kafka deletes a segment only while what stays is still >= retention.bytes, so
        # less than one segment more than the limit remains.
        assert 2048 <= b.state.topics.partition("bounded", 0).size_bytes <= 2048 + 1024  # type: ignore[union-attr]
        assert offsets and offsets[0] == start and offsets[-1] == 29


async def test_retention_ms_can_empty_the_log() -> None:
    async with Broker(storage="memory", port=0) as b:
        assert b.state is not None
        b.state.topics.create("expiring", 1, {"retention.ms": "60000"})
        await _fill(b.bootstrap_servers, "expiring", 5, 100)
        assert b.state.topics.enforce_retention(b.state.clock()) == 0  # nothing old yet
        b.state.topics.enforce_retention(b.state.clock() + 3_600_000)  # an hour later
        start, end, _ = await _offsets(b.bootstrap_servers, "expiring")
        assert start == end == 5
        # A compacted topic is not subject to delete retention.
        b.state.topics.create("kept", 1, {"retention.ms": "60000", "cleanup.policy": "compact"})
        await _fill(b.bootstrap_servers, "kept", 3, 100)
        b.state.topics.enforce_retention(b.state.clock() + 3_600_000)
        assert (await _offsets(b.bootstrap_servers, "kept"))[:2] == (0, 3)


# ---------------------------------------------------------------- restart on disk


def test_topic_survives_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with Broker(storage="disk", data_dir=data, port=0) as b:
        admin = quiet_admin(b.bootstrap_servers)
        create_topic(admin, "durable", 2, {"retention.ms": "3600000", "cleanup.policy": "delete,compact"})
        result(admin.create_partitions([NewPartitions("durable", 3)])["durable"])
        entry = ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET)
        result(next(iter(admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, "durable", incremental_configs=[entry])]
        ).values())))
        for i in range(5):
            produce_one(b, "durable", f"d{i}".encode(), partition=2, key=f"k{i}".encode())
        deleted = admin.delete_records([TopicPartition("durable", 2, 2)])
        assert result(next(iter(deleted.values()))).low_watermark == 2
        assert b.state is not None
        topic_id = b.state.topics.topics["durable"].topic_id
        cluster_id = b.state.cluster_id

    with Broker(storage="disk", data_dir=data, port=0) as b:
        admin = quiet_admin(b.bootstrap_servers)
        assert result(admin.describe_cluster()).cluster_id == cluster_id
        kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=int(TIMEOUT_S * 1000))
        try:
            described = kadmin.describe_topic_partitions(["durable"])["topics"][0]
        finally:
            kadmin.close()
        assert described["topic_id"] == topic_id
        assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]
        configs = result(next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "durable")]).values())))
        overrides = {
            name: c.value for name, c in configs.items() if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        }
        assert overrides == {
            "retention.ms": "3600000",
            "cleanup.policy": "delete,compact",
            "max.message.bytes": "2048",
        }
        tp = TopicPartition("durable", 2)
        assert result(admin.list_offsets({tp: OffsetSpec.earliest()})[tp]).offset == 2
        assert result(admin.list_offsets({tp: OffsetSpec.latest()})[tp]).offset == 5
        assert [(m.offset(), m.value()) for m in consume(b, "durable", 3, partition=2)] == [
            (2, b"d2"), (3, b"d3"), (4, b"d4")
        ]
        # Offsets continue where they left off.
        assert produce_one(b, "durable", b"d5", partition=2, key=b"k5").offset() == 5
