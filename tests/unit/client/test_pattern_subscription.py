"""Pattern subscription: the matcher, and consumers picking up matching topics as they appear."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
from client_helpers import fast_consumer_settings

from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.aio_consumer import AIOConsumer
from slipstream.client.cluster import Cluster, TopicInfo
from slipstream.client.consumer import Consumer
from slipstream.client.consumer_messages import Message
from slipstream.client.producer import AIOProducer
from slipstream.client.subscription import TopicPattern

pytestmark = pytest.mark.timeout(60)

DEADLINE_S = 15.0
FAST = fast_consumer_settings(metadata_max_age_ms=200)  # re-match the pattern often


def info(name: str, *, internal: bool = False, error: int = 0) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), error, internal, {0: 1})


# ---------------------------------------------------------------------------- matcher


def test_pattern_matches_whole_names_sorted() -> None:
    p = TopicPattern(re.compile(r"orders\.[a-z]+"))
    assert p.select(["orders.eu", "orders.us", "orders.eu.dlq", "xorders.eu", "orders."]) == (
        "orders.eu",
        "orders.us",
    )
    assert TopicPattern("a.*").select(["b", "ab", "a"]) == ("a", "ab")


def test_pattern_skips_internal_and_errored_topics() -> None:
    p = TopicPattern(".*")
    topics = {
        "__consumer_offsets": info("__consumer_offsets", internal=True),
        "gone": info("gone", error=3),
        "t": info("t"),
        "__user": info("__user"),
    }
    assert p.select_from(topics) == ("__user", "t")


# ---------------------------------------------------------------------------- against a broker


async def _produce(bs: str, topic: str, values: list[bytes]) -> None:
    async with AIOProducer(bs) as producer:
        futures = [await producer.send(topic, v, partition=0) for v in values]
        await asyncio.gather(*futures)


async def _create(bs: str, *names: str) -> None:
    cluster = Cluster(bs)
    try:
        admin = Admin(cluster)
        for name in names:
            await admin.create_topic(name, 1)
    finally:
        await cluster.close()


async def _delete(bs: str, name: str) -> None:
    cluster = Cluster(bs)
    try:
        await Admin(cluster).delete_topic(name)
    finally:
        await cluster.close()


async def test_aio_consumer_pattern_picks_up_new_topics_and_drops_deleted() -> None:
    async with Broker(
        storage="memory", port=0, group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=500,
    ) as b:
        bs = b.bootstrap_servers
        await _create(bs, "metrics.cpu", "metrics.mem", "logs.app")
        await _produce(bs, "metrics.cpu", [b"cpu-0", b"cpu-1"])
        await _produce(bs, "metrics.mem", [b"mem-0"])
        await _produce(bs, "logs.app", [b"log-0"])
        assigned: list[list[tuple[str, int]]] = []

        class Listener:
            def on_partitions_assigned(self, tps: list[tuple[str, int]]) -> None:
                assigned.append(tps)

        got: list[Message] = []

        async def take(n: int) -> None:
            async with asyncio.timeout(DEADLINE_S):
                while len(got) < n:
                    got.extend(await c.getmany(0.2))

        async with AIOConsumer(bs, group_id="gp", enable_auto_commit=False, **FAST) as c:
            c.subscribe(re.compile(r"metrics\..*"), listener=Listener())
            await take(3)
            assert sorted(m.value or b"" for m in got) == [b"cpu-0", b"cpu-1", b"mem-0"]
            assert c.runtime.subscribed == ("metrics.cpu", "metrics.mem")
            await c.commit()  # the rebalance below resumes from here

            # a matching topic created later joins the subscription with a rebalance
            await _create(bs, "metrics.disk")
            await _produce(bs, "metrics.disk", [b"disk-0"])
            await take(4)
            assert got[-1].topic == "metrics.disk" and got[-1].value == b"disk-0"
            assert c.assignment() == {("metrics.cpu", 0), ("metrics.disk", 0), ("metrics.mem", 0)}

            # a deleted one leaves it
            await _delete(bs, "metrics.mem")
            async with asyncio.timeout(DEADLINE_S):
                while c.assignment() != {("metrics.cpu", 0), ("metrics.disk", 0)}:
                    await c.getmany(0.1)
            assert c.runtime.subscribed == ("metrics.cpu", "metrics.disk")
        assert all(tp[0] != "logs.app" for tps in assigned for tp in tps)
        assert len(got) == 4


def test_poll_consumer_pattern_waits_for_a_first_match_then_consumes() -> None:
    with Broker(
        storage="memory", port=0, group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=500,
    ) as b:
        bs = b.bootstrap_servers
        asyncio.run(_create(bs, "other"))
        c = Consumer(bs, group_id="gp2", enable_auto_commit=False, **FAST)
        try:
            c.subscribe(re.compile(r"events-\d+"))
            assert c.poll(0.5) == []  # nothing matches yet: no group, no error
            assert c.assignment() == set()
            with pytest.raises(RuntimeError, match="subscribed"):
                c.assign([("other", 0)])
            asyncio.run(_create(bs, "events-1"))
            asyncio.run(_produce(bs, "events-1", [b"e0", b"e1"]))
            got: list[Message] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 2 and time.monotonic() < deadline:
                got.extend(c.poll(0.1))
            assert [(m.topic, m.value) for m in got] == [("events-1", b"e0"), ("events-1", b"e1")]
            assert c.subscription() == ("events-1",)
            # back to an explicit list: the pattern stops applying
            c.subscribe(["other"])
            asyncio.run(_create(bs, "events-2"))
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                c.poll(0.1)
            assert c.subscription() == ("other",)
            assert c.assignment() == {("other", 0)}
        finally:
            c.close()
