"""The Apache Kafka Java client (kafka-clients 3.9.1) against a Slipstream broker process.

Driven through tests/conformance/java/SlipstreamDriver.java, compiled by the
``java_driver`` fixture; each driver run prints one JSON object per line.
"""

from __future__ import annotations

import pytest
from conformance_helpers import (
    CODECS,
    PARTITIONS,
    ck_consume,
    ck_create_topic,
    ck_partitions,
    ck_produce,
    ck_watermarks,
    java_acks,
    java_records,
    now_ms,
    verify_acks,
    verify_records,
)

pytestmark = [pytest.mark.conformance, pytest.mark.java]

N = 40


def test_admin_create_and_list(broker, java_driver, topic_name):
    events = java_driver.run(broker.bootstrap, "admin-create", topic_name, str(PARTITIONS))
    (desc,) = [e for e in events if e["event"] == "described"]
    assert desc["partitions"] == list(range(PARTITIONS))
    assert desc["topic_id"] not in ("", "null", "AAAAAAAAAAAAAAAAAAAAAA"), "topic id must be set"
    assert ck_partitions(broker.bootstrap, topic_name) == list(range(PARTITIONS))
    listed = java_driver.run(broker.bootstrap, "admin-list")
    assert topic_name in {e["topic"] for e in listed if e["event"] == "topic"}


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_from_earliest(broker, java_driver, topic_name, codec):
    ck_create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    produced = java_driver.run(broker.bootstrap, "produce", topic_name, str(N), codec,
                               "--base-timestamp", str(base_ts))
    acks = java_acks(produced)
    verify_acks(acks, N)
    consumed = java_driver.run(broker.bootstrap, "consume", topic_name, str(N), "--from-beginning",
                               "--timeout-ms", "20000")
    verify_records(java_records(consumed), range(N), acks=acks, base_ts=base_ts)
    verify_records(ck_consume(broker.bootstrap, topic_name, N), range(N), acks=acks, base_ts=base_ts)


def test_consume_what_librdkafka_produced_every_codec(broker, java_driver, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    acks: dict[str, tuple[int, int]] = {}
    for j, codec in enumerate(CODECS):
        acks.update(ck_produce(broker.bootstrap, topic_name, range(j * N, (j + 1) * N), codec=codec))
    total = len(CODECS) * N
    consumed = java_driver.run(broker.bootstrap, "consume", topic_name, str(total), "--from-beginning",
                               "--timeout-ms", "20000")
    verify_records(java_records(consumed), range(total), acks=acks)


def test_consume_by_timestamp(broker, java_driver, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    acks = java_acks(java_driver.run(broker.bootstrap, "produce", topic_name, str(N), "lz4",
                                     "--base-timestamp", str(base_ts)))
    cut = N // 2
    events = java_driver.run(broker.bootstrap, "consume", topic_name, str(N - cut),
                             "--timestamp", str(base_ts + cut), "--timeout-ms", "20000")
    (ready,) = [e for e in events if e["event"] == "ready"]
    hw = {p: hi for p, (_lo, hi) in ck_watermarks(broker.bootstrap, topic_name).items()}
    for p in range(PARTITIONS):
        later = sorted(off for k, (q, off) in acks.items() if q == p and int(k[1:]) >= cut)
        assert ready["positions"][str(p)] == (later[0] if later else hw[p]), (p, ready, later)
    verify_records(java_records(events), range(cut, N), acks=acks, base_ts=base_ts)


def test_consume_latest(broker, java_driver, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    old = ck_produce(broker.bootstrap, topic_name, range(10))
    run = java_driver.start(broker.bootstrap, "consume", topic_name, "1", "--latest", "--timeout-ms", "20000")
    try:
        ready = run.wait_for("ready", timeout=30)
        for p in range(PARTITIONS):
            hw = 1 + max((o for q, o in old.values() if q == p), default=-1)
            assert ready["positions"][str(p)] == hw, (p, ready)
        acks = ck_produce(broker.bootstrap, topic_name, [100])
        events = run.finish(timeout=30)
    finally:
        run.kill()
    verify_records(java_records(events), [100], acks=acks)


def test_admin_list_offsets(broker, java_driver, topic_name):
    """Admin.listOffsets: earliest, latest, by timestamp and max timestamp (KIP-734)."""
    ck_create_topic(broker.bootstrap, topic_name)
    base_ts = now_ms() - 60_000
    # Timestamps out of order, so the max-timestamp record is not the last one.
    timestamps = {i: base_ts + (i * 17) % N for i in range(N)}
    acks = ck_produce(broker.bootstrap, topic_name, range(N), timestamps=timestamps,
                      extra={"linger.ms": 50})

    def offsets(spec: str) -> dict[int, tuple[int, int]]:
        events = java_driver.run(broker.bootstrap, "admin-offsets", topic_name, spec)
        return {e["partition"]: (e["offset"], e["timestamp"]) for e in events if e["event"] == "offset"}

    per: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    for k, (p, off) in acks.items():
        per[p].append((off, timestamps[int(k[1:])]))
    earliest, latest, maxts = offsets("earliest"), offsets("latest"), offsets("max-timestamp")
    target = base_ts + N // 2
    by_ts = offsets(str(target))
    for p, recs in per.items():
        assert earliest[p][0] == 0
        assert latest[p][0] == len(recs)
        if recs:
            best = max(recs, key=lambda r: (r[1], -r[0]))
            assert maxts[p] == best, (p, maxts[p], best)
            later = [r for r in sorted(recs) if r[1] >= target]
            assert by_ts[p] == (later[0] if later else (-1, -1)), (p, by_ts[p], later[:1])
        else:
            assert maxts[p][0] == -1


def test_admin_describe_cluster(broker, java_driver):
    (cluster,) = [e for e in java_driver.run(broker.bootstrap, "admin-cluster") if e["event"] == "cluster"]
    assert cluster["cluster_id"] and cluster["cluster_id"] != "null"
    assert [(n["host"], n["port"]) for n in cluster["nodes"]] == [("127.0.0.1", broker.port)]
    assert cluster["controller"] == cluster["nodes"][0]["id"]


def test_admin_incremental_alter_and_describe_configs(broker, java_driver, topic_name):
    ck_create_topic(broker.bootstrap, topic_name)
    events = java_driver.run(broker.bootstrap, "admin-set-config", topic_name, "retention.bytes", "1048576")
    configs = {e["name"]: e for e in events if e["event"] == "config"}
    assert configs["retention.bytes"]["value"] == "1048576"
    assert configs["retention.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
