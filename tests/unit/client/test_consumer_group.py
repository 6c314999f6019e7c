"""The sarama-style ConsumerGroup handler API against a real in-process broker.

Each test starts its own broker (memory storage, no initial rebalance delay,
short session timeouts). Data is produced with confluent-kafka in a worker
thread. Waits poll for a condition with a deadline.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from client_helpers import (
    DEADLINE_S,
    committed_offsets,
    create_topic,
    fast_consumer_settings,
    group_broker,
    wait_until,
)
from confluent_kafka import Producer as CkProducer

from slipstream.client.assignors import TopicPartition
from slipstream.client.consumer_group import (
    ConsumerGroup,
    ConsumerGroupClosedError,
    ConsumerGroupHandler,
)
from slipstream.client.consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from slipstream.client.consumer_messages import ConsumerMessage
from slipstream.client.group_errors import FencedInstanceError

pytestmark = pytest.mark.timeout(60)

FAST = fast_consumer_settings(session_timeout_ms=3000, max_poll_interval_ms=10000, auto_commit_interval_ms=200)


def _produce(
    bootstrap: str,
    topic: str,
    per_partition: dict[int, int],
    start: int,
    size: int,
    batch_size: int,
) -> None:
    p = CkProducer(
        {"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5, "batch.size": batch_size}
    )
    for partition, n in per_partition.items():
        for i in range(start, start + n):
            p.produce(
                topic,
                key=f"k{i}".encode(),
                value=f"{partition}:{i}:".encode().ljust(size, b"x"),
                partition=partition,
                headers=[("h", b"v")],
            )
    assert p.flush(15) == 0


async def produce(
    bootstrap: str,
    topic: str,
    per_partition: dict[int, int],
    *,
    start: int = 0,
    size: int = 10,
    batch_size: int = 1_000_000,
) -> None:
    await asyncio.to_thread(_produce, bootstrap, topic, per_partition, start, size, batch_size)


class Recorder(ConsumerGroupHandler):
    """Records every delivery and session; marks each message; checks single ownership.

    A partition is owned while its ``consume_claim`` runs: under a cooperative
    protocol a claim can end (revoked) while the session goes on.
    """

    def __init__(self, name: str, owners: dict[TopicPartition, str] | None = None) -> None:
        self.name = name
        self.owners = owners if owners is not None else {}
        self.violations: list[str] = []
        self.delivered: list[tuple[int, int]] = []
        self.setups = 0
        self.cleanups = 0
        self.sessions: list[tuple[int, dict[str, list[int]]]] = []
        self.claims: list[ConsumerGroupClaim] = []

    async def setup(self, session: ConsumerGroupSession) -> None:
        self.setups += 1
        assert session.member_id
        self.sessions.append((session.generation_id, session.claims))

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        self.cleanups += 1

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        self.claims.append(claim)
        other = self.owners.get(claim.tp)
        if other is not None:
            self.violations.append(f"{claim} claimed by {self.name} while {other} owns it")
        self.owners[claim.tp] = self.name
        try:
            async for msg in claim.messages():
                self.check(msg)
                self.delivered.append((msg.partition, msg.offset))
                session.mark_message(msg)
        finally:
            if self.owners.get(claim.tp) == self.name:
                del self.owners[claim.tp]

    @staticmethod
    def check(msg: ConsumerMessage) -> None:
        assert msg.value is not None
        part, index, _ = msg.value.split(b":", 2)
        assert int(part) == msg.partition
        assert msg.key == f"k{int(index)}".encode()
        assert msg.headers == [("h", b"v")]
        assert msg.timestamp > 0


async def run_loop(group: ConsumerGroup, topics: list[str], handler: Any) -> int:
    """The documented pattern: call consume until the group is closed; returns the session count."""
    sessions = 0
    while not group.closed:
        await group.consume(topics, handler)
        sessions += 1
    return sessions


# ---------------------------------------------------------------------------- tests


async def test_one_member_consumes_every_partition_marks_and_commits() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 3)
        await produce(bs, "t", {0: 30, 1: 20, 2: 10})
        group = ConsumerGroup(bs, "g1", enable_auto_commit=False, **FAST)
        done = asyncio.Event()

        class Committing(Recorder):
            async def consume_claim(
                self, session: ConsumerGroupSession, claim: ConsumerGroupClaim
            ) -> None:
                assert claim.initial_offset == 0
                self.claims.append(claim)
                async for msg in claim.messages():
                    self.delivered.append((msg.partition, msg.offset))
                    if msg.offset < 5:  # marks only the first 5 of each partition
                        session.mark_message(msg)
                    if len(self.delivered) == 60:
                        await session.commit()
                        done.set()

        handler = Committing("a")
        task = asyncio.create_task(run_loop(group, ["t"], handler))
        async with asyncio.timeout(DEADLINE_S):
            await done.wait()
        assert sorted(handler.delivered) == sorted(
            [(0, i) for i in range(30)] + [(1, i) for i in range(20)] + [(2, i) for i in range(10)]
        )
        for p, n in ((0, 30), (1, 20), (2, 10)):
            got = [o for q, o in handler.delivered if q == p]
            assert got == list(range(n)), "in offset order"
        session = group.session
        assert session is not None
        assert session.claims == {"t": [0, 1, 2]}
        assert session.generation_id >= 1 and session.member_id == group.member_id
        claim = next(c for c in handler.claims if c.partition == 0)
        assert claim.topic == "t" and claim.high_watermark_offset == 30
        assert await committed_offsets(bs, "g1", [("t", 0), ("t", 1), ("t", 2)]) == {
            ("t", 0): 5,
            ("t", 1): 5,
            ("t", 2): 5,
        }
        # mark_offset (the next offset to consume) + commit; lower marks are ignored
        session.mark_offset("t", 1, 20, "meta")
        session.mark_offset("t", 1, 7)
        await session.commit()
        assert (await committed_offsets(bs, "g1", [("t", 1)]))[("t", 1)] == 20
        await group.close()
        assert await asyncio.wait_for(task, DEADLINE_S) == 1
        assert handler.setups == handler.cleanups == 1
        with pytest.raises(ConsumerGroupClosedError):
            await group.consume(["t"], handler)


async def test_auto_commit_and_resume_from_committed_offsets() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 10, 1: 10})
        first = Recorder("a")
        async with ConsumerGroup(bs, "g", **FAST) as group:
            task = asyncio.create_task(run_loop(group, ["t"], first))
            await wait_until(lambda: len(first.delivered) == 20, "the first 20 messages")
            # the interval auto-commit lands while the session still runs
            await wait_until(
                lambda: group.session is not None and not group.session.pending_commits(), "auto-commit"
            )
        await asyncio.wait_for(task, DEADLINE_S)
        assert await committed_offsets(bs, "g", [("t", 0), ("t", 1)]) == {("t", 0): 10, ("t", 1): 10}
        await produce(bs, "t", {0: 5, 1: 5}, start=10)
        second = Recorder("b")
        async with ConsumerGroup(bs, "g", **FAST) as group:
            task = asyncio.create_task(run_loop(group, ["t"], second))
            await wait_until(lambda: len(second.delivered) == 10, "the 10 new messages")
            assert sorted(c.initial_offset for c in second.claims) == [10, 10]
        await asyncio.wait_for(task, DEADLINE_S)
        assert sorted(second.delivered) == sorted((p, i) for p in (0, 1) for i in range(10, 15))


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
async def test_two_members_split_then_survivor_takes_over_without_loss_or_redelivery(
    assignor: str,
) -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        await produce(bs, "t", {p: 20 for p in range(4)})
        owners: dict[TopicPartition, str] = {}
        ha, hb = Recorder("a", owners), Recorder("b", owners)
        settings = dict(FAST, partition_assignment_strategy=[assignor])
        a = ConsumerGroup(bs, "g2", **settings)
        bgroup = ConsumerGroup(bs, "g2", **settings)
        ta = asyncio.create_task(run_loop(a, ["t"], ha))

        def total() -> int:
            return len(ha.delivered) + len(hb.delivered)

        try:
            await wait_until(lambda: total() == 80, "member a consumed the first 80")
            tb = asyncio.create_task(run_loop(bgroup, ["t"], hb))

            def split() -> bool:
                sa, sb = a.session, bgroup.session
                return (
                    sa is not None
                    and sb is not None
                    and sa.generation_id == sb.generation_id
                    and len(sa.generation.assignment) == 2
                    and len(sb.generation.assignment) == 2
                )

            await wait_until(split, "the two members to split the partitions")
            sa, sb = a.session, bgroup.session
            assert sa is not None and sb is not None
            assert not set(sa.generation.assignment) & set(sb.generation.assignment)
            await produce(bs, "t", {p: 20 for p in range(4)}, start=20)
            await wait_until(lambda: total() == 160, "both members consumed the next 80")
            assert {p for p, o in hb.delivered} == {p for _, p in sb.generation.assignment}

            # Eager: one session per generation. Cooperative: one session throughout.
            await a.close()
            sessions_a = await asyncio.wait_for(ta, DEADLINE_S)
            assert sessions_a >= 2 if assignor == "range" else sessions_a == 1
            await wait_until(
                lambda: (s := bgroup.session) is not None and len(s.generation.assignment) == 4,
                "member b to own every partition",
            )
            await produce(bs, "t", {p: 20 for p in range(4)}, start=40)
            await wait_until(lambda: total() == 240, "member b consumed the rest")
            await bgroup.close()
            sessions_b = await asyncio.wait_for(tb, DEADLINE_S)
            assert sessions_b >= 2 if assignor == "range" else sessions_b == 1
        finally:
            await a.close()
            await bgroup.close()

        everything = Counter(ha.delivered + hb.delivered)
        assert set(everything) == {(p, o) for p in range(4) for o in range(60)}, "nothing lost"
        assert [k for k, n in everything.items() if n > 1] == [], "nothing committed re-delivered"
        assert ha.violations == hb.violations == []
        for h in (ha, hb):
            assert h.setups == h.cleanups == len(h.sessions)
        assert await committed_offsets(bs, "g2", [("t", p) for p in range(4)]) == {
            ("t", p): 60 for p in range(4)
        }


async def test_slow_handler_does_not_stall_other_partition() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        # small batches, so the partition buffer limit is reached batch by batch
        await produce(bs, "t", {0: 300, 1: 300}, size=200, batch_size=1000)
        release = asyncio.Event()
        got: dict[int, list[int]] = {0: [], 1: []}

        class Slow(ConsumerGroupHandler):
            async def consume_claim(
                self, session: ConsumerGroupSession, claim: ConsumerGroupClaim
            ) -> None:
                async for msg in claim.messages():
                    got[msg.partition].append(msg.offset)
                    session.mark_message(msg)
                    if msg.partition == 0:
                        await release.wait()

        settings = dict(
            FAST,
            partition_buffer_bytes=2048,
            max_partition_fetch_bytes=2048,
            max_processing_time_ms=50,
            max_poll_records=10,
        )
        group = ConsumerGroup(bs, "g3", **settings)
        task = asyncio.create_task(run_loop(group, ["t"], Slow()))
        try:
            await wait_until(lambda: len(got[1]) == 300, "the fast partition to be consumed")
            assert got[0] == [0]
            fetcher = group._fetcher
            # bounded read-ahead for the blocked partition: buffer limit + one fetch (+ one batch)
            assert fetcher.buffered_bytes(("t", 0)) <= 2048 + 2048
            fetches = fetcher.partition_fetches(("t", 0))
            await asyncio.sleep(0.5)
            assert fetcher.partition_fetches(("t", 0)) == fetches, (
                "the slow partition is not fetched"
            )
            assert fetcher.position(("t", 0)) is not None
            assert fetcher.position(("t", 0)) <= 10, "at most one chunk taken by the blocked claim"
            release.set()
            await wait_until(lambda: len(got[0]) == 300, "the slow partition to catch up")
            assert got[0] == list(range(300)) and got[1] == list(range(300))
        finally:
            await group.close()
        assert await asyncio.wait_for(task, DEADLINE_S) == 1


async def test_handler_error_ends_session_and_is_raised() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 3, 1: 3})
        calls: list[str] = []
        ended_claims: list[int] = []

        class Boom(ConsumerGroupHandler):
            async def setup(self, session: ConsumerGroupSession) -> None:
                calls.append("setup")

            async def cleanup(self, session: ConsumerGroupSession) -> None:
                calls.append("cleanup")

            async def consume_claim(
                self, session: ConsumerGroupSession, claim: ConsumerGroupClaim
            ) -> None:
                async for msg in claim.messages():
                    if claim.partition == 0 and msg.offset == 1:
                        raise ValueError("handler failed")
                    session.mark_message(msg)
                ended_claims.append(claim.partition)  # the other claim's iterator ended

        async with ConsumerGroup(bs, "g4", **FAST) as group:
            with pytest.raises(ValueError, match="handler failed"):
                await asyncio.wait_for(group.consume(["t"], Boom()), DEADLINE_S)
            assert calls == ["setup", "cleanup"]
            assert ended_claims == [1]
        # the marks made before the failure were committed at session end
        got = await committed_offsets(bs, "g4", [("t", 0), ("t", 1)])
        assert got[("t", 0)] == 1


async def test_close_from_inside_a_handler_ends_the_session_commits_and_leaves() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 1)
        await produce(bs, "t", {0: 10})
        calls: list[str] = []

        class Closer(ConsumerGroupHandler):
            async def cleanup(self, session: ConsumerGroupSession) -> None:
                calls.append("cleanup")

            async def consume_claim(
                self, session: ConsumerGroupSession, claim: ConsumerGroupClaim
            ) -> None:
                async for msg in claim.messages():
                    session.mark_message(msg)
                    if msg.offset == 4:
                        await group.close()  # returns at once; consume finishes the shutdown
                calls.append("claim returned")

        group = ConsumerGroup(bs, "g5", **FAST)
        assert await asyncio.wait_for(run_loop(group, ["t"], Closer()), DEADLINE_S) == 1
        assert calls == ["claim returned", "cleanup"]
        assert group.closed
        assert (await committed_offsets(bs, "g5", [("t", 0)]))[("t", 0)] == 5


async def test_fatal_membership_error_is_raised_from_consume() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 2, 1: 2})
        first = ConsumerGroup(bs, "g6", group_instance_id="same", **FAST)
        second = ConsumerGroup(bs, "g6", group_instance_id="same", **FAST)
        ha, hb = Recorder("a"), Recorder("b")
        try:
            ta = asyncio.create_task(run_loop(first, ["t"], ha))
            await wait_until(lambda: len(ha.delivered) == 4, "the first member to consume")
            tb = asyncio.create_task(run_loop(second, ["t"], hb))
            with pytest.raises(FencedInstanceError, match="same"):
                await asyncio.wait_for(ta, DEADLINE_S)
            assert ha.setups == ha.cleanups == 1
        finally:
            await first.close()
            await second.close()
        await asyncio.wait_for(tb, DEADLINE_S)
