"""Transactions with confluent-kafka (librdkafka): its transactional producer against a
Slipstream broker process, read back by a read_committed confluent consumer."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from conformance_helpers import ck_create_topic

from slipstream.client.connection import BrokerConnection
from slipstream.protocol.apis import describe_transactions as dt

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
    """The coordinator's state of ``tid`` (DescribeTransactions; confluent-kafka 2.16 has
    no call for it, so through Slipstream's own connection)."""

    async def ask() -> str:
        host, port = bootstrap.rsplit(":", 1)
        conn = await BrokerConnection(host, int(port)).connect()
        try:
            request = dt.DescribeTransactionsRequest(transactional_ids=[tid])
            response = await conn.request(dt.SPEC, request, version=0)
        finally:
            await conn.close()
        (state,) = response.transaction_states
        assert state.error_code == 0, state
        return str(state.transaction_state)

    return asyncio.run(ask())


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


# A broker whose transaction coordinator never writes markers: EndTxn is answered once
# PrepareCommit is durable, and the transaction stays there until the process dies.
_MARKERLESS_BROKER = textwrap.dedent(
    """
    import sys
    from slipstream.broker.transactions import TransactionCoordinatorAdapter
    from slipstream.cli import main
    TransactionCoordinatorAdapter._spawn_markers = lambda self, job: None
    sys.exit(main(["serve", "--host", "127.0.0.1", "--port", sys.argv[1], "--data-dir", sys.argv[2],
                   "--auto-create-topics", "true"]))
    """
)


def test_prepare_commit_at_kill9_completes_after_restart(fresh_broker, topic_name):
    """kill -9 with the transaction in PrepareCommit (its markers not written): the
    restarted broker writes them, and a read_committed consumer sees the records."""
    broker = fresh_broker
    broker.stop()
    with open(broker.log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _MARKERLESS_BROKER, str(broker.port), str(broker.data_dir)],
            stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy(),
        )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                ck_create_topic(broker.bootstrap, topic_name, partitions=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        producer = txn_producer(broker.bootstrap, f"tx-{topic_name}")
        producer.init_transactions(15)
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic_name, value=f"v{i}".encode(), partition=i % 2)
        producer.commit_transaction(15)
        assert describe_state(broker.bootstrap, f"tx-{topic_name}") == "PrepareCommit"
        # Nothing is readable yet: the transaction holds the LSO.
        assert read_committed(broker.bootstrap, topic_name, 2, expect=0, timeout=3) == []
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    broker.start()
    assert read_committed(broker.bootstrap, topic_name, 2, expect=20) == sorted(f"v{i}" for i in range(20))
    assert describe_state(broker.bootstrap, f"tx-{topic_name}") == "CompleteCommit"


def test_commit_survives_kill9(fresh_broker, topic_name):
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
