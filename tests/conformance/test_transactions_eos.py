"""Exactly-once through kill -9: a confluent-kafka consume-transform-produce copier
(read_committed group consumer + transactional producer with
send_offsets_to_transaction) is killed with SIGKILL at random points and restarted;
in the end every input record is in the output exactly once, as a read_committed
consumer reads it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from conformance_helpers import ck_create_topic

pytestmark = pytest.mark.conformance

N = 400
PARTITIONS = 2
KILLS = 5

_COPIER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer, KafkaException, Producer
    bootstrap, source, sink, group = sys.argv[1:5]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.instance.id": "copier", "session.timeout.ms": 3000,
                         "heartbeat.interval.ms": 500,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-" + group,
                         "transaction.timeout.ms": 10000, "linger.ms": 2})
    producer.init_transactions(30)
    consumer.subscribe([source])
    while True:
        batch = [m for m in consumer.consume(25, 0.3) if not m.error()]
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce(sink, value=b"copy-" + m.value(), key=m.key())
        producer.flush(30)
        time.sleep(0.3)  # a transaction spans time, so most kills land inside one
        try:
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(30)
            # Rewind to what the group committed: the aborted copies are made again.
            committed = consumer.committed(consumer.assignment(), 30)
            for tp in committed:
                consumer.seek(tp)
        print("committed", len(batch), flush=True)
    """
)


def feed(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for start in range(0, N, 20):
        for i in range(start, start + 20):
            producer.produce(topic, value=b"v%d" % i, key=b"k%d" % i)
        assert producer.flush(30) == 0
        time.sleep(0.4)


def start_copier(bootstrap: str, source: str, sink: str, group: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _COPIER, bootstrap, source, sink, group],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy(),
    )


def read_all(bootstrap: str, topic: str, timeout: float, isolation: str = "read_committed") -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and len(eof) < PARTITIONS:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            eof.discard(msg.partition())
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_copier_killed_at_random_points_copies_exactly_once(group_broker, topic_name):
    bootstrap = group_broker.bootstrap
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"eos-{uuid.uuid4().hex[:6]}"
    ck_create_topic(bootstrap, source, partitions=PARTITIONS)
    ck_create_topic(bootstrap, sink, partitions=PARTITIONS)
    # The input arrives while the copiers run and die: 20 records every 0.4 s.
    feeder = threading.Thread(target=feed, args=(bootstrap, source), daemon=True)
    feeder.start()
    rng = random.Random(int(os.environ.get("EOS_TEST_SEED", "7")))
    for _ in range(KILLS):
        copier = start_copier(bootstrap, source, sink, group)
        time.sleep(rng.uniform(1.0, 2.5))
        os.kill(copier.pid, signal.SIGKILL)
        copier.wait()
    feeder.join(60)
    copier = start_copier(bootstrap, source, sink, group)
    try:
        deadline = time.monotonic() + 60
        copies: list[bytes] = []
        while time.monotonic() < deadline:
            copies = read_all(bootstrap, sink, timeout=10)
            if len(copies) >= N:
                break
            assert copier.poll() is None, copier.stdout.read() if copier.stdout else ""
            time.sleep(0.5)
    finally:
        os.kill(copier.pid, signal.SIGKILL)
        copier.wait()
    expected = sorted(b"copy-v%d" % i for i in range(N))
    assert sorted(copies) == expected, f"{len(copies)} copies, {len(set(copies))} distinct of {N}"
    # The kills did cut transactions short: the log holds copies that were aborted.
    assert len(read_all(bootstrap, sink, timeout=10, isolation="read_uncommitted")) > N
