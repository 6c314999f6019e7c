"""storage=postgres: kill -9 the broker, start a new one on the same database with an
EMPTY data directory; everything acknowledged, committed offsets and idempotent
producer state come back from PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_helpers import (
    PARTITIONS,
    ck_consume,
    ck_create_topic,
    ck_produce,
    ck_watermarks,
    to_str,
    verify_records,
)

from slipstream.testing.broker_process import BrokerProcess

pytestmark = pytest.mark.conformance

N = 300


@pytest.fixture
def pg_broker(tmp_path: Path, postgres_url: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path / "data-1",
        tmp_path / "broker.log",
        extra_args=("--storage", "postgres", "--database-url", postgres_url, "--set", "group.initial.rebalance.delay.ms=0"),
    )
    broker.start(timeout=30)
    try:
        yield broker
    finally:
        broker.stop()


def restart_on_fresh_data_dir(broker: BrokerProcess) -> None:
    broker.kill9()
    broker.data_dir = broker.data_dir.with_name(f"data-{broker.starts + 1}")
    assert not broker.data_dir.exists()
    broker.start(timeout=30)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def test_acked_records_and_group_offsets_survive_kill_9_on_a_fresh_data_dir(pg_broker, topic_name):
    from confluent_kafka import Consumer, TopicPartition

    b = pg_broker
    ck_create_topic(b.bootstrap, topic_name)
    acks = ck_produce(b.bootstrap, topic_name, range(N), codec="lz4")
    before = ck_watermarks(b.bootstrap, topic_name)
    assert sum(hi - lo for lo, hi in before.values()) == N
    group = f"{topic_name}-group"
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    wanted = {p: (hi - lo) // 2 + p for p, (lo, hi) in before.items()}
    consumer.commit(offsets=[TopicPartition(topic_name, p, o) for p, o in wanted.items()], asynchronous=False)
    consumer.close()

    restart_on_fresh_data_dir(b)

    assert ck_watermarks(b.bootstrap, topic_name) == before  # the topic came back too
    verify_records(ck_consume(b.bootstrap, topic_name, N), range(N), acks=acks)
    assert committed(b.bootstrap, group, topic_name) == wanted
    more = ck_produce(b.bootstrap, topic_name, range(N, N + 30))
    for p in range(PARTITIONS):
        new_offsets = sorted(off for (q, off) in more.values() if q == p)
        if new_offsets:
            assert new_offsets[0] == before[p][1]


def test_idempotent_producer_in_flight_at_kill_9_loses_and_duplicates_nothing(pg_broker, topic_name):
    """A burst in flight at the kill is retried into the new broker: producer state
    rebuilt from the batches loaded out of the database recognises the retries."""
    from confluent_kafka import Producer

    b = pg_broker
    ck_create_topic(b.bootstrap, topic_name)
    acks: dict[str, tuple[int, int]] = {}
    failed: list[str] = []
    lock = threading.Lock()

    def on_delivery(err, msg):
        with lock:
            if err is None:
                acks[to_str(msg.key())] = (msg.partition(), msg.offset())
            else:
                failed.append(to_str(msg.key()))

    producer = Producer({
        "bootstrap.servers": b.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 50,
    })  # fmt: skip
    sent = 0

    def send(upto: int) -> None:
        nonlocal sent
        while sent < upto:
            producer.produce(topic_name, key=f"k{sent}", value=f"v{sent}", on_delivery=on_delivery)
            sent += 1
            producer.poll(0)

    send(300)
    deadline = time.monotonic() + 20
    while len(acks) < 300 and time.monotonic() < deadline:
        producer.poll(0.05)
    assert len(acks) >= 300, f"only {len(acks)} acked; failed: {failed[:5]}"
    send(sent + 500)
    acked_at_kill = len(acks)
    restart_on_fresh_data_dir(b)
    send(sent + 300)
    assert producer.flush(40) == 0
    assert not failed, f"failed deliveries: {failed[:10]}"
    assert len(acks) > acked_at_kill

    in_log = sum(hi - lo for lo, hi in ck_watermarks(b.bootstrap, topic_name).values())
    records = ck_consume(b.bootstrap, topic_name, in_log, timeout=30)
    by_key: dict[str, list] = {}
    for r in records:
        by_key.setdefault(r.key, []).append(r)
    lost = sorted(k for k in acks if k not in by_key)
    assert not lost, f"{len(lost)} acked records lost: {lost[:20]}"
    dupes = sorted(k for k, rs in by_key.items() if len(rs) > 1)
    assert not dupes, f"duplicated after restart: {dupes[:20]}"
    for k, (p, off) in acks.items():
        assert (by_key[k][0].partition, by_key[k][0].offset) == (p, off)


def init_transactional_id(bootstrap: str, transactional_id: str) -> tuple[int, int]:
    """InitProducerId for ``transactional_id`` straight to the broker: (producer id, epoch)."""
    import asyncio

    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import init_producer_id as ipi

    host, port = bootstrap.split(":")

    async def ask() -> tuple[int, int]:
        conn = await BrokerConnection(host, int(port)).connect()
        try:
            for _ in range(100):  # while the coordinator loads
                response = await conn.request(
                    ipi.SPEC, ipi.InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000)
                )
                if response.error_code == 0:
                    return response.producer_id, response.producer_epoch
                await asyncio.sleep(0.1)
            raise AssertionError(f"InitProducerId kept failing: error {response.error_code}")
        finally:
            await conn.close()

    return asyncio.run(ask())


def test_transactional_ids_survive_kill_9_on_a_fresh_data_dir(pg_broker, topic_name):
    """The transaction coordinator of a broker over PostgreSQL loads ``__transaction_state``
    once it holds its leases: after a restart the same transactional id keeps its producer
    id and gets the next epoch (a fresh id would let a zombie producer carry on)."""
    from confluent_kafka import Producer

    b = pg_broker
    ck_create_topic(b.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"{topic_name}-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"committed", key=b"k")
    producer.commit_transaction(30)
    before = init_transactional_id(b.bootstrap, f"{topic_name}-tx")

    restart_on_fresh_data_dir(b)

    after = init_transactional_id(b.bootstrap, f"{topic_name}-tx")
    assert after == (before[0], before[1] + 1)
