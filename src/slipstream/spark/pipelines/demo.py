"""Demo input for the pageview-stats pipeline: JSON page-view events.

Each record: key = the user id, value = ``{"page": "/products/3", "user": "user-17",
"ts": 1735689600000}`` (``ts``: event time, epoch milliseconds). With a seed and a
fixed start the stream is reproducible (the tests compute expected counts from it).
Without a start, a bounded batch (a count, no rate) spans event time up to now, so
a windowed run over it closes windows and shows counts; a live stream (a rate, or
no count) carries the wall-clock time each event is produced at.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from ...client.admin import Admin
from ...client.cluster import Cluster
from ...client.producer import Producer
from ...protocol.errors import ErrorCode, KafkaError

PAGES = [
    "/",
    "/products",
    "/products/1",
    "/products/2",
    "/products/3",
    "/cart",
    "/checkout",
    "/about",
]
WEIGHTS = [30, 20, 12, 10, 8, 10, 6, 4]


def demo_events(count: int | None, *, seed: int = 0, start_ms: int | None = None, step_ms: int = 100) -> Iterator[dict]:
    """``count`` events (forever when None); event times ``start_ms + i * step_ms``, or now."""
    rng = random.Random(seed)
    i = 0
    while count is None or i < count:
        page = rng.choices(PAGES, WEIGHTS)[0]
        user = f"user-{rng.randrange(1000)}"
        ts = start_ms + i * step_ms if start_ms is not None else int(time.time() * 1000)
        yield {"page": page, "user": user, "ts": ts}
        i += 1


async def ensure_topic(bootstrap: str, topic: str, partitions: int) -> int:
    """Create ``topic`` with ``partitions`` unless it exists; returns its partition count."""
    cluster = Cluster(bootstrap, client_id="slipstream-demo")
    try:
        admin = Admin(cluster)
        topics = await cluster.refresh_metadata([topic])
        info = topics.get(topic)
        if info is not None and not info.error_code:
            return info.partition_count
        try:
            await admin.create_topic(topic, partitions)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        return (await admin.describe_topic(topic)).partition_count
    finally:
        await cluster.close()


def produce_demo_data(
    bootstrap: str,
    topic: str = "pageviews",
    *,
    count: int | None = 10_000,
    rate: float = 0.0,
    seed: int = 0,
    start_ms: int | None = None,
    step_ms: int = 100,
    partitions: int = 3,
    out: TextIO | None = None,
) -> int:
    """Produce demo page views (``rate`` records/s; 0 = as fast as possible); returns the count."""
    sink = out or sys.stderr
    if start_ms is None and count is not None and rate <= 0:
        # Spread the batch over the event time before now: a one-minute window with a
        # one-minute watermark closes only after later events, so events all stamped "now"
        # would leave every window of a first run open and its output empty.
        start_ms = int(time.time() * 1000) - count * step_ms
    parts = asyncio.run(ensure_topic(bootstrap, topic, partitions))
    sent = 0
    started = time.monotonic()
    last_report = started
    errors: list[BaseException] = []

    def delivered(error: BaseException | None, _metadata: object) -> None:
        if error is not None:
            errors.append(error)

    with Producer(bootstrap, client_id="slipstream-demo", linger_ms=20) as producer:
        for event in demo_events(count, seed=seed, start_ms=start_ms, step_ms=step_ms):
            value = json.dumps(event, separators=(",", ":")).encode()
            producer.produce(topic, value, key=event["user"].encode(), on_delivery=delivered)
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
                if errors:
                    raise errors[0]
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    producer.poll(0)
                    time.sleep(ahead)
            now = time.monotonic()
            if now - last_report >= 5:
                print(f"produced {sent} page views to {topic} ({parts} partitions)", file=sink, flush=True)
                last_report = now
        producer.flush()
    if errors:
        raise errors[0]
    print(f"produced {sent} page views to {topic} ({parts} partitions)", file=sink, flush=True)
    return sent
