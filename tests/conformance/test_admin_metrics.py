"""The admin listener's /metrics while real clients (confluent-kafka) run against a broker
process: the figures are checked against what the clients did."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from slipstream.testing.broker_process import GROUP_BROKER_ARGS, BrokerProcess, running_broker
from slipstream.testing.ports import free_port

pytestmark = pytest.mark.conformance


@pytest.fixture
def admin_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    args = (*GROUP_BROKER_ARGS, "--admin-port", str(port), "--set", "group.initial.rebalance.delay.ms=0")
    for broker in running_broker(tmp_path, args):
        yield broker, f"http://127.0.0.1:{port}"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = get(base + "/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_metrics_follow_real_clients(admin_broker, topic_name):
    broker, base = admin_broker
    assert get(base + "/healthz")[0] == 200
    wait_for(lambda: get(base + "/readyz")[0] == 200, "readiness")

    # Scrape every 100 ms while the producer runs: the count only ever grows.
    seen: list[float] = []
    stop = threading.Event()

    def scraper() -> None:
        while not stop.wait(0.1):
            samples = scrape(base)
            seen.append(samples.get(("slipstream_topic_records_in_total", (("topic", topic_name),)), 0.0))

    thread = threading.Thread(target=scraper)
    thread.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    per_partition = {0: 40, 1: 25, 2: 35}
    try:
        for partition, count in per_partition.items():
            for i in range(count):
                producer.produce(topic_name, value=b"v%d" % i, key=b"k", partition=partition)
                if i % 10 == 0:
                    producer.flush(10)
        assert producer.flush(10) == 0
    finally:
        stop.set()
        thread.join()
    assert seen == sorted(seen)

    produced = sum(per_partition.values())
    samples = scrape(base)
    assert value(samples, "slipstream_topic_records_in_total", topic=topic_name) == produced
    assert value(samples, "slipstream_topic_bytes_in_total", topic=topic_name) > produced * 2
    for partition, count in per_partition.items():
        labels = {"topic": topic_name, "partition": str(partition)}
        assert value(samples, "slipstream_log_end_offset", **labels) == count
        assert value(samples, "slipstream_log_segments", **labels) == 1
        assert value(samples, "slipstream_log_size_bytes", **labels) > 0
    assert value(samples, "slipstream_requests_total", api="Produce", version=_max_version(samples, "Produce")) >= 1

    group = f"g-metrics-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe([topic_name])
        received = 0
        deadline = time.monotonic() + 30
        while received < produced and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received += 1
        assert received == produced
        # A known commit: partition 0 at 10 (lag 30), partition 1 at its end, partition 2 not at all.
        consumer.commit(
            offsets=[TopicPartition(topic_name, 0, 10), TopicPartition(topic_name, 1, per_partition[1])],
            asynchronous=False,
        )
        samples = scrape(base)
        assert value(samples, "slipstream_consumer_group_lag", group=group, topic=topic_name, partition="0") == 30
        assert value(samples, "slipstream_consumer_group_lag", group=group, topic=topic_name, partition="1") == 0
        assert ("slipstream_consumer_group_lag", (("group", group), ("partition", "2"), ("topic", topic_name))) not in samples
        assert value(samples, "slipstream_consumer_group_committed_offset", group=group, topic=topic_name, partition="0") == 10
        assert value(samples, "slipstream_groups", type="classic", state="Stable") == 1
        assert value(samples, "slipstream_groups", type="classic", state="Empty") == 0
        assert value(samples, "slipstream_topic_records_out_total", topic=topic_name) >= produced
        assert value(samples, "slipstream_open_connections") >= 2

        status, body = get(f"{base}/api/groups/{group}")
        assert status == 200
        document = json.loads(body)
        assert document["state"] == "Stable"
        assert document["lag"] == 30
        assert document["members"][0]["assignment"] == {topic_name: [0, 1, 2]}
    finally:
        consumer.close()

    wait_for(lambda: value(scrape(base), "slipstream_groups", type="classic", state="Empty") == 1, "an empty group")
    samples = scrape(base)
    assert value(samples, "slipstream_groups", type="classic", state="Stable") == 0
    assert value(samples, "slipstream_consumer_group_lag", group=group, topic=topic_name, partition="0") == 30
    groups = json.loads(get(base + "/api/groups")[1])
    assert [(g["group_id"], g["state"], g["lag"]) for g in groups] == [(group, "Empty", 30)]
    topics = {t["name"]: t for t in json.loads(get(base + "/api/topics")[1])}
    assert [p["log_end_offset"] for p in topics[topic_name]["partitions"]] == [40, 25, 35]
    assert topics[topic_name]["records_in"] == produced


def _max_version(samples: dict, api: str) -> str:
    versions = [dict(labels)["version"] for name, labels in samples if name == "slipstream_requests_total" and dict(labels).get("api") == api]
    assert versions, f"no {api} requests counted"
    return max(versions, key=int)
