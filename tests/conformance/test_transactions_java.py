"""Transactions with the Java client (kafka-clients 3.9.1): a consume-transform-produce
loop with sendOffsetsToTransaction, read back by a read_committed KafkaConsumer."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from conformance_helpers import ck_create_topic, ck_produce

pytestmark = pytest.mark.conformance

N = 30


def test_send_offsets_to_transaction(broker, topic_name, java_driver):
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    group = f"copier-{uuid.uuid4().hex[:8]}"
    ck_create_topic(broker.bootstrap, source, partitions=2)
    ck_create_topic(broker.bootstrap, sink, partitions=2)
    ck_produce(broker.bootstrap, source, range(N))

    events = java_driver.run(
        broker.bootstrap, "txn-copy", source, sink, group, f"tx-{topic_name}", str(N), "--abort-first", timeout=90
    )
    assert events[-1] == {"event": "done", "copied": N}
    assert next(e["event"] for e in events if e["event"] in ("aborted", "committed")) == "aborted"

    # Each input copied exactly once, as a read_committed Java consumer sees the output.
    read = java_driver.run(broker.bootstrap, "consume", sink, str(N), "--from-beginning", "--isolation", "read_committed",
                           "--timeout-ms", "20000")
    values = sorted(e["value"] for e in read if e.get("event") == "record")
    source_values = sorted(f"copy-{e['value']}" for e in java_driver.run(
        broker.bootstrap, "consume", source, str(N), "--from-beginning", "--timeout-ms", "20000"
    ) if e.get("event") == "record")
    assert values == source_values and len(values) == N

    # The group's committed offsets are the ends of the input: committed with the transactions.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(source, p) for p in (0, 1)], timeout=10)
        ends = [consumer.get_watermark_offsets(TopicPartition(source, p), timeout=10)[1] for p in (0, 1)]
    finally:
        consumer.close()
    assert [tp.offset for tp in committed] == ends
