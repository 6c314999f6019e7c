"""The poll consumer (``slipstream.client.consumer.Consumer``) against a real in-process broker.

The broker runs in its blocking form (own loop, own thread); the consumers are
used from the test thread; confluent-kafka produces. Waits poll for a condition
with a deadline.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from client_helpers import fast_consumer_settings
from confluent_kafka import Producer as CkProducer

from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.assignors import TopicPartition
from slipstream.client.cluster import Cluster
from slipstream.client.consumer import ConcurrentModificationError, Consumer
from slipstream.client.consumer_messages import Message

pytestmark = pytest.mark.timeout(60)

DEADLINE_S = 12.0
FAST = fast_consumer_settings()


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(
        storage="memory",
        port=0,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=500,
    ) as b:
        yield b


def record_leaves(broker: Broker) -> list[str]:
    """The client ids of the LeaveGroup requests the broker receives from now on."""
    seen: list[str] = []
    groups = broker.groups
    assert groups is not None
    original = groups.leave_group

    async def leave_group(ctx: Any, request: Any) -> Any:
        seen.append(ctx.client_id)
        return await original(ctx, request)

    groups.leave_group = leave_group  # type: ignore[method-assign]
    return seen


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    async def go() -> None:
        cluster = Cluster(bootstrap)
        try:
            await Admin(cluster).create_topic(name, partitions)
        finally:
            await cluster.close()

    asyncio.run(go())


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0) -> None:
    p = CkProducer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5})
    for partition, n in per_partition.items():
        for i in range(start, start + n):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(15) == 0


def poll_until(
    consumers: list[Consumer],
    cond: Callable[[], bool],
    what: str,
    sink: list[Message] | None = None,
    timeout: float = DEADLINE_S,
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        for c in consumers:
            got = c.poll(0.05)
            if sink is not None and c is consumers[0]:
                sink.extend(got)


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition], int]] = []

    def on_partitions_revoked(self, tps: list[TopicPartition]) -> None:
        self.events.append(("revoked", tps, threading.get_ident()))

    def on_partitions_assigned(self, tps: list[TopicPartition]) -> None:
        self.events.append(("assigned", tps, threading.get_ident()))

    def on_partitions_lost(self, tps: list[TopicPartition]) -> None:
        self.events.append(("lost", tps, threading.get_ident()))


def parts(topic: str, n: int) -> set[TopicPartition]:
    return {(topic, p) for p in range(n)}


# ---------------------------------------------------------------------------- tests


def test_subscribe_poll_exactly_once_commit_and_resume(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 3)
    produce(bs, "t", {0: 20, 1: 20, 2: 20})
    listener = Listener()
    c1 = Consumer(bs, group_id="g", enable_auto_commit=False, max_poll_records=7, **FAST)
    c1.subscribe(["t"], listener=listener)
    got: list[Message] = []
    poll_until([c1], lambda: len(got) >= 60, "60 messages", got)
    keys = [(m.partition, m.offset) for m in got]
    assert len(keys) == len(set(keys)) == 60
    assert {m.value for m in got} == {f"{p}-{i}".encode() for p in range(3) for i in range(20)}
    assert c1.poll(0.2) == []
    assert c1.assignment() == parts("t", 3)
    committed = c1.commit_sync()
    assert committed == {("t", p): 20 for p in range(3)}
    assert c1.committed(sorted(parts("t", 3))) == committed
    # the listener ran on this (the application) thread
    me = threading.get_ident()
    assert listener.events and all(tid == me for _, _, tid in listener.events)
    assert ("assigned", sorted(parts("t", 3)), me) in listener.events
    c1.close()
    assert [k for k, _, _ in listener.events][-1] == "revoked"

    produce(bs, "t", {0: 5, 1: 5, 2: 5}, start=20)
    c2 = Consumer(bs, group_id="g", enable_auto_commit=False, max_poll_records=4, **FAST)
    c2.subscribe(["t"])
    got2: list[Message] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got2) < 15 and time.monotonic() < deadline:
        batch = c2.poll(0.1)
        assert len(batch) <= 4
        got2.extend(batch)
    assert sorted((m.partition, m.offset) for m in got2) == [
        (p, o) for p in range(3) for o in range(20, 25)
    ]
    c2.close()


def test_commit_async_callbacks_run_in_poll_in_order(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 1)
    produce(bs, "t", {0: 10})
    c = Consumer(bs, group_id="ga", enable_auto_commit=False, **FAST)
    c.assign([("t", 0)])
    calls: list[tuple[dict[TopicPartition, int], BaseException | None, int]] = []
    for off in (3, 6, 9):
        c.commit_async(
            {("t", 0): off}, lambda o, e: calls.append((dict(o), e, threading.get_ident()))
        )
    assert calls == []  # only during poll
    poll_until([c], lambda: len(calls) == 3, "3 commit callbacks")
    assert [o for o, _, _ in calls] == [{("t", 0): 3}, {("t", 0): 6}, {("t", 0): 9}]
    assert all(e is None and tid == threading.get_ident() for _, e, tid in calls)
    assert c.committed([("t", 0)]) == {("t", 0): 9}
    # default offsets: the positions after what poll returned
    c.seek(("t", 0), 9)
    got: list[Message] = []
    poll_until([c], lambda: len(got) >= 1, "messages", got)
    assert got[0].offset == 9
    done: list[Any] = []
    c.commit_async(callback=lambda o, e: done.append((o, e)))
    c.commit_sync()  # runs the earlier async callback first / after
    poll_until([c], lambda: bool(done), "callback")
    assert done == [({("t", 0): 10}, None)]
    c.close()


def test_assign_seek_position_pause_resume(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 2)
    produce(bs, "t", {0: 10, 1: 10})
    c = Consumer(bs, **FAST)  # no group: manual assignment only
    c.assign([("t", 0), ("t", 1)])
    assert c.assignment() == parts("t", 2)
    assert c.position(("t", 0)) == 0

    def buffered(tp: TopicPartition) -> int:  # a peek at the network thread's fetch buffer
        return c._do(lambda: c._runtime.fetcher.buffered_bytes(tp))

    deadline = time.monotonic() + DEADLINE_S
    while buffered(("t", 1)) == 0:
        assert time.monotonic() < deadline, "partition 1 was never fetched"
        time.sleep(0.01)
    c.pause([("t", 1)])
    assert c.paused() == {("t", 1)}
    got: list[Message] = []
    poll_until([c], lambda: len(got) >= 10, "partition 0", got)
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        got.extend(c.poll(0.05))
    assert {m.partition for m in got} == {0} and len(got) == 10
    assert c.position(("t", 0)) == 10
    assert buffered(("t", 1)) > 0  # paused: kept, not returned
    c.seek(("t", 0), 5)
    assert c.position(("t", 0)) == 5
    c.resume([("t", 1)])
    more: list[Message] = []
    poll_until([c], lambda: len(more) >= 15, "resumed + re-read", more)
    assert sorted((m.partition, m.offset) for m in more) == [(0, o) for o in range(5, 10)] + [
        (1, o) for o in range(10)
    ]
    with pytest.raises(RuntimeError, match="group_id"):
        c.commit_sync({("t", 0): 1})
    c.close()
    c.close()  # idempotent


def test_concurrent_use_from_two_threads_raises(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 1)
    c = Consumer(bs, **FAST)
    c.assign([("t", 0)])
    started = threading.Event()
    result: list[Any] = []

    def other() -> None:
        started.set()
        result.append(c.poll(1.5))

    t = threading.Thread(target=other)
    t.start()
    started.wait()
    time.sleep(0.3)
    with pytest.raises(ConcurrentModificationError, match="multi-threaded"):
        c.poll(0)
    with pytest.raises(ConcurrentModificationError):
        c.position(("t", 0))
    t.join(5)
    assert result == [[]]
    c.poll(0)  # fine once the other thread is out
    c.close()


def test_max_poll_interval_exceeded_leaves_and_next_poll_rejoins(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 4)
    settings = dict(FAST, max_poll_interval_ms=1500, enable_auto_commit=False)
    l1 = Listener()
    c1 = Consumer(bs, group_id="gp", client_id="c1", **settings)
    c2 = Consumer(bs, group_id="gp", client_id="c2", **settings)
    c1.subscribe(["t"], listener=l1)
    c2.subscribe(["t"])
    poll_until(
        [c1, c2],
        lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2,
        "c1 and c2 to split 4 partitions",
    )
    leaves = record_leaves(broker)
    # c1 stops polling; c2 keeps going and takes everything once c1 left
    poll_until([c2], lambda: c2.assignment() == parts("t", 4), "c2 to take over", timeout=8)
    # c1 left by itself (LeaveGroup), not by its session running out on the broker.
    assert leaves == ["c1"]
    assert c1.assignment() == set()
    # the next poll reports the partitions lost (on this thread) and rejoins
    poll_until(
        [c1, c2],
        lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2,
        "c1 to rejoin",
    )
    kinds = [k for k, _, _ in l1.events]
    assert "lost" in kinds
    assert all(tid == threading.get_ident() for _, _, tid in l1.events)
    c1.close()
    c2.close()


def test_close_leaves_promptly_and_commits(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 4)
    produce(bs, "t", {p: 5 for p in range(4)})
    settings = dict(FAST, auto_commit_interval_ms=100000)
    c1 = Consumer(bs, group_id="gc", **settings)
    c2 = Consumer(bs, group_id="gc", **settings)
    c1.subscribe(["t"])
    c2.subscribe(["t"])
    n = [0]

    def split() -> bool:
        return len(c1.assignment()) == 2 and len(c2.assignment()) == 2

    deadline = time.monotonic() + DEADLINE_S
    while not split() or n[0] < 20:
        assert time.monotonic() < deadline, "group never settled"
        n[0] += len(c1.poll(0.05)) + len(c2.poll(0.05))
    assert n[0] == 20
    leaves = record_leaves(broker)
    c1.close()  # auto-commit on close, then LeaveGroup
    assert len(leaves) == 1  # close sent LeaveGroup before it returned
    poll_until(
        [c2], lambda: c2.assignment() == parts("t", 4), "c2 to take over after close", timeout=5
    )
    # c1 committed its positions on close (and c2's revoke-before-rejoin committed its own)
    assert c2.committed(sorted(parts("t", 4))) == {("t", p): 5 for p in range(4)}
    assert c2.poll(0.3) == []
    c2.close()


# ---------------------------------------------------------------------------- asyncio-native


async def test_aio_consumer_async_for_commit_and_listener() -> None:
    from slipstream.client.aio_consumer import AIOConsumer

    async with Broker(
        storage="memory",
        port=0,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=500,
    ) as b:
        bs = b.bootstrap_servers
        cluster = Cluster(bs)
        try:
            await Admin(cluster).create_topic("t", 2)
        finally:
            await cluster.close()
        await asyncio.to_thread(produce, bs, "t", {0: 10, 1: 10})
        events: list[tuple[str, list[TopicPartition]]] = []

        class AsyncListener:
            async def on_partitions_assigned(self, tps: list[TopicPartition]) -> None:
                events.append(("assigned", tps))

            def on_partitions_revoked(self, tps: list[TopicPartition]) -> None:
                events.append(("revoked", tps))

        seen: list[Message] = []
        async with AIOConsumer(
            bs, group_id="gaio", enable_auto_commit=False, max_poll_records=3, **FAST
        ) as c:
            c.subscribe(["t"], listener=AsyncListener())
            async with asyncio.timeout(DEADLINE_S):
                async for msg in c:
                    seen.append(msg)
                    if len(seen) == 13:
                        break
            # only what was handed out is committed, not the rest of the batch
            committed = await c.commit()
            assert sum(committed.values()) == 13
            assert await c.committed([("t", 0), ("t", 1)]) == committed
            rest: list[Message] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(rest) < 7:
                    rest.append(await c.getone())
            assert {(m.partition, m.offset) for m in seen + rest} == {
                (p, o) for p in range(2) for o in range(10)
            }
            assert await c.getmany(0.2) == []
        assert events[0] == ("assigned", [("t", 0), ("t", 1)])
        assert events[-1] == ("revoked", [("t", 0), ("t", 1)])


def test_auto_commit_on_interval_and_latest_reset(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 1)
    produce(bs, "t", {0: 10})
    c = Consumer(bs, group_id="gauto", **dict(FAST, auto_commit_interval_ms=200))
    c.subscribe(["t"])
    got: list[Message] = []
    poll_until([c], lambda: len(got) >= 10, "10 messages", got)
    # auto-commit happens in a later poll (what earlier polls returned)
    poll_until([c], lambda: c.committed([("t", 0)]) == {("t", 0): 10}, "the auto-commit", timeout=5)
    c.close()
    # a group with nothing committed starts at the end with auto_offset_reset="latest"
    late = Consumer(bs, group_id="other", **dict(FAST, auto_offset_reset="latest"))
    late.assign([("t", 0)])
    assert late.position(("t", 0)) == 10
    late.close()


def test_listener_error_surfaces_from_poll(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 1)

    class Boom:
        def on_partitions_assigned(self, tps: list[TopicPartition]) -> None:
            raise ValueError("boom in listener")

    c = Consumer(bs, group_id="gerr", **FAST)
    c.subscribe(["t"], listener=Boom())
    with pytest.raises(ValueError, match="boom in listener"):
        poll_until([c], lambda: False, "the listener error", timeout=8)
    assert c.assignment() == {("t", 0)}  # the assignment itself went through
    c.close()


def test_static_member_restart_keeps_assignment(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    create_topic(bs, "t", 2)
    settings = dict(FAST, session_timeout_ms=4000)
    a = Consumer(bs, group_id="gs", group_instance_id="a", **settings)
    other = Consumer(bs, group_id="gs", group_instance_id="b", **settings)
    a.subscribe(["t"])
    other.subscribe(["t"])
    poll_until(
        [a, other],
        lambda: len(a.assignment()) == 1 and len(other.assignment()) == 1,
        "a and b to split",
    )
    mine = a.assignment()
    a.close()  # static: no LeaveGroup, the place is kept for session_timeout_ms
    a2 = Consumer(bs, group_id="gs", group_instance_id="a", **settings)
    a2.subscribe(["t"])
    poll_until([a2, other], lambda: a2.assignment() == mine, "a's restart to get its partition")
    assert len(other.assignment()) == 1
    a2.close()
    other.close()
