"""The poll consumer's read-ahead: the network thread drains the next polls' records
while the application works, and gives them back before anything else looks at positions.
Each poll still returns at most ``max_poll_records``, in order, and positions / commits
count only what poll returned.

Against a real in-process broker; confluent-kafka produces.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from client_helpers import fast_consumer_settings
from confluent_kafka import Producer as CkProducer

from slipstream.broker.broker import Broker
from slipstream.client import consumer_read_ahead
from slipstream.client.admin import Admin
from slipstream.client.cluster import Cluster
from slipstream.client.consumer import Consumer
from slipstream.client.consumer_messages import Message

pytestmark = pytest.mark.timeout(60)

FAST = fast_consumer_settings(enable_auto_commit=False)


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


def wait_read_ahead(c: Consumer) -> None:
    deadline = time.monotonic() + 5
    while not c._ready:
        assert time.monotonic() < deadline, "the read-ahead never filled"
        time.sleep(0.01)


def drain_all(c: Consumer, got: list[Message], want: int) -> None:
    deadline = time.monotonic() + 10
    while len(got) < want:
        assert time.monotonic() < deadline, f"got {len(got)} of {want}"
        got.extend(c.poll(0.2))


def test_positions_and_commits_count_only_what_poll_returned(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    setup_topic(bs, "ra", 1, 50)
    c = Consumer(bs, group_id="g-ra", max_poll_records=5, **FAST)
    try:
        c.assign([("ra", 0)])
        got = first_poll(c)
        assert [m.offset for m in got] == [0, 1, 2, 3, 4]
        wait_read_ahead(c)
        assert c.position(("ra", 0)) == 5  # not past the read-ahead
        assert c.commit_sync() == {("ra", 0): 5}
        assert c.committed([("ra", 0)]) == {("ra", 0): 5}
        got = list(got)
        drain_all(c, got, 50)
        assert [m.offset for m in got] == list(range(50))
        assert [m.value for m in got] == [f"0-{i}".encode() for i in range(50)]
    finally:
        c.close()


def test_pause_keeps_read_ahead_records_back_until_resume(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    setup_topic(bs, "rp", 2, 30)
    c = Consumer(bs, max_poll_records=4, **FAST)
    try:
        c.assign([("rp", 0), ("rp", 1)])
        got = first_poll(c)
        wait_read_ahead(c)
        ahead = {(m.topic, m.partition) for m in c._ready}
        paused = next(iter(ahead))
        c.pause([paused])
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            batch = c.poll(0.05)
            assert all((m.topic, m.partition) != paused for m in batch)
            got.extend(batch)
        c.resume([paused])
        drain_all(c, got, 60)
        for p in (0, 1):
            assert [m.offset for m in got if m.partition == p] == list(range(30))
    finally:
        c.close()


def test_seek_drops_the_read_ahead(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    setup_topic(bs, "rs", 1, 40)
    c = Consumer(bs, max_poll_records=5, **FAST)
    try:
        c.assign([("rs", 0)])
        assert [m.offset for m in first_poll(c)] == [0, 1, 2, 3, 4]
        wait_read_ahead(c)
        c.seek(("rs", 0), 20)
        assert [m.offset for m in first_poll(c)] == [20, 21, 22, 23, 24]
        c.seek(("rs", 0), 2)
        got: list[Message] = []
        drain_all(c, got, 38)
        assert [m.offset for m in got] == list(range(2, 40))
    finally:
        c.close()


# ---------------------------------------------------------------- several polls ahead


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
        assert len(c._ready) <= 5 * consumer_read_ahead.READ_AHEAD_POLLS
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
