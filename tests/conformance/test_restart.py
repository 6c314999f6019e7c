"""Crash safety: kill -9 the broker process, restart it on the same data dir and port."""

from __future__ import annotations

import threading
import time

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

pytestmark = pytest.mark.conformance

N = 300


def test_acked_messages_survive_kill_9_and_offsets_continue(fresh_broker, topic_name):
    b = fresh_broker
    ck_create_topic(b.bootstrap, topic_name)
    acks = ck_produce(b.bootstrap, topic_name, range(N), codec="lz4")
    before = ck_watermarks(b.bootstrap, topic_name)
    assert sum(hi - lo for lo, hi in before.values()) == N

    b.kill9()
    b.start()

    after = ck_watermarks(b.bootstrap, topic_name)
    assert after == before, f"watermarks changed across the restart: {before} -> {after}"
    verify_records(ck_consume(b.bootstrap, topic_name, N), range(N), acks=acks)

    more = ck_produce(b.bootstrap, topic_name, range(N, N + 60), codec="zstd")
    for p in range(PARTITIONS):
        new_offsets = sorted(off for (q, off) in more.values() if q == p)
        if new_offsets:
            assert new_offsets[0] == before[p][1], f"partition {p}: new offsets {new_offsets} after {before[p]}"
    verify_records(ck_consume(b.bootstrap, topic_name, N + 60), range(N + 60), acks={**acks, **more})


def test_topics_and_auto_created_topics_survive_restart(fresh_broker, topic_name):
    b = fresh_broker
    ck_create_topic(b.bootstrap, topic_name, partitions=5)
    acks = ck_produce(b.bootstrap, topic_name, range(20))
    auto = topic_name + "-auto"
    auto_acks = ck_produce(b.bootstrap, auto, range(7))
    b.restart()
    # A restarted broker must not re-create the topics with default settings.
    assert sorted(ck_watermarks(b.bootstrap, topic_name)) == list(range(5))
    verify_records(ck_consume(b.bootstrap, topic_name, 20), range(20), acks=acks)
    verify_records(ck_consume(b.bootstrap, auto, 7), range(7), acks=auto_acks)


def test_kill_9_during_produce(fresh_broker, topic_name):
    """Kill the broker while a producer is sending: every acked message survives, once."""
    from confluent_kafka import Producer

    b = fresh_broker
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
        "message.timeout.ms": 20000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
    })
    sent = 0

    def send(upto: int) -> None:
        nonlocal sent
        while sent < upto:
            producer.produce(topic_name, key=f"k{sent}".encode(), value=f"v{sent}".encode(),
                             headers=[("i", str(sent).encode())], on_delivery=on_delivery)
            sent += 1
            producer.poll(0)

    # Phase 1: a steady stream until a few hundred are acked.
    deadline = time.monotonic() + 20.0
    while len(acks) < 300 and time.monotonic() < deadline:
        send(sent + 20)
        producer.poll(0.01)
    assert len(acks) >= 300, f"only {len(acks)} of {sent} acked in 20s; failed: {failed[:5]}"
    # Phase 2: a burst left in flight, then kill -9 and restart on the same dir and port.
    send(sent + 500)
    b.kill9()
    acked_at_kill = len(acks)
    time.sleep(0.2)
    b.start()
    # Phase 3: keep producing into the restarted broker.
    send(sent + 500)
    left = producer.flush(30)
    assert left == 0, f"{left} messages neither acked nor failed"

    assert len(acks) > acked_at_kill, f"nothing acked after the restart; failed: {failed[:10]}"
    in_log = sum(hi - lo for lo, hi in ck_watermarks(b.bootstrap, topic_name).values())
    assert in_log >= len(acks)
    records = ck_consume(b.bootstrap, topic_name, in_log, timeout=30)
    by_key: dict[str, list] = {}
    for r in records:
        by_key.setdefault(r.key, []).append(r)
    lost = sorted(k for k in acks if k not in by_key)
    assert not lost, f"{len(lost)} acked messages lost: {lost[:20]}"
    dupes = sorted(k for k, rs in by_key.items() if len(rs) > 1)
    assert not dupes, f"duplicated after restart (idempotence state lost?): {dupes[:20]}"
    for k, (p, off) in acks.items():
        (r,) = by_key[k]
        assert (r.partition, r.offset) == (p, off), f"{k} acked at {(p, off)} read at {(r.partition, r.offset)}"
    # Order per partition follows production order for everything in the log.
    verify_records(records, [int(k[1:]) for k in by_key], acks=None)
