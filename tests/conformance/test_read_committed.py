"""read_committed against real clients: librdkafka (confluent-kafka 2.x and kcat's old
2.0.2), the Java KafkaConsumer, kafka-python and aiokafka read a partition holding committed, aborted, interleaved and one still-open
transaction, written over the wire with transactional Produce requests and
WriteTxnMarkers (slipstream.testing.transactions). read_committed readers see only
committed and plain records, up to the LSO; read_uncommitted readers see every data
record; nobody sees a control record."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest
from conformance_helpers import ck_create_topic

from slipstream.client.connection import BrokerConnection
from slipstream.testing.transactions import MixedLog, write_mixed_transactions

pytestmark = pytest.mark.conformance


@pytest.fixture
def mixed(broker, topic_name) -> MixedLog:
    ck_create_topic(broker.bootstrap, topic_name, partitions=1)

    async def go() -> MixedLog:
        conn = await BrokerConnection(broker.host, broker.port).connect()
        try:
            return await write_mixed_transactions(conn, topic_name)
        finally:
            await conn.close()

    return asyncio.run(go())


def ck_read_to_eof(bootstrap: str, topic: str, isolation: str) -> tuple[list[bytes], int]:
    """Every value up to the end (librdkafka's end is the LSO under read_committed) and
    the consumer's position there."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"unused-{topic}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
        "fetch.wait.max.ms": 100,
        "log_level": 0,
    })
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while True:
            assert time.monotonic() < deadline, f"no end of partition; read so far: {values}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(f"consumer error: {msg.error()}")
            values.append(msg.value())
        position = consumer.position([TopicPartition(topic, 0)])[0].offset
        return values, position
    finally:
        consumer.close()


def test_confluent_read_committed(broker, topic_name, mixed: MixedLog) -> None:
    values, position = ck_read_to_eof(broker.bootstrap, topic_name, "read_committed")
    assert values == mixed.read_committed
    assert position == mixed.last_stable_offset


def test_confluent_read_uncommitted(broker, topic_name, mixed: MixedLog) -> None:
    values, position = ck_read_to_eof(broker.bootstrap, topic_name, "read_uncommitted")
    assert values == mixed.read_uncommitted
    assert position == mixed.end_offset


def test_confluent_watermarks_and_offsets_for_read_committed(broker, topic_name, mixed: MixedLog) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic_name}",
                         "isolation.level": "read_committed", "log_level": 0})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, mixed.last_stable_offset)  # ListOffsets latest = the LSO
    finally:
        consumer.close()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_kcat(broker, kcat_bin, topic_name, mixed: MixedLog, isolation: str) -> None:
    res = subprocess.run(
        [kcat_bin, "-b", broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e",
         "-q", "-f", "%s\\n", "-X", f"isolation.level={isolation}", "-X", "socket.timeout.ms=10000"],
        capture_output=True, timeout=30,
    )
    assert res.returncode == 0, res.stderr.decode()[-3000:]
    expected = mixed.read_committed if isolation == "read_committed" else mixed.read_uncommitted
    assert res.stdout.splitlines() == expected


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_java_consumer(broker, java_driver, topic_name, mixed: MixedLog, isolation: str) -> None:
    from conformance_helpers import java_records

    expected = mixed.read_committed if isolation == "read_committed" else mixed.read_uncommitted
    # one more than expected: the driver keeps polling until its timeout, so extras show
    events = java_driver.run(broker.bootstrap, "consume", topic_name, str(len(expected) + 1),
                             "--from-beginning", "--isolation", isolation, "--timeout-ms", "3000")
    assert [r.value.encode() if r.value is not None else None for r in java_records(events)] == expected


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_kafka_python_consumer(broker, topic_name, mixed: MixedLog, isolation: str) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    expected = mixed.read_committed if isolation == "read_committed" else mixed.read_uncommitted
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tp = KpTopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
        quiet = time.monotonic() + 0.5  # nothing more arrives
        while time.monotonic() < quiet:
            for records in consumer.poll(timeout_ms=100).values():
                values.extend(r.value for r in records)
        assert values == expected
    finally:
        consumer.close()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_aiokafka_consumer(broker, topic_name, mixed: MixedLog, isolation: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    expected = mixed.read_committed if isolation == "read_committed" else mixed.read_uncommitted

    async def go() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, fetch_max_wait_ms=100)
        await consumer.start()
        try:
            tp = AioTopicPartition(topic_name, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            values: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(values) < len(expected) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
            quiet = time.monotonic() + 0.5
            while time.monotonic() < quiet:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    values.extend(r.value for r in records)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(go()) == expected


def test_read_committed_after_kill_9(fresh_broker, topic_name) -> None:
    """Open transactions, markers and the aborted-transaction index survive kill -9
    (markers are written like acks=all produce; the index entry goes first)."""
    ck_create_topic(fresh_broker.bootstrap, topic_name, partitions=1)

    async def go() -> MixedLog:
        conn = await BrokerConnection(fresh_broker.host, fresh_broker.port).connect()
        try:
            return await write_mixed_transactions(conn, topic_name)
        finally:
            await conn.close()

    mixed = asyncio.run(go())
    fresh_broker.kill9()
    fresh_broker.restart()
    values, position = ck_read_to_eof(fresh_broker.bootstrap, topic_name, "read_committed")
    assert values == mixed.read_committed and position == mixed.last_stable_offset
    values, _ = ck_read_to_eof(fresh_broker.bootstrap, topic_name, "read_uncommitted")
    assert values == mixed.read_uncommitted
