"""DeleteRecords through confluent-kafka, kafka-python and aiokafka; consumers follow the new log start."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition as ATopicPartition
from broker_helpers import TIMEOUT_S, create_topic, error_of, raw_request, result
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import TopicPartition as KTopicPartition
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient

from slipstream.broker.broker import Broker
from slipstream.protocol.apis import delete_records as dr

pytestmark = pytest.mark.timeout(30)


def produce(broker: Broker, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), partition=partition)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0


def delete(admin: AdminClient, topic: str, offset: int, partition: int = 0) -> int:
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], operation_timeout=TIMEOUT_S)
    return int(result(next(iter(futures.values()))).low_watermark)


def earliest(admin: AdminClient, topic: str, partition: int = 0) -> int:
    tp = TopicPartition(topic, partition)
    return int(result(admin.list_offsets({tp: OffsetSpec.earliest()})[tp]).offset)


def consume_all(broker: Broker, topic: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "unused",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 0,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING: ask for the log start
        out: list[tuple[int, bytes]] = []
        for _ in range(100):
            msg = consumer.poll(0.1)
            if msg is None:
                if len(out) >= expected:
                    break
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()


def test_delete_then_consume_from_earliest(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "trim", 1)
    produce(broker, "trim", 10)
    assert delete(admin, "trim", 4) == 4
    assert earliest(admin, "trim") == 4
    records = consume_all(broker, "trim", 6)
    assert records == [(i, f"m{i}".encode()) for i in range(4, 10)]


def test_delete_to_high_watermark(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "trim-all", 1)
    produce(broker, "trim-all", 5)
    assert delete(admin, "trim-all", -1) == 5  # -1: up to the high watermark
    assert earliest(admin, "trim-all") == 5
    produce(broker, "trim-all", 1)
    assert consume_all(broker, "trim-all", 1) == [(5, b"m0")]


def test_log_start_never_moves_backwards(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "trim-back", 1)
    produce(broker, "trim-back", 8)
    assert delete(admin, "trim-back", 6) == 6
    assert delete(admin, "trim-back", 2) == 6
    assert earliest(admin, "trim-back") == 6


def test_delete_beyond_high_watermark(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "trim-far", 1)
    produce(broker, "trim-far", 3)
    with pytest.raises(KafkaException) as excinfo:
        delete(admin, "trim-far", 4)
    assert error_of(excinfo).code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert earliest(admin, "trim-far") == 0


def test_delete_unknown_topic(kadmin: KafkaAdminClient, broker: Broker) -> None:
    # partition_leader_id skips the client's metadata lookup, so the broker answers.
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kadmin.delete_records({KTopicPartition("trim-none", 0): 1}, partition_leader_id=0)
    assert "trim-none" not in broker.state.topics.topics  # type: ignore[union-attr]


def test_kafka_python_delete_records(kadmin: KafkaAdminClient, admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "kp-trim", 2)
    produce(broker, "kp-trim", 5, partition=1)
    answer = kadmin.delete_records({KTopicPartition("kp-trim", 1): 3})
    assert answer[KTopicPartition("kp-trim", 1)]["low_watermark"] == 3
    assert earliest(admin, "kp-trim", 1) == 3
    with pytest.raises(kerrors.OffsetOutOfRangeError):
        kadmin.delete_records({KTopicPartition("kp-trim", 0): 1})


@pytest.mark.parametrize("version", [0, 1, 2])
def test_every_version(broker: Broker, admin: AdminClient, version: int) -> None:
    create_topic(admin, "trim-v", 2)
    create_topic(admin, "trim-compacted", 1, {"cleanup.policy": "compact"})
    produce(broker, "trim-v", 4)
    produce(broker, "trim-compacted", 2)
    part = dr.DeleteRecordsRequestPartition
    request = dr.DeleteRecordsRequest(
        topics=[
            dr.DeleteRecordsRequestTopic(name="trim-v", partitions=[
                part(partition_index=0, offset=2),
                part(partition_index=1, offset=-1),
                part(partition_index=2, offset=0),
            ]),
            dr.DeleteRecordsRequestTopic(name="trim-compacted", partitions=[part(partition_index=0, offset=1)]),
            dr.DeleteRecordsRequestTopic(name="trim-v", partitions=[part(partition_index=0, offset=-2)]),
        ],
        timeout_ms=5000,
    )
    response = raw_request(broker, dr.SPEC, version, request)
    answers = [
        (t.name, p.partition_index, p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    ]
    assert answers == [
        ("trim-v", 0, 0, 2),
        ("trim-v", 1, 0, 0),  # empty partition: high watermark 0
        ("trim-v", 2, 3, -1),  # no such partition
        ("trim-compacted", 0, 44, -1),  # POLICY_VIOLATION: compacted topics keep their records
        ("trim-v", 0, 1, -1),  # negative offsets other than -1 are out of range
    ]


async def test_aiokafka_delete_then_consume_from_earliest() -> None:
    async with Broker(storage="memory", port=0) as b:
        admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers)
        await admin.start()
        await producer.start()
        try:
            b.state.topics.create("async-trim", 1)  # type: ignore[union-attr]  # on the broker's loop
            for i in range(6):
                await producer.send_and_wait("async-trim", f"a{i}".encode(), partition=0)
            tp = ATopicPartition("async-trim", 0)
            deleted = await admin.delete_records({tp: RecordsToDelete(before_offset=3)}, timeout_ms=5000)
            assert deleted == {tp: 3}
            assert b.state.topics.partition("async-trim", 0).log_start_offset == 3  # type: ignore[union-attr]
        finally:
            await producer.stop()
            await admin.close()
        consumer = AIOKafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([tp])
            assert (await consumer.beginning_offsets([tp]))[tp] == 3
            await consumer.seek_to_beginning(tp)
            batch = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=2000), TIMEOUT_S)
            assert [(m.offset, m.value) for m in batch[tp]] == [(i, f"a{i}".encode()) for i in range(3, 6)]
        finally:
            await consumer.stop()
