"""ConsumerGroup sessions under the cooperative protocol (KIP-429): incremental claims.

A rebalance that revokes some partitions stops just those claims (their
``messages()`` iterator ends, their marked offsets are committed before the
revocation completes) while the other claims go on in the same session; newly
assigned partitions get claims in that session too. Eager protocols and lost
partitions still end the whole session.

The first tests drive the rebalance hooks of one member directly (what the
membership awaits around a rebalance), so each step is deterministic; the last
one has a second member join a real cooperative group.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
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

from slipstream.broker.broker import Broker
from slipstream.client.assignors import TopicPartition
from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler
from slipstream.client.consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from slipstream.client.membership_types import MemberState
from slipstream.client.rebalance_listener import RebalanceListener
from slipstream.protocol.errors import ErrorCode, KafkaError

pytestmark = pytest.mark.timeout(60)

# Only the commit at revocation (or session end) hands offsets over in these tests.
SETTINGS = fast_consumer_settings(max_poll_interval_ms=10000, auto_commit_interval_ms=600_000)
COOPERATIVE = dict(SETTINGS, partition_assignment_strategy=["cooperative-sticky"])


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int], start: int) -> None:
    p = CkProducer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5})
    for partition, n in per_partition.items():
        for i in range(start, start + n):
            p.produce(topic, key=f"k{i}".encode(), value=f"{partition}:{i}".encode(), partition=partition)
    assert p.flush(15) == 0


async def produce(bootstrap: str, topic: str, per_partition: dict[int, int], *, start: int = 0) -> None:
    await asyncio.to_thread(_produce, bootstrap, topic, per_partition, start)


async def run_loop(group: ConsumerGroup, topics: list[str], handler: Any) -> int:
    sessions = 0
    while not group.closed:
        await group.consume(topics, handler)
        sessions += 1
    return sessions


@dataclass
class ClaimRun:
    member: str
    claim: ConsumerGroupClaim
    start: int
    offsets: list[int] = field(default_factory=list)
    end: int | None = None
    ended_seen: bool | None = None
    """``session.ended`` as read inside consume_claim after its iterator ended."""


class Tracker(ConsumerGroupHandler):
    """Records each claim's run (monotonic start/end) and deliveries; marks every message.

    ``owners`` is shared by the members of a test: a claim starting while
    another member's claim of that partition still runs is a violation.
    """

    def __init__(self, name: str, owners: dict[TopicPartition, str] | None = None) -> None:
        self.name = name
        self.owners = owners if owners is not None else {}
        self.violations: list[str] = []
        self.runs: list[ClaimRun] = []
        self.setups = 0
        self.cleanups = 0

    async def setup(self, session: ConsumerGroupSession) -> None:
        self.setups += 1

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        self.cleanups += 1

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        other = self.owners.get(claim.tp)
        if other is not None:
            self.violations.append(f"{self.name} claimed {claim.tp} while {other} owned it")
        self.owners[claim.tp] = self.name
        run = ClaimRun(self.name, claim, time.monotonic_ns())
        self.runs.append(run)
        try:
            async for msg in claim.messages():
                run.offsets.append(msg.offset)
                session.mark_message(msg)
            run.ended_seen = session.ended
        finally:
            run.end = time.monotonic_ns()
            if self.owners.get(claim.tp) == self.name:
                del self.owners[claim.tp]

    def delivered(self) -> list[tuple[int, int]]:
        return [(r.claim.partition, o) for r in self.runs for o in r.offsets]

    def runs_of(self, partition: int) -> list[ClaimRun]:
        return [r for r in self.runs if r.claim.partition == partition]


def listener(group: ConsumerGroup) -> RebalanceListener:
    return group._membership.listener


# ---------------------------------------------------------------------------- hooks, one member


async def test_cooperative_revoke_stops_only_that_claim_commits_it_and_assign_adds_a_claim() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 3)
        await produce(bs, "t", {0: 10, 1: 10, 2: 10})
        h = Tracker("a")
        group = ConsumerGroup(bs, "gc1", **COOPERATIVE)
        loop_task = asyncio.create_task(run_loop(group, ["t"], h))
        try:
            await wait_until(lambda: len(h.delivered()) == 30, "the first 30 messages")
            session = group.session
            assert session is not None and session.claims == {"t": [0, 1, 2]}
            kept = {r.claim.partition: r for r in h.runs if r.claim.partition != 1}
            moved = h.runs_of(1)[0]
            assert session.pending_commits().keys() == {("t", 0), ("t", 1), ("t", 2)}

            await listener(group).on_partitions_revoked([("t", 1)])

            # The revoked claim alone has ended, before the hook returned ...
            assert moved.end is not None and moved.claim.revoked and moved.claim.stopped
            assert moved.ended_seen is True, "session.ended is true inside the revoked claim"
            assert moved.offsets == list(range(10))
            # ... with its offsets committed (the interval auto-commit is 10 minutes away).
            assert (await committed_offsets(bs, "gc1", [("t", 1)]))[("t", 1)] == 10
            assert ("t", 1) not in session.pending_commits()
            session.mark_offset("t", 1, 99)  # no longer claimed: ignored
            assert ("t", 1) not in session.marked()
            assert ("t", 1) not in group._fetcher.assigned()
            # The session and the other claims go on.
            assert group.session is session and not session.ended
            assert session.claims == {"t": [0, 2]}
            assert all(r.end is None and not r.claim.stopped for r in kept.values())

            await produce(bs, "t", {0: 5, 1: 5, 2: 5}, start=10)
            await wait_until(
                lambda: all(len(r.offsets) == 15 for r in kept.values()), "kept claims to go on"
            )
            for r in kept.values():
                assert r.offsets == list(range(15)), "same iterator, no gap, no repeat"

            await listener(group).on_partitions_assigned([("t", 1)])
            assert session.claims == {"t": [0, 1, 2]}
            await wait_until(lambda: len(h.runs_of(1)) == 2, "a claim for the assigned partition")
            again = h.runs_of(1)[1]
            assert again.claim.initial_offset == 10, "resumes from the commit made at revocation"
            assert again.claim.session is session
            await wait_until(lambda: len(again.offsets) == 5, "the new claim to consume")
            assert again.offsets == list(range(10, 15))
            assert h.setups == 1 and h.cleanups == 0
            assert group.sessions == 1
        finally:
            await group.close()
        assert await asyncio.wait_for(loop_task, DEADLINE_S) == 1
        assert h.setups == h.cleanups == 1
        assert Counter(h.delivered()) == Counter(
            [(p, o) for p in (0, 2) for o in range(15)] + [(1, o) for o in range(15)]
        )
        assert await committed_offsets(bs, "gc1", [("t", p) for p in range(3)]) == {
            ("t", p): 15 for p in range(3)
        }


async def test_cooperative_join_prepare_commits_and_keeps_the_session_lost_ends_it_without_commit() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 5, 1: 5})
        h = Tracker("a")
        group = ConsumerGroup(bs, "gc2", **COOPERATIVE)
        tps = [("t", 0), ("t", 1)]
        loop_task = asyncio.create_task(run_loop(group, ["t"], h))
        try:
            await wait_until(lambda: len(h.delivered()) == 10, "the first 10 messages")
            session = group.session
            assert session is not None
            await listener(group).on_join_prepare(session.generation)
            # No session end before rejoining, but (auto-commit) a commit, as Java does.
            assert not session.ended and group.session is session
            assert all(r.end is None for r in h.runs)
            assert await committed_offsets(bs, "gc2", tps) == {("t", 0): 5, ("t", 1): 5}

            await produce(bs, "t", {0: 3, 1: 3}, start=5)
            await wait_until(lambda: len(h.delivered()) == 16, "3 more per partition")
            await listener(group).on_partitions_lost(tps)
            assert session.ended and session.lost
            assert all(r.end is not None and not r.claim.revoked for r in h.runs)
            assert await committed_offsets(bs, "gc2", tps) == {("t", 0): 5, ("t", 1): 5}, "lost: no commit"
            # consume returned; the next session reads the uncommitted records again
            await wait_until(lambda: len(h.delivered()) == 22, "the next session to re-read")
            assert group.sessions == 2
        finally:
            await group.close()
        assert await asyncio.wait_for(loop_task, DEADLINE_S) == 2
        assert await committed_offsets(bs, "gc2", tps) == {("t", 0): 8, ("t", 1): 8}


async def test_commit_while_rejoining_is_refused_locally_and_stays_pending() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 1)
        await produce(bs, "t", {0: 4})
        h = Tracker("a")
        group = ConsumerGroup(bs, "gc6", **dict(COOPERATIVE, enable_auto_commit=False))
        loop_task = asyncio.create_task(run_loop(group, ["t"], h))
        try:
            await wait_until(lambda: len(h.delivered()) == 4, "the 4 messages")
            session = group.session
            assert session is not None
            core = group._membership.core
            for state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE):
                saved, core.state = core.state, state
                try:
                    with pytest.raises(KafkaError, match="rebalancing") as info:
                        await session.commit()
                finally:
                    core.state = saved
                assert info.value.code == ErrorCode.REBALANCE_IN_PROGRESS
                assert session.pending_commits() == {("t", 0): session.marked()[("t", 0)]}
                assert (await committed_offsets(bs, "gc6", [("t", 0)]))[("t", 0)] is None
            await session.commit()
            assert session.pending_commits() == {}
            assert (await committed_offsets(bs, "gc6", [("t", 0)]))[("t", 0)] == 4
        finally:
            await group.close()
        await asyncio.wait_for(loop_task, DEADLINE_S)


async def test_eager_revoke_and_join_prepare_still_end_the_whole_session() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 5, 1: 5})
        h = Tracker("a")
        group = ConsumerGroup(bs, "gc3", **dict(SETTINGS, partition_assignment_strategy=["range"]))
        loop_task = asyncio.create_task(run_loop(group, ["t"], h))
        try:
            await wait_until(lambda: len(h.delivered()) == 10, "the first 10 messages")
            first = group.session
            assert first is not None
            await listener(group).on_partitions_revoked([("t", 0)])
            assert first.ended and not first.lost and first._finished.is_set()
            assert all(r.end is not None and not r.claim.revoked for r in h.runs)
            assert (await committed_offsets(bs, "gc3", [("t", 0), ("t", 1)])) == {("t", 0): 5, ("t", 1): 5}
            await wait_until(lambda: (s := group.session) is not None and s is not first, "a new session")
            second = group.session
            assert second is not None
            await listener(group).on_join_prepare(second.generation)
            assert second.ended and second._finished.is_set()
        finally:
            await group.close()
        assert await asyncio.wait_for(loop_task, DEADLINE_S) >= 2


async def test_cooperative_handler_error_in_a_revoked_claim_ends_the_session_and_is_raised() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 3, 1: 3})
        seen: list[int] = []

        class FailsOnRevoke(ConsumerGroupHandler):
            async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
                async for msg in claim.messages():
                    seen.append(msg.partition)
                    session.mark_message(msg)
                if claim.revoked:
                    raise ValueError(f"cannot hand over {claim.partition}")

        async with ConsumerGroup(bs, "gc4", **COOPERATIVE) as group:
            task = asyncio.create_task(group.consume(["t"], FailsOnRevoke()))
            await wait_until(lambda: len(seen) == 6, "the 6 messages")
            await listener(group).on_partitions_revoked([("t", 0)])
            with pytest.raises(ValueError, match="cannot hand over 0"):
                await asyncio.wait_for(task, DEADLINE_S)


# ---------------------------------------------------------------------------- two real members


async def test_second_member_joins_cooperative_group_kept_claims_run_on(slipstream_broker: Broker) -> None:
    bs = slipstream_broker.bootstrap_servers
    await create_topic(bs, "t", 4)
    await produce(bs, "t", {p: 20 for p in range(4)})
    owners: dict[TopicPartition, str] = {}
    ha, hb = Tracker("a", owners), Tracker("b", owners)
    a = ConsumerGroup(bs, "gc5", **COOPERATIVE)
    bgroup = ConsumerGroup(bs, "gc5", **COOPERATIVE)
    ta = asyncio.create_task(run_loop(a, ["t"], ha))
    tb: asyncio.Task[int] | None = None
    try:
        await wait_until(lambda: len(ha.delivered()) == 80, "member a consumed the first 80")
        sa = a.session
        assert sa is not None
        first_generation = sa.generation_id
        runs_before = {r.claim.partition: r for r in ha.runs}
        assert len(runs_before) == 4

        tb = asyncio.create_task(run_loop(bgroup, ["t"], hb))

        def split() -> bool:
            sb = bgroup.session
            return (
                sb is not None
                and len(sb.claims.get("t", [])) == 2
                and sa.claims.get("t") is not None
                and len(sa.claims["t"]) == 2
                and sa.generation_id == sb.generation_id
                and len(hb.runs) == 2
            )

        await wait_until(split, "the members to split the partitions")
        sb = bgroup.session
        assert sb is not None
        kept = set(sa.claims["t"])
        moved = set(sb.claims["t"])
        assert not kept & moved and kept | moved == {0, 1, 2, 3}
        assert a.session is sa and not sa.ended, "member a kept its session"
        assert sa.generation_id > first_generation, "a's session follows the new generations"

        await produce(bs, "t", {p: 20 for p in range(4)}, start=20)
        await wait_until(
            lambda: len(ha.delivered()) + len(hb.delivered()) == 160, "both consumed the next 80"
        )
        for p in kept:
            # Never interrupted: one claim, one iterator, every offset once, in order.
            assert [r.claim for r in ha.runs_of(p)] == [runs_before[p].claim]
            run = runs_before[p]
            assert run.end is None and not run.claim.stopped
            assert run.offsets == list(range(40))
            assert hb.runs_of(p) == []
        for p in moved:
            (old,) = ha.runs_of(p)
            (new,) = hb.runs_of(p)
            assert old.claim.revoked and old.end is not None
            assert old.offsets == list(range(20))
            # Handed over with its commit: b starts where a stopped, after a stopped.
            assert new.claim.initial_offset == 20
            assert new.offsets == list(range(20, 40))
            assert old.end < new.start
        assert ha.violations == hb.violations == []
        everything = Counter(ha.delivered() + hb.delivered())
        assert [k for k, n in everything.items() if n > 1] == [], "no duplicate deliveries"
        assert set(everything) == {(p, o) for p in range(4) for o in range(40)}
        assert ha.setups == hb.setups == 1 and ha.cleanups == hb.cleanups == 0
    finally:
        await bgroup.close()
        await a.close()
    assert await asyncio.wait_for(ta, DEADLINE_S) == 1
    assert tb is not None and await asyncio.wait_for(tb, DEADLINE_S) == 1
    assert await committed_offsets(bs, "gc5", [("t", p) for p in range(4)]) == {("t", p): 40 for p in range(4)}
