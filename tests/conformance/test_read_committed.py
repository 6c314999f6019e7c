"""read_committed against real clients: librdkafka (confluent-kafka 2.x and kcat's old
2.0.2) read a partition holding committed, aborted, interleaved and one still-open
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
