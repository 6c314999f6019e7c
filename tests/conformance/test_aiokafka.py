"""aiokafka against a Slipstream broker process."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import codec as acodec
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
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

from slipstream.testing.peers import missing_peer

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

N = 40
AVAILABLE = {
    "none": True,
    "gzip": acodec.has_gzip(),
    "snappy": acodec.has_snappy(),
    "lz4": acodec.has_lz4(),
    "zstd": acodec.has_zstd(),
}


async def create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await asyncio.wait_for(admin.start(), 20)
    try:
        resp = await asyncio.wait_for(
            admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]), 20
        )
        errors = [t for t in resp.topic_errors if t[1] != 0]
        assert not errors, errors
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, indexes, codec: str = "none",
                  base_ts: int | None = None) -> dict[str, tuple[int, int]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=10000,
    )
    await asyncio.wait_for(producer.start(), 20)
    try:
        futures = []
        for i in indexes:
            fut = await producer.send(
                topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("i", str(i).encode())],
                timestamp_ms=None if base_ts is None else base_ts + i,
            )
            futures.append((f"k{i}", fut))
        acks = {}
        for key, fut in futures:
            md = await asyncio.wait_for(fut, 30)
            acks[key] = (md.partition, md.offset)
        return acks
    finally:
        await asyncio.wait_for(producer.stop(), 20)


async def started_consumer(bootstrap: str) -> AIOKafkaConsumer:
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
    )
    await asyncio.wait_for(c.start(), 20)
    return c


async def read(c: AIOKafkaConsumer, count: int, timeout: float = 20.0, drain: float = 0.5) -> list[Rec]:
    records: list[Rec] = []
    deadline = time.monotonic() + timeout
    drain_until = None
    while True:
        now = time.monotonic()
        if drain_until is None and len(records) >= count:
            drain_until = now + drain
        if now > (drain_until if drain_until is not None else deadline):
            break
        batches = await c.getmany(timeout_ms=100)
        for msgs in batches.values():
            for m in msgs:
                records.append(Rec(m.partition, m.offset, to_str(m.key), to_str(m.value),
                                   norm_headers(m.headers), m.timestamp))
    assert len(records) >= count, f"read {len(records)} of {count} in {timeout}s"
    return records


def all_partitions(topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(PARTITIONS)]


async def test_admin_create_and_describe(broker, topic_name):
    await create_topic(broker.bootstrap, topic_name)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    await asyncio.wait_for(admin.start(), 20)
    try:
        assert topic_name in await asyncio.wait_for(admin.list_topics(), 20)
        (desc,) = await asyncio.wait_for(admin.describe_topics([topic_name]), 20)
        assert desc["error_code"] == 0, desc
        assert sorted(p["partition"] for p in desc["partitions"]) == list(range(PARTITIONS))
    finally:
        await admin.close()


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_consume_from_earliest(broker, topic_name, codec):
    if not AVAILABLE[codec]:
        missing_peer(f"aiokafka cannot use {codec} here")
    await create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = await produce(broker.bootstrap, topic_name, range(N), codec=codec, base_ts=base_ts)
    verify_acks(acks, N)
    c = await started_consumer(broker.bootstrap)
    try:
        c.assign(all_partitions(topic_name))
        await c.seek_to_beginning()
        records = await read(c, N)
    finally:
        await c.stop()
    verify_records(records, range(N), acks=acks, base_ts=base_ts)
    records = await asyncio.to_thread(ck_consume, broker.bootstrap, topic_name, N)
    verify_records(records, range(N), acks=acks, base_ts=base_ts)


@pytest.mark.parametrize("codec", CODECS)
async def test_consume_what_librdkafka_produced(broker, topic_name, codec):
    if not AVAILABLE[codec]:
        missing_peer(f"aiokafka cannot use {codec} here")
    await asyncio.to_thread(ck_create_topic, broker.bootstrap, topic_name)
    acks = await asyncio.to_thread(ck_produce, broker.bootstrap, topic_name, range(N), codec)
    c = await started_consumer(broker.bootstrap)
    try:
        c.assign(all_partitions(topic_name))
        await c.seek_to_beginning()
        records = await read(c, N)
    finally:
        await c.stop()
    verify_records(records, range(N), acks=acks)


async def test_consume_by_timestamp(broker, topic_name):
    await create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = await produce(broker.bootstrap, topic_name, range(N), codec="gzip", base_ts=base_ts)
    cut = N // 2
    c = await started_consumer(broker.bootstrap)
    try:
        tps = all_partitions(topic_name)
        c.assign(tps)
        found = await asyncio.wait_for(c.offsets_for_times(dict.fromkeys(tps, base_ts + cut)), 20)
        for tp in tps:
            later = sorted(off for k, (p, off) in acks.items() if p == tp.partition and int(k[1:]) >= cut)
            got = found[tp]
            if later:
                assert got is not None and got.offset == later[0], (tp, got, later)
                c.seek(tp, got.offset)
            else:
                assert got is None, (tp, got)
                await c.seek_to_end(tp)
        records = await read(c, N - cut)
    finally:
        await c.stop()
    verify_records(records, range(cut, N), acks=acks, base_ts=base_ts)


async def test_consume_latest(broker, topic_name):
    await create_topic(broker.bootstrap, topic_name)
    old = await produce(broker.bootstrap, topic_name, range(10))
    c = await started_consumer(broker.bootstrap)
    try:
        tps = all_partitions(topic_name)
        c.assign(tps)
        await c.seek_to_end()
        for tp in tps:
            pos = await asyncio.wait_for(c.position(tp), 10)
            assert pos == 1 + max((o for q, o in old.values() if q == tp.partition), default=-1)
        stale = await c.getmany(timeout_ms=1000)
        assert not any(stale.values()), f"old messages delivered from latest: {stale}"
        acks = await produce(broker.bootstrap, topic_name, [100])
        records = await read(c, 1, timeout=15)
    finally:
        await c.stop()
    verify_records(records, [100], acks=acks)
