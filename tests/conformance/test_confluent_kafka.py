"""confluent-kafka (librdkafka 2.x) against a Slipstream broker process."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from conformance_helpers import (
    CODECS,
    PARTITIONS,
    ck_consume,
    ck_create_topic,
    ck_partitions,
    ck_produce,
    ck_watermarks,
    now_ms,
    to_str,
    verify_acks,
    verify_records,
)

pytestmark = pytest.mark.conformance

N = 40


def test_admin_create_topic(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=1)],
                                  operation_timeout=10, request_timeout=15)
    assert futures[topic_name].result(timeout=20) is None
    md = admin.list_topics(timeout=10)
    assert topic_name in md.topics
    assert sorted(md.topics[topic_name].partitions) == list(range(PARTITIONS))
    assert len(md.brokers) == 1
    (b,) = md.brokers.values()
    assert (b.host, b.port) == ("127.0.0.1", broker.port)
    # Creating it again is refused with TOPIC_ALREADY_EXISTS.
    again = admin.create_topics([NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=1)],
                                request_timeout=15)
    with pytest.raises(Exception, match=r"TOPIC_ALREADY_EXISTS|already exists"):
        again[topic_name].result(timeout=20)


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_from_earliest(broker, topic_name, codec):
    ck_create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = ck_produce(broker.bootstrap, topic_name, range(N), codec=codec, base_ts=base_ts)
    verify_acks(acks, N)
    records = ck_consume(broker.bootstrap, topic_name, N)
    verify_records(records, range(N), acks=acks, base_ts=base_ts)


def test_consume_by_timestamp(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = ck_produce(broker.bootstrap, topic_name, range(N), codec="lz4", base_ts=base_ts)
    cut = N // 2
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic_name}"})
    try:
        query = [TopicPartition(topic_name, p, base_ts + cut) for p in range(PARTITIONS)]
        found = consumer.offsets_for_times(query, timeout=10)
    finally:
        consumer.close()
    start: dict[int, int] = {}
    for tp in found:
        assert tp.error is None, tp.error
        later = sorted(off for k, (p, off) in acks.items() if p == tp.partition and int(k[1:]) >= cut)
        # First offset whose timestamp >= the target; -1 (end) when there is none.
        assert tp.offset == (later[0] if later else -1), (tp.partition, tp.offset, later)
        start[tp.partition] = tp.offset if tp.offset >= 0 else OFFSET_END
    records = ck_consume(broker.bootstrap, topic_name, N - cut, start=start)
    verify_records(records, range(cut, N), acks=acks, base_ts=base_ts)


def test_consume_latest(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    ck_produce(broker.bootstrap, topic_name, range(10))
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"unused-{topic_name}",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    })
    try:
        consumer.assign([TopicPartition(topic_name, p, OFFSET_END) for p in range(PARTITIONS)])
        old = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                old.append(msg)
        assert not old, f"old messages delivered from latest: {[m.key() for m in old]}"
        acks = ck_produce(broker.bootstrap, topic_name, [100])
        got = []
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline and not got:
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.append(msg)
        assert [to_str(m.key()) for m in got] == ["k100"]
        assert (got[0].partition(), got[0].offset()) == acks["k100"]
    finally:
        consumer.close()


def test_auto_create_on_produce(broker, topic_name):
    """Metadata for an unknown topic auto-creates it (default on, 3 partitions here)."""
    acks = ck_produce(broker.bootstrap, topic_name, range(5))
    assert ck_partitions(broker.bootstrap, topic_name) == list(range(PARTITIONS))
    verify_records(ck_consume(broker.bootstrap, topic_name, 5), range(5), acks=acks)


def test_non_idempotent_acks_1(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    acks = ck_produce(broker.bootstrap, topic_name, range(N), codec="snappy",
                      extra={"enable.idempotence": False, "acks": 1})
    verify_records(ck_consume(broker.bootstrap, topic_name, N), range(N), acks=acks)


def test_acks_0(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    ck_produce(broker.bootstrap, topic_name, range(N), extra={"enable.idempotence": False, "acks": 0})
    verify_records(ck_consume(broker.bootstrap, topic_name, N), range(N))


def test_record_shapes_round_trip(broker, topic_name):
    """Null/empty keys and values, binary data, repeated and null headers, ~900 KB values."""
    ck_create_topic(broker.bootstrap, topic_name, partitions=1)
    big = bytes((i * 7919) % 251 for i in range(900_000))
    shapes = [
        (None, b"no key", None),
        (b"tombstone", None, None),
        (b"", b"", []),
        (bytes(range(256)), bytes(range(255, -1, -1)), [("bin", bytes(range(256)))]),
        (b"hdrs", b"x", [("a", b"1"), ("a", b"2"), ("null", None), ("ключ", "значение".encode())]),
        (b"big", big, [("size", b"900000")]),
    ]
    for codec in ("none", "zstd"):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "compression.type": codec, "message.max.bytes": 2_000_000})
        for key, value, headers in shapes:
            producer.produce(topic_name, key=key, value=value, headers=headers, partition=0)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic_name}",
                         "enable.auto.commit": False})
    got = []
    try:
        consumer.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while len(got) < 2 * len(shapes) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg)
    finally:
        consumer.close()
    assert [m.offset() for m in got] == list(range(2 * len(shapes)))
    for m, (key, value, headers) in zip(got, shapes * 2, strict=True):
        assert m.key() == key
        assert m.value() == value
        want = [(k, v) for k, v in headers] if headers else None
        assert (m.headers() or None) == (want or None), (m.headers(), want)


def test_fetch_progress_with_tiny_fetch_sizes(broker, topic_name):
    """A batch bigger than the fetch limits is still returned whole, so consumers progress."""
    ck_create_topic(broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(30):
        producer.produce(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode() + b"." * 10_000,
                         headers=[("i", str(i).encode())])
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic_name}",
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 1024,
                         "fetch.max.bytes": 2048, "message.max.bytes": 1000,
                         "fetch.wait.max.ms": 100})
    got = []
    try:
        consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 20
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg)
    finally:
        consumer.close()
    assert sorted(int(to_str(m.key())[1:]) for m in got) == list(range(30))


def test_delete_records(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, partitions=1)
    acks = ck_produce(broker.bootstrap, topic_name, range(20))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition(topic_name, 0, 12)], request_timeout=15)
    (fut,) = futures.values()
    res = fut.result(timeout=20)
    assert res.low_watermark == 12
    assert ck_watermarks(broker.bootstrap, topic_name)[0] == (12, 20)
    verify_records(ck_consume(broker.bootstrap, topic_name, 8), range(12, 20), acks=acks)


def test_create_partitions(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic_name, 5)], request_timeout=15)[topic_name].result(timeout=20)
    deadline = time.monotonic() + 10
    while ck_partitions(broker.bootstrap, topic_name) != list(range(5)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ck_partitions(broker.bootstrap, topic_name) == list(range(5))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    delivered = []
    producer.produce(topic_name, key=b"k0", value=b"v0", headers=[("i", b"0")], partition=4,
                     on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert producer.flush(20) == 0
    assert delivered == [(None, 4, 0)]
    # Fewer partitions than now is refused.
    with pytest.raises(Exception, match=r"INVALID_PARTITIONS|partition"):
        admin.create_partitions([NewPartitions(topic_name, 2)], request_timeout=15)[topic_name].result(timeout=20)


def test_describe_and_alter_topic_configs(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, config={"retention.ms": "3600000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic_name)

    def describe() -> dict[str, str | None]:
        (fut,) = admin.describe_configs([res], request_timeout=15).values()
        return {name: entry.value for name, entry in fut.result(timeout=20).items()}

    configs = describe()
    for name in ("retention.ms", "retention.bytes", "segment.bytes", "cleanup.policy",
                 "message.timestamp.type", "max.message.bytes"):
        assert name in configs, f"{name} missing from DescribeConfigs: {sorted(configs)}"
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "delete"
    assert configs["message.timestamp.type"] == "CreateTime"

    alter = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "500000", incremental_operation=AlterConfigOpType.SET),
    ])
    (fut,) = admin.incremental_alter_configs([alter], request_timeout=15).values()
    fut.result(timeout=20)
    configs = describe()
    assert configs["retention.ms"] == "7200000"
    assert configs["max.message.bytes"] == "500000"

    bad = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "bogus", incremental_operation=AlterConfigOpType.SET),
    ])
    (fut,) = admin.incremental_alter_configs([bad], request_timeout=15).values()
    with pytest.raises(Exception, match=r"INVALID_CONFIG|nvalid"):
        fut.result(timeout=20)


def test_log_append_time_topic(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    ck_produce(broker.bootstrap, topic_name, range(10), base_ts=before - 3_600_000)
    records = ck_consume(broker.bootstrap, topic_name, 10)
    after = now_ms()
    for r in records:
        assert r.timestamp is not None and before - 1000 <= r.timestamp <= after + 1000, (r, before, after)


def test_delete_topic(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    ck_produce(broker.bootstrap, topic_name, range(5))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic_name], request_timeout=15)[topic_name].result(timeout=20)
    deadline = time.monotonic() + 10
    while topic_name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert topic_name not in admin.list_topics(timeout=10).topics
