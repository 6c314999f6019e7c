"""kafka-python 3.x against a Slipstream broker process."""

from __future__ import annotations

import time

import pytest
from conformance_helpers import (
    CODECS,
    PARTITIONS,
    Rec,
    ck_consume,
    ck_create_topic,
    ck_produce,
    norm_headers,
    now_ms,
    to_str,
    verify_acks,
    verify_records,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import codec as kcodec
from kafka.admin import NewTopic

from slipstream.testing.peers import missing_peer

pytestmark = pytest.mark.conformance

N = 40
AVAILABLE = {
    "none": True,
    "gzip": kcodec.has_gzip(),
    "snappy": kcodec.has_snappy(),
    "lz4": kcodec.has_lz4(),
    "zstd": kcodec.has_zstd(),
}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                            timeout_ms=10000)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, indexes, codec: str = "none",
            base_ts: int | None = None) -> dict[str, tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=10000,
        max_block_ms=15000,
    )
    try:
        futures = []
        for i in indexes:
            futures.append((f"k{i}", producer.send(
                topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("i", str(i).encode())],
                timestamp_ms=None if base_ts is None else base_ts + i,
            )))
        producer.flush(timeout=30)
        acks = {}
        for key, fut in futures:
            md = fut.get(timeout=30)
            acks[key] = (md.partition, md.offset)
        return acks
    finally:
        producer.close(timeout=10)


def consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
    )


def read(c: KafkaConsumer, count: int, timeout: float = 20.0, drain: float = 0.5) -> list[Rec]:
    records: list[Rec] = []
    deadline = time.monotonic() + timeout
    drain_until = None
    while True:
        now = time.monotonic()
        if drain_until is None and len(records) >= count:
            drain_until = now + drain
        if now > (drain_until if drain_until is not None else deadline):
            break
        for batch in c.poll(timeout_ms=100).values():
            for m in batch:
                records.append(Rec(m.partition, m.offset, to_str(m.key), to_str(m.value),
                                   norm_headers(m.headers), m.timestamp))
    assert len(records) >= count, f"read {len(records)} of {count} in {timeout}s"
    return records


def all_partitions(topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(PARTITIONS)]


def test_admin_create_and_describe(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        assert topic_name in admin.list_topics()
        (desc,) = admin.describe_topics([topic_name])
        assert desc["error_code"] == 0, desc
        assert sorted(p["partition_index"] for p in desc["partitions"]) == list(range(PARTITIONS))
    finally:
        admin.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_from_earliest(broker, topic_name, codec):
    if not AVAILABLE[codec]:
        missing_peer(f"kafka-python has no {codec} module installed here")
    create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = produce(broker.bootstrap, topic_name, range(N), codec=codec, base_ts=base_ts)
    verify_acks(acks, N)
    c = consumer(broker.bootstrap)
    try:
        c.assign(all_partitions(topic_name))
        c.seek_to_beginning()
        records = read(c, N)
    finally:
        c.close()
    verify_records(records, range(N), acks=acks, base_ts=base_ts)
    # An independent client sees the same log.
    verify_records(ck_consume(broker.bootstrap, topic_name, N), range(N), acks=acks, base_ts=base_ts)


@pytest.mark.parametrize("codec", CODECS)
def test_consume_what_librdkafka_produced(broker, topic_name, codec):
    if not AVAILABLE[codec]:
        missing_peer(f"kafka-python has no {codec} module installed here")
    ck_create_topic(broker.bootstrap, topic_name)
    acks = ck_produce(broker.bootstrap, topic_name, range(N), codec=codec)
    c = consumer(broker.bootstrap)
    try:
        c.assign(all_partitions(topic_name))
        c.seek_to_beginning()
        records = read(c, N)
    finally:
        c.close()
    verify_records(records, range(N), acks=acks)


def test_consume_by_timestamp(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = produce(broker.bootstrap, topic_name, range(N), base_ts=base_ts)
    cut = N // 2
    c = consumer(broker.bootstrap)
    try:
        tps = all_partitions(topic_name)
        c.assign(tps)
        found = c.offsets_for_times(dict.fromkeys(tps, base_ts + cut))
        for tp in tps:
            later = sorted(off for k, (p, off) in acks.items() if p == tp.partition and int(k[1:]) >= cut)
            got = found[tp]
            if later:
                assert got is not None and got.offset == later[0], (tp, got, later)
                assert got.timestamp >= base_ts + cut
                c.seek(tp, got.offset)
            else:
                assert got is None, (tp, got)
                c.seek_to_end(tp)
        records = read(c, N - cut)
    finally:
        c.close()
    verify_records(records, range(cut, N), acks=acks, base_ts=base_ts)


def test_consume_latest(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    old = produce(broker.bootstrap, topic_name, range(10))
    c = consumer(broker.bootstrap)
    try:
        tps = all_partitions(topic_name)
        c.assign(tps)
        c.seek_to_end()
        positions = {tp.partition: c.position(tp, timeout_ms=10000) for tp in tps}
        for p in range(PARTITIONS):
            assert positions[p] == 1 + max((o for q, o in old.values() if q == p), default=-1)
        stale = c.poll(timeout_ms=1000)
        assert not any(stale.values()), f"old messages delivered from latest: {stale}"
        acks = produce(broker.bootstrap, topic_name, [100])
        records = read(c, 1, timeout=15)
    finally:
        c.close()
    verify_records(records, [100], acks=acks)
