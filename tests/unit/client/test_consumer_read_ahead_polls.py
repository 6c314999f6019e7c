"""The poll consumer reads several polls ahead: each poll still returns at most
``max_poll_records``, in order, and positions / commits count only what poll returned.

Against a real in-process broker; confluent-kafka produces.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer as CkProducer

from slipstream.broker.broker import Broker
from slipstream.client import consumer as consumer_module
from slipstream.client.admin import Admin
from slipstream.client.cluster import Cluster
from slipstream.client.consumer import Consumer, Message

pytestmark = pytest.mark.timeout(60)

FAST: dict[str, Any] = dict(
    retry_backoff_ms=20,
    retry_backoff_max_ms=200,
    auto_offset_reset="earliest",
    fetch_max_wait_ms=100,
    enable_auto_commit=False,
)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b


def setup_topic(bootstrap: str, name: str, partitions: int, per_partition: int) -> None:
    async def create() -> None:
        cluster = Cluster(bootstrap)
        try:
            await Admin(cluster).create_topic(name, partitions)
        finally:
            await cluster.close()

    asyncio.run(create())
    p = CkProducer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5})
    for partition in range(partitions):
        for i in range(per_partition):
            p.produce(name, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(15) == 0


def first_poll(c: Consumer) -> list[Message]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = c.poll(0.2)
        if got:
            return got
    raise AssertionError("no records arrived")


def wait_ahead(c: Consumer, at_least: int) -> None:
    deadline = time.monotonic() + 5
    while len(c._ready) < at_least:
        assert time.monotonic() < deadline, f"the read-ahead holds {len(c._ready)}"
        time.sleep(0.01)


def test_several_polls_ahead_each_poll_bounded_positions_exact(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    setup_topic(bs, "rm", 1, 60)
    c = Consumer(bs, group_id="g-rm", max_poll_records=5, **FAST)
    try:
        c.assign([("rm", 0)])
        got: list[Message] = list(first_poll(c))
        assert [m.offset for m in got] == [0, 1, 2, 3, 4]
        # More than one poll's worth is read ahead, never more than the cap.
        wait_ahead(c, 10)
        assert len(c._ready) <= 5 * consumer_module._READ_AHEAD_POLLS
        assert c.position(("rm", 0)) == 5
        batch = c.poll(1.0)
        assert [m.offset for m in batch] == [5, 6, 7, 8, 9]
        assert c.commit_sync() == {("rm", 0): 10}
        got.extend(batch)
        deadline = time.monotonic() + 10
        while len(got) < 60:
            assert time.monotonic() < deadline
            batch = c.poll(0.2)
            assert len(batch) <= 5
            got.extend(batch)
        assert [m.offset for m in got] == list(range(60))
        assert c.position(("rm", 0)) == 60
    finally:
        c.close()


def test_pause_with_several_polls_ahead_keeps_the_records(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    setup_topic(bs, "rq", 1, 40)
    c = Consumer(bs, max_poll_records=4, **FAST)
    try:
        c.assign([("rq", 0)])
        got = list(first_poll(c))
        wait_ahead(c, 8)
        c.pause([("rq", 0)])
        assert c.poll(0.2) == []
        assert c.position(("rq", 0)) == 4
        c.resume([("rq", 0)])
        deadline = time.monotonic() + 10
        while len(got) < 40:
            assert time.monotonic() < deadline
            got.extend(c.poll(0.2))
        assert [m.offset for m in got] == list(range(40))
    finally:
        c.close()
