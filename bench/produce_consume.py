"""The confluent-kafka (librdkafka) produce and consume phases the broker benchmarks time:
one producer writing N records round-robin with acks=all, one consumer assigned every
partition from the beginning reading them back and checking their offsets.

Used by broker_throughput.py, cluster.py and postgres_storage.py.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from harness import MB, BenchError, quiet_logger

# Every phase first writes one record here, outside the timed window.
WARMUP_TOPIC = "bench-warmup"


@dataclass
class Rate:
    """One timed phase: records, bytes of their values, seconds."""

    messages: int
    value_bytes: int
    seconds: float
    # Consume phases asked for it: Fetch requests the client sent, bytes it received per Fetch.
    fetches: int | None = None
    bytes_per_fetch: float | None = None

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / MB / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        return f"{self.msgs_per_s:,.0f} msg/s, {self.mb_per_s:.1f} MB/s ({self.seconds:.2f} s)"


def producer_config(bootstrap: str, idempotent: bool, errors: list[str]) -> dict[str, Any]:
    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            errors.append(f"fatal: {err}")

    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "compression.type": "none",
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        "error_cb": on_error,
        "message.timeout.ms": 120_000,
        "log.connection.close": False,
    }


def probe_idempotence(bootstrap: str, timeout: float) -> str | None:
    """Produce one idempotent message; None if accepted, else the reason it was not."""
    errors: list[str] = []
    producer = Producer(producer_config(bootstrap, True, errors))
    producer.produce(WARMUP_TOPIC, b"idempotence probe", partition=0)
    left = producer.flush(timeout)
    if errors:
        return errors[0]
    if left:
        return f"not acknowledged within {timeout:.0f}s"
    return None


def produce_phase(
    bootstrap: str,
    topic: str,
    partitions: int,
    value_size: int,
    count: int,
    idempotent: bool,
    timeout: float,
    distinct_values: int = 1,
) -> Rate:
    """``distinct_values``: records cycle through that many random values (1: every
    record the same, whose batches compress ~100x; a few thousand: batches that hardly
    compress, like real data). Drawn before the clock starts, so the loop costs the same."""
    errors: list[str] = []
    producer = Producer(producer_config(bootstrap, idempotent, errors))
    values = [os.urandom(value_size) for _ in range(distinct_values)]
    # Warm up: connection, metadata and the producer id, outside the timed window.
    producer.produce(WARMUP_TOPIC, b"warm-up", partition=0)
    if producer.flush(min(timeout, 30.0)) or errors:
        raise BenchError(f"warm-up message failed: {errors[0] if errors else 'timeout'}")
    produce = producer.produce
    poll = producer.poll
    start = time.perf_counter()
    deadline = start + timeout
    for i in range(count):
        partition = i % partitions
        value = values[i % distinct_values]
        while True:
            try:
                produce(topic, value, partition=partition)
                break
            except BufferError:
                poll(0.005)
                if time.perf_counter() > deadline:
                    raise BenchError(
                        f"timed out after {timeout:.0f}s with {i} of {count} messages queued"
                    ) from None
        if not i & 1023:
            poll(0)
    left = producer.flush(max(0.1, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - start
    if errors:
        raise BenchError(f"{len(errors)} delivery errors, first: {errors[0]}")
    if left:
        raise BenchError(f"{left} messages unacknowledged after {timeout:.0f}s")
    return Rate(count, count * value_size, elapsed)


def consumer_config(bootstrap: str, group_id: str, overrides: dict[str, Any]) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        # librdkafka insists on a group id; nothing is committed and no group is joined.
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "error_cb": quiet_logger,
        "log.connection.close": False,
        # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever
        # queued.min.messages are buffered: a client artefact that would swamp the broker.
        "fetch.queue.backoff.ms": 10,
        **overrides,
    }


def warm_up_consumer(config: dict[str, Any], timeout: float) -> None:
    """Read one record of the warm-up topic (every produce phase wrote some) with a consumer
    of its own, so the first ListOffsets and Fetch a broker serves, and whatever it sets up
    for them, fall outside the timed window, as the producer's warm-up does for Produce.
    Not the timed consumer: its next Fetch would wait behind one parked on this topic."""
    consumer = Consumer({**config, "group.id": f"{config['group.id']}-warm-up"})
    try:
        consumer.assign([TopicPartition(WARMUP_TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                return
        raise BenchError(f"no warm-up record read within {timeout:.0f}s")
    finally:
        consumer.close()


# With fetch_stats, librdkafka's statistics every 100 ms: the callback only keeps the
# latest JSON text, so the timed loop pays next to nothing for it.
FETCH_STATS_INTERVAL_MS = 100


def fetch_counts(stats_json: str) -> tuple[int, float | None]:
    """Fetch requests sent and bytes received per Fetch, from one librdkafka statistics
    document: over the broker connections that sent Fetches (their few other responses,
    ListOffsets and ApiVersions, are a few hundred bytes against the Fetch responses)."""
    fetches = 0
    received = 0
    for broker in json.loads(stats_json)["brokers"].values():
        sent = broker.get("req", {}).get("Fetch", 0)
        if sent:
            fetches += sent
            received += broker.get("rxbytes", 0)
    return fetches, (received / fetches if fetches else None)


def consume_phase(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    overrides: dict[str, Any],
    timeout: float,
    fetch_stats: bool = False,
) -> Rate:
    """Read ``count`` records of ``topic`` from the beginning; with ``fetch_stats`` the
    Rate also says how many bytes each Fetch brought (librdkafka's statistics, read in
    a window that closes after the timed part)."""
    config = consumer_config(bootstrap, f"bench-{topic}-{os.getpid()}", overrides)
    warm_up_consumer(config, min(timeout, 30.0))
    latest_stats: list[str] = []
    if fetch_stats:

        def keep_latest(text: str) -> None:
            latest_stats[:] = [text]

        config["statistics.interval.ms"] = FETCH_STATS_INTERVAL_MS
        config["stats_cb"] = keep_latest
    consumer = Consumer(config)
    try:
        consumer.list_topics(topic, timeout=min(timeout, 10.0))  # connect outside the window
        start = time.perf_counter()
        deadline = start + timeout
        consumer.assign(
            [TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
        received = 0
        value_bytes = 0
        offset_sum = 0
        while received < count:
            if time.perf_counter() > deadline:
                raise BenchError(f"received {received} of {count} within {timeout:.0f}s")
            for msg in consumer.consume(min(10_000, count - received), 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise BenchError(f"consume error: {err}")
                received += 1
                offset_sum += msg.offset() or 0
                value = msg.value()
                value_bytes += len(value) if value is not None else 0
        elapsed = time.perf_counter() - start
        if fetch_stats:
            # One more statistics window, closed after the last record (outside the timing).
            latest_stats.clear()
            settle = time.perf_counter() + 10 * FETCH_STATS_INTERVAL_MS / 1000
            while not latest_stats and time.perf_counter() < settle:
                consumer.poll(FETCH_STATS_INTERVAL_MS / 1000 / 2)
    finally:
        consumer.close()
    # Round-robin production into a fresh topic: partition p holds offsets 0..n_p-1 exactly
    # once, so any duplicate, gap or misnumbered record shows up in the sum of offsets.
    expected = 0
    for p in range(partitions):
        n_p = count // partitions + (1 if p < count % partitions else 0)
        expected += n_p * (n_p - 1) // 2
    if offset_sum != expected:
        raise BenchError(
            f"received {received} records whose offsets sum to {offset_sum}, not {expected}:"
            " duplicates, gaps or wrong offsets"
        )
    fetches, per_fetch = fetch_counts(latest_stats[0]) if latest_stats else (None, None)
    return Rate(received, value_bytes, elapsed, fetches, per_fetch)
