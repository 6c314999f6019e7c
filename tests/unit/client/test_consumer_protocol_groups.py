"""group_protocol="consumer" (KIP-848) against a real in-process broker.

Each test starts its own broker (memory storage) with a short consumer-group
heartbeat interval and, where a test needs it, a short session timeout. A
shared ledger checks, at every hook, that no partition is ever owned by two
members at once. Waits poll for a condition with a deadline; nothing sleeps
for a fixed time to "let things settle".
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from client_helpers import (
    DEADLINE_S,
    Ledger,
    Recorder,
    committed_offsets,
    create_topic,
    produce,
    wait_until,
)

from slipstream.broker.broker import Broker
from slipstream.client.aio_consumer import AIOConsumer
from slipstream.client.assignors import TopicPartition
from slipstream.client.classic_membership import GroupMembership
from slipstream.client.cluster import Cluster
from slipstream.client.consumer import Consumer
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler
from slipstream.client.consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from slipstream.client.consumer_membership import ConsumerGroupMembership
from slipstream.client.group_errors import FatalGroupError
from slipstream.client.tasks import cancel_and_wait
from slipstream.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(90)

SETTINGS: dict[str, Any] = dict(
    group_protocol="consumer",
    auto_offset_reset="earliest",
    fetch_max_wait_ms=100,
    retry_backoff_ms=20,
    retry_backoff_max_ms=200,
    max_poll_interval_ms=20000,
)


@contextlib.asynccontextmanager
async def consumer_broker(session_timeout_ms: int = 30000, **settings: Any) -> AsyncIterator[Broker]:
    async with Broker(
        storage="memory",
        port=0,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=500,
        # Short consumer-group timeouts need lower bounds than Kafka's defaults.
        group_consumer_min_session_timeout_ms=500,
        group_consumer_session_timeout_ms=session_timeout_ms,
        group_consumer_min_heartbeat_interval_ms=100,
        group_consumer_heartbeat_interval_ms=300,
        **settings,
    ) as b:
        yield b




class Member:
    """One ConsumerGroupMembership with its own cluster view and a recording listener."""

    def __init__(self, bootstrap: str, group: str, name: str, ledger: Ledger, **settings: Any) -> None:
        self.name = name
        self.cluster = Cluster(bootstrap)
        self.config = ConsumerConfig(bootstrap_servers=bootstrap, group_id=group, **(SETTINGS | settings))
        self.listener = Recorder(name, ledger)
        self.m = ConsumerGroupMembership(self.cluster, self.config, listener=self.listener)

    async def join(self, topics: list[str]) -> set[TopicPartition]:
        self.m.subscribe(topics)
        gen = await self.m.ensure_active(DEADLINE_S)
        return set(gen.assignment)

    async def close(self, *, leave: bool = True) -> None:
        try:
            await self.m.close(leave=leave)
        finally:
            await self.cluster.close()

    async def crash(self) -> None:
        """Stop heartbeating without leaving (a process that died)."""
        await cancel_and_wait([t for t in (self.m._task, self.m._reconcile_task) if t is not None])
        self.m._task = self.m._reconcile_task = None


def every(topic: str, n: int) -> set[TopicPartition]:
    return {(topic, p) for p in range(n)}


# ---------------------------------------------------------------------------- membership


async def test_one_member_gets_every_partition() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        ledger = Ledger()
        a = Member(bs, "g-one", "a", ledger)
        try:
            assert await a.join(["t"]) == every("t", 4)
            assert a.m.member_epoch > 0
            assert a.m.member_id == a.m.core.client_member_id  # v1: the id the client made
            assert ledger.owned_by("a") == every("t", 4)
        finally:
            await a.close()


async def test_three_members_share_six_partitions_never_owned_twice_then_one_leaves() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 6)
        ledger = Ledger()
        members = [Member(bs, "g-three", n, ledger) for n in ("a", "b", "c")]
        try:
            for member in members:
                await member.join(["t"])

            def balanced(ms: list[Member], each: int) -> bool:
                owned = [ledger.owned_by(m.name) for m in ms]
                return all(len(o) == each for o in owned) and set().union(*owned) == every("t", 6)

            await wait_until(lambda: balanced(members, 2), "three members with two partitions each")
            for member in members:
                assert member.m.assignment == frozenset(ledger.owned_by(member.name))
            # One leaves: the others take its partitions, still one owner at a time.
            await members[0].close()
            assert ledger.owned_by("a") == set()
            await wait_until(lambda: balanced(members[1:], 3), "two members with three partitions each")
            assert ledger.violations == []
        finally:
            for member in members:
                await member.close()


async def test_member_that_stops_heartbeating_is_fenced_after_the_session_timeout() -> None:
    async with consumer_broker(session_timeout_ms=1500) as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        ledger = Ledger()
        a, c = Member(bs, "g-crash", "a", ledger), Member(bs, "g-crash", "c", ledger)
        try:
            await a.join(["t"])
            await c.join(["t"])
            await wait_until(lambda: len(ledger.owned_by("a")) == 2, "a and c split the partitions")
            a_had = set(ledger.owned_by("a"))
            member_id = a.m.member_id
            await a.crash()
            # The broker expires a's session and gives its partitions to c. The ledger
            # still lists them as a's (a ran no hook): take them off before c acquires.
            ledger.release("a", sorted(a_had))
            await wait_until(lambda: c.m.assignment == frozenset(every("t", 4)), "c owns everything")
            # a comes back: the broker no longer knows it; its partitions are lost, and it
            # rejoins with epoch 0 under the same member id.
            a.m.start()
            await wait_until(lambda: ("lost", sorted(a_had)) in a.listener.events, "a's partitions lost")
            await a.m.ensure_active(DEADLINE_S)
            assert a.m.member_id == member_id
            await wait_until(lambda: len(ledger.owned_by("a")) == 2, "a and c split again")
            assert ledger.violations == []
        finally:
            await a.close()
            await c.close()


async def test_static_member_restart_keeps_its_partitions() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        ledger = Ledger()
        a = Member(bs, "g-static", "a", ledger, group_instance_id="inst-a")
        s = Member(bs, "g-static", "s", ledger, group_instance_id="inst-s")
        try:
            await a.join(["t"])
            await s.join(["t"])
            await wait_until(
                lambda: len(ledger.owned_by("a")) == 2 and len(ledger.owned_by("s")) == 2,
                "a and s split the partitions",
            )
            a_had = set(ledger.owned_by("a"))
            s_events = len(s.listener.events)
            await a.close()  # epoch -2: the broker keeps a's assignment for its return
            again = Member(bs, "g-static", "a", ledger, group_instance_id="inst-a")
            try:
                assert await again.join(["t"]) == a_had
                assert again.m.member_id != a.m.member_id  # a new process, a new member id
                # s was never asked to change anything while a was away.
                assert s.listener.events[s_events:] == []
                assert s.m.assignment == frozenset(every("t", 4) - a_had)
            finally:
                await again.close()
            assert ledger.violations == []
        finally:
            await s.close()


async def test_with_migration_disabled_a_classic_group_with_members_refuses_a_consumer_protocol_member() -> None:
    """Kafka's answer when it does not convert a group (group.consumer.migration.policy=disabled)."""
    async with consumer_broker(group_consumer_migration_policy="disabled") as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        cluster = Cluster(bs)
        classic = GroupMembership(
            cluster,
            ConsumerConfig(bootstrap_servers=bs, group_id="g-mixed", heartbeat_interval_ms=100, session_timeout_ms=6000),
        )
        ledger = Ledger()
        member = Member(bs, "g-mixed", "k", ledger)
        try:
            classic.subscribe(["t"])
            await classic.ensure_active(DEADLINE_S)
            member.m.subscribe(["t"])
            with pytest.raises(FatalGroupError) as info:
                await member.m.ensure_active(DEADLINE_S)
            assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND
            assert "g-mixed" in str(info.value)
        finally:
            await member.close()
            await classic.close()
            await cluster.close()


async def test_a_consumer_protocol_member_upgrades_a_classic_group_and_both_share_the_topic() -> None:
    """The default policy (bidirectional, as Kafka 4): the classic member is told to rejoin
    and stays in the now consumer-protocol group; the two end up with disjoint halves."""
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        cluster = Cluster(bs)
        classic = GroupMembership(
            cluster,
            ConsumerConfig(bootstrap_servers=bs, group_id="g-up", heartbeat_interval_ms=100, session_timeout_ms=6000),
        )
        ledger = Ledger()
        member = Member(bs, "g-up", "k", ledger)
        try:
            classic.subscribe(["t"])
            first = await classic.ensure_active(DEADLINE_S)
            assert set(first.assignment) == every("t", 2)
            member.m.subscribe(["t"])
            await member.m.ensure_active(DEADLINE_S)

            def split() -> bool:
                mine, theirs = set(member.m.assignment), set(classic.assignment)
                return len(mine) == 1 and len(theirs) == 1 and mine | theirs == every("t", 2)

            await wait_until(split, "the classic and the consumer-protocol member to own one partition each")
            assert b.groups is not None
            coordinator = b.groups.coordinator
            assert coordinator.group("g-up") is None and coordinator.consumer_group("g-up") is not None
        finally:
            await member.close()
            await classic.close()
            await cluster.close()


# ---------------------------------------------------------------------------- facades


async def test_aio_consumer_consumes_commits_and_the_commits_are_fetched_back() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 3)
        await produce(bs, "t", {0: 5, 1: 7, 2: 3})
        async with AIOConsumer(bs, group_id="g-aio", enable_auto_commit=False, **SETTINGS) as c:
            c.subscribe(["t"])
            got: list[tuple[int, int]] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(got) < 15:
                    for msg in await c.getmany(timeout_s=0.5):
                        got.append((msg.partition, msg.offset))
            assert sorted(got) == sorted(
                [(0, i) for i in range(5)] + [(1, i) for i in range(7)] + [(2, i) for i in range(3)]
            )
            m = c.runtime.membership
            assert isinstance(m, ConsumerGroupMembership) and m.member_epoch > 0
            committed = await c.commit()
            assert committed == {("t", 0): 5, ("t", 1): 7, ("t", 2): 3}
            assert await c.committed([("t", 0), ("t", 1), ("t", 2)]) == committed
        assert await committed_offsets(bs, "g-aio", [("t", 0), ("t", 1), ("t", 2)]) == {
            ("t", 0): 5,
            ("t", 1): 7,
            ("t", 2): 3,
        }


async def test_poll_consumer_commits_revoked_partitions_before_the_next_owner_starts() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        await produce(bs, "t", {p: 3 for p in range(4)})
        revoked: list[TopicPartition] = []

        class Listener:
            def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
                revoked.extend(partitions)

        async with AIOConsumer(bs, group_id="g-handover", **SETTINGS) as one:
            one.subscribe(["t"], listener=Listener())
            n = 0
            async with asyncio.timeout(DEADLINE_S):
                while n < 12:
                    n += len(await one.getmany(timeout_s=0.5))
            async with AIOConsumer(bs, group_id="g-handover", **SETTINGS) as two:
                two.subscribe(["t"])
                async with asyncio.timeout(DEADLINE_S):
                    while len(two.assignment()) < 2:
                        assert await two.getmany(timeout_s=0.2) == []
                        await one.getmany(timeout_s=0.05)
                moved = sorted(two.assignment())
                assert sorted(revoked) == moved
                # Two starts where one stopped: one committed them (auto-commit) when revoked.
                for tp in moved:
                    assert await two.position(tp) == 3
                assert one.assignment() == every("t", 4) - set(moved)


async def test_thread_consumer_commit_sync_with_the_consumer_protocol() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        await produce(bs, "t", {0: 4, 1: 6})

        def consume() -> dict[TopicPartition, int | None]:
            with Consumer(bs, group_id="g-thread", enable_auto_commit=False, **SETTINGS) as c:
                c.subscribe(["t"])
                n = 0
                for _ in range(200):
                    n += len(c.poll(0.2))
                    if n >= 10:
                        break
                assert n == 10
                c.commit_sync()
                return c.committed([("t", 0), ("t", 1)])

        assert await asyncio.to_thread(consume) == {("t", 0): 4, ("t", 1): 6}
        # A second member of the same group starts from those commits: nothing to read.
        assert await committed_offsets(bs, "g-thread", [("t", 0), ("t", 1)]) == {("t", 0): 4, ("t", 1): 6}


async def test_max_poll_interval_leaves_and_the_next_poll_rejoins_with_the_same_member_id() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        events: list[tuple[str, list[TopicPartition]]] = []

        class Listener:
            def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
                events.append(("assigned", partitions))

            def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
                events.append(("revoked", partitions))

            def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
                events.append(("lost", partitions))

        settings = SETTINGS | dict(max_poll_interval_ms=1500, enable_auto_commit=False)
        async with AIOConsumer(bs, group_id="g-poll", **settings) as c, AIOConsumer(
            bs, group_id="g-poll", **settings
        ) as other:
            c.subscribe(["t"], listener=Listener())
            other.subscribe(["t"])
            async with asyncio.timeout(DEADLINE_S):
                while len(c.assignment()) != 2 or len(other.assignment()) != 2:
                    await c.getmany(timeout_s=0.05)
                    await other.getmany(timeout_s=0.05)
            m = c.runtime.membership
            assert isinstance(m, ConsumerGroupMembership)
            member_id = m.member_id
            # c stops calling getmany: its watchdog leaves (epoch -1) and other takes over.
            async with asyncio.timeout(DEADLINE_S):
                while other.assignment() != every("t", 4):
                    await other.getmany(timeout_s=0.05)
            assert m.generation is None
            assert events[-1][0] == "lost"  # left without polling: reported lost, not revoked
            async with asyncio.timeout(DEADLINE_S):
                while len(c.assignment()) != 2 or len(other.assignment()) != 2:
                    await c.getmany(timeout_s=0.05)
                    await other.getmany(timeout_s=0.05)
            assert m.member_id == member_id and m.member_epoch > 0


async def test_pattern_subscription_is_evaluated_by_the_broker() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "pat-a", 2)
        await create_topic(bs, "other", 1)
        await produce(bs, "pat-a", {0: 2, 1: 2})
        await produce(bs, "other", {0: 3})
        async with AIOConsumer(bs, group_id="g-pattern", **SETTINGS) as c:
            c.subscribe(re.compile("pat-.*"))
            seen: set[str] = set()
            count = 0
            async with asyncio.timeout(DEADLINE_S):
                while count < 4:
                    for msg in await c.getmany(timeout_s=0.5):
                        seen.add(msg.topic)
                        count += 1
            assert seen == {"pat-a"}
            assert c.assignment() == {("pat-a", 0), ("pat-a", 1)}
            # A topic created later joins the subscription (the member learns its id).
            await create_topic(bs, "pat-b", 1)
            await produce(bs, "pat-b", {0: 1})
            async with asyncio.timeout(DEADLINE_S):
                while "pat-b" not in seen:
                    for msg in await c.getmany(timeout_s=0.5):
                        seen.add(msg.topic)
            assert seen == {"pat-a", "pat-b"}


def test_broker_owned_settings_are_refused_by_the_facades() -> None:
    with pytest.raises(ValueError, match="session_timeout_ms"):
        Consumer("127.0.0.1:1", group_id="g", group_protocol="consumer", session_timeout_ms=10000)
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        ConsumerGroup("127.0.0.1:1", "g", group_protocol="consumer", heartbeat_interval_ms=100)
    with pytest.raises(ValueError, match="partition_assignment_strategy"):
        AIOConsumer("127.0.0.1:1", group_id="g", group_protocol="consumer", partition_assignment_strategy=["range"])


class ClaimRecorder(ConsumerGroupHandler):
    """Counts claim starts per partition and checks single ownership across members."""

    def __init__(self, name: str, owners: dict[TopicPartition, str], violations: list[str]) -> None:
        self.name = name
        self.owners = owners
        self.violations = violations
        self.started: dict[TopicPartition, int] = {}
        self.setups = 0
        self.live: set[TopicPartition] = set()
        self.delivered: list[tuple[TopicPartition, int]] = []

    async def setup(self, session: ConsumerGroupSession) -> None:
        self.setups += 1

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        tp = claim.tp
        self.started[tp] = self.started.get(tp, 0) + 1
        other = self.owners.get(tp)
        if other is not None:
            self.violations.append(f"{tp} claimed by {self.name} while {other} owns it")
        self.owners[tp] = self.name
        self.live.add(tp)
        try:
            async for msg in claim.messages():
                self.delivered.append((tp, msg.offset))
                session.mark_message(msg)
        finally:
            self.live.discard(tp)
            if self.owners.get(tp) == self.name:
                del self.owners[tp]


async def test_consumer_group_kept_claims_are_not_restarted_when_a_member_joins() -> None:
    async with consumer_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        await produce(bs, "t", {p: 3 for p in range(4)})
        owners: dict[TopicPartition, str] = {}
        violations: list[str] = []
        h1 = ClaimRecorder("one", owners, violations)
        h2 = ClaimRecorder("two", owners, violations)
        g1 = ConsumerGroup(bs, "g-claims", **SETTINGS)
        g2 = ConsumerGroup(bs, "g-claims", **SETTINGS)

        async def run(group: ConsumerGroup, handler: ClaimRecorder) -> None:
            while not group.closed:
                await group.consume(["t"], handler)

        t1 = asyncio.create_task(run(g1, h1))
        t2: asyncio.Task[None] | None = None
        try:
            await wait_until(lambda: h1.live == every("t", 4), "member one claims everything")
            await wait_until(lambda: len(h1.delivered) == 12, "member one read everything")
            t2 = asyncio.create_task(run(g2, h2))
            await wait_until(
                lambda: len(h2.live) == 2 and len(h1.live) == 2, "the members split the partitions"
            )
            assert isinstance(g1._membership, ConsumerGroupMembership)
            assert all(h1.started[tp] == 1 for tp in h1.live)  # kept claims never restarted
            assert h1.setups == 1 and g1.sessions == 1  # one session spans the rebalance
            # The revoked partitions' marks were committed before member two got them.
            assert h2.delivered == []
            assert violations == []
        finally:
            await g1.close()
            await g2.close()
            await asyncio.gather(t1, *([t2] if t2 is not None else []))
        assert await committed_offsets(bs, "g-claims", sorted(every("t", 4))) == dict.fromkeys(
            every("t", 4), 3
        )
