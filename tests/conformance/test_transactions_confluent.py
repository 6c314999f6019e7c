"""Transactions with confluent-kafka (librdkafka): its transactional producer against a
Slipstream broker process, read back by a read_committed confluent consumer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from conformance_helpers import ck_create_topic

pytestmark = pytest.mark.conformance


def txn_producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "transaction.timeout.ms": 10_000,
        "linger.ms": 5,
    }
    config.update(extra)
    return Producer(config)


def read_committed(bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 20.0) -> list[str]:
    """Every committed value, read to the end by a read_committed consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    at_eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    if len(at_eof) == partitions and len(values) >= expect:
                        break
                    continue
                raise KafkaException(msg.error())
            at_eof.discard(msg.partition())
            values.append(msg.value().decode())
    finally:
        consumer.close()
    return sorted(values)


def describe_state(bootstrap: str, tid: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.describe_transactions([tid]) if hasattr(admin, "describe_transactions") else None
    if fut is None:  # pragma: no cover - older clients
        return "?"
    return str(fut[tid].result(timeout=10).state)


def test_commit_and_abort_read_committed(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, partitions=2)
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, value=f"c{i}".encode(), partition=i % 2)
    producer.commit_transaction(15)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, value=f"a{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(15)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"last", partition=0)
    producer.commit_transaction(15)
    values = read_committed(broker.bootstrap, topic_name, 2, expect=11)
    assert values == sorted([f"c{i}" for i in range(10)] + ["last"])


def test_zombie_producer_is_fenced(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, partitions=1)
    tid = f"tx-{topic_name}"
    zombie = txn_producer(broker.bootstrap, tid)
    zombie.init_transactions(15)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie", partition=0)
    zombie.flush(10)
    # A new instance with the same transactional id fences the first and aborts its transaction.
    fresh = txn_producer(broker.bootstrap, tid)
    fresh.init_transactions(30)
    fresh.begin_transaction()
    fresh.produce(topic_name, value=b"fresh", partition=0)
    fresh.commit_transaction(15)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(15)
    err = info.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert read_committed(broker.bootstrap, topic_name, 1, expect=1) == ["fresh"]


_KILLED_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, tid = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 3000, "linger.ms": 0})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"lost{i}".encode(), partition=0)
    p.flush(10)
    print("produced", flush=True)
    time.sleep(60)
    """
)


def test_killed_producer_transaction_times_out(broker, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, partitions=1)
    tid = f"tx-{topic_name}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PRODUCER, broker.bootstrap, topic_name, tid],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"produced"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # The open transaction holds back read_committed readers (LSO) until the coordinator
    # aborts it at transaction.timeout.ms (3 s); data committed after that is readable.
    later = txn_producer(broker.bootstrap, f"other-{topic_name}")
    later.init_transactions(15)
    later.begin_transaction()
    later.produce(topic_name, value=b"after", partition=0)
    later.commit_transaction(15)
    assert read_committed(broker.bootstrap, topic_name, 1, expect=1, timeout=30) == ["after"]


def test_prepared_commit_survives_kill9(fresh_broker, topic_name):
    broker = fresh_broker
    ck_create_topic(broker.bootstrap, topic_name, partitions=2)
    producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=i % 2)
    producer.commit_transaction(15)
    broker.restart()
    assert read_committed(broker.bootstrap, topic_name, 2, expect=20) == sorted(f"v{i}" for i in range(20))
