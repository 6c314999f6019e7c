"""Group membership, committed offsets and fetching against a real in-process broker.

Each test starts its own broker (memory storage, no initial rebalance delay,
session timeouts down to 500 ms) on the test's event loop; confluent-kafka,
which blocks, runs in worker threads. A shared ledger checks, at every hook,
that no partition is ever owned by two members at once. Waits poll for a
condition with a deadline; nothing sleeps for a fixed time to "let things settle".
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest
from client_helpers import (
    DEADLINE_S,
    Ledger,
    Recorder,
    create_topic,
    group_broker,
    produce,
    wait_until,
)
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka.admin import AdminClient, NewPartitions

from slipstream.client.assignors import TopicPartition
from slipstream.client.classic_membership import GroupMembership
from slipstream.client.cluster import Cluster
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.coordinator_locator import CoordinatorLocator
from slipstream.client.fetcher import Fetcher
from slipstream.client.group_errors import FencedInstanceError
from slipstream.client.offsets import CommitFailedError, GroupOffsets, OffsetAndMetadata
from slipstream.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)



# ---------------------------------------------------------------------------- helpers


class Member:
    """One slipstream group member: cluster, membership, offsets, recorder."""

    def __init__(self, bootstrap: str, name: str, ledger: Ledger, topics: list[str], **settings: Any) -> None:
        base: dict[str, Any] = dict(
            bootstrap_servers=bootstrap, client_id=name, group_id="g", session_timeout_ms=6000,
            heartbeat_interval_ms=100, rebalance_timeout_ms=5000, retry_backoff_ms=20,
            retry_backoff_max_ms=200, auto_offset_reset="earliest", fetch_max_wait_ms=100,
        )
        base.update(settings)
        self.name = name
        self.config = ConsumerConfig(**base)
        self.cluster = Cluster(bootstrap, client_id=name)
        self.recorder = Recorder(name, ledger)
        self.locator = CoordinatorLocator(self.cluster, self.config)
        self.membership = GroupMembership(self.cluster, self.config, listener=self.recorder, locator=self.locator)
        self.offsets = GroupOffsets(self.locator, self.config, on_membership_error=self.membership.on_commit_error)
        self.membership.subscribe(topics)

    @property
    def assignment(self) -> set[TopicPartition]:
        return set(self.membership.assignment)

    def stable_in(self, generation: int | None = None) -> bool:
        gen = self.membership.generation
        return (
            gen is not None
            and not self.membership.core.rejoin_needed
            and (generation is None or gen.generation_id == generation)
        )

    async def close(self, **kw: Any) -> None:
        await self.membership.close(**kw)
        await self.locator.close()
        await self.cluster.close()

    async def kill(self) -> None:
        """Vanish without a word: no LeaveGroup, no more heartbeats."""
        await self.membership._stop_tasks()
        self.membership.core.owned.clear()
        self.recorder.ledger.release(self.name, sorted(self.recorder.ledger.owned_by(self.name)))
        await self.locator.close()
        await self.cluster.close()


def partitions(topic: str, n: int) -> set[TopicPartition]:
    return {(topic, p) for p in range(n)}


async def all_stable(members: list[Member], expected: set[TopicPartition]) -> None:
    """Wait until all members are stable in one generation and their assignments partition ``expected``."""

    def ok() -> bool:
        gens = {m.membership.generation.generation_id for m in members if m.membership.generation}
        if len(gens) != 1 or not all(m.stable_in() for m in members):
            return False
        owned = [m.assignment for m in members]
        union = set().union(*owned)
        return union == expected and sum(len(o) for o in owned) == len(expected)

    await wait_until(ok, f"{[m.name for m in members]} to split {len(expected)} partitions")


# ---------------------------------------------------------------------------- tests


async def test_single_member_joins_fetches_everything_and_commits() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 3)
        await produce(bs, "t", {0: 10, 1: 7, 2: 5})
        ledger = Ledger()
        m = Member(bs, "a", ledger, ["t"])
        fetcher = Fetcher(m.cluster, m.config)
        try:
            gen = await m.membership.ensure_active(DEADLINE_S)
            assert set(gen.assignment) == partitions("t", 3)
            assert gen.is_leader and gen.protocol_name == "range"
            assert m.recorder.events == [("assigned", [("t", 0), ("t", 1), ("t", 2)])]
            committed = await m.offsets.fetch_committed(gen.assignment)
            assert committed == dict.fromkeys(gen.assignment)
            fetcher.add({tp: None if c is None else c.offset for tp, c in committed.items()})
            got: dict[TopicPartition, list[bytes | None]] = {}
            while sum(len(v) for v in got.values()) < 22:
                assert await fetcher.wait_for_data(DEADLINE_S)
                for tp, records in fetcher.drain(5).items():
                    got.setdefault(tp, []).extend(r.value for r in records)
            assert got[("t", 0)] == [f"t-0-{i}".encode() for i in range(10)]
            assert fetcher.positions() == {("t", 0): 10, ("t", 1): 7, ("t", 2): 5}
            await m.offsets.commit(fetcher.positions(), m.membership.generation)
            committed = await m.offsets.fetch_committed(gen.assignment)
            assert {tp: c.offset for tp, c in committed.items() if c} == fetcher.positions()
            # A commit with metadata round-trips.
            await m.offsets.commit({("t", 0): OffsetAndMetadata(3, "note")}, m.membership.generation)
            assert (await m.offsets.fetch_committed([("t", 0)]))[("t", 0)] == OffsetAndMetadata(3, "note", -1)
        finally:
            await fetcher.close()
            await m.close()
        assert ledger.violations == []


async def test_second_member_splits_the_partitions_and_leaving_gives_them_back() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        ledger = Ledger()
        a = Member(bs, "a", ledger, ["t"])
        c = Member(bs, "c", ledger, ["t"])
        try:
            gen1 = await a.membership.ensure_active(DEADLINE_S)
            assert set(gen1.assignment) == partitions("t", 4)
            await c.membership.ensure_active(DEADLINE_S)
            await all_stable([a, c], partitions("t", 4))
            assert len(a.assignment) == len(c.assignment) == 2
            assert a.membership.generation is not None and a.membership.generation.generation_id > 1
            # eager (range): a revoked everything before rejoining
            assert a.recorder.kinds()[:3] == ["assigned", "revoked", "assigned"]
            # c leaves: a gets everything back
            await c.close()
            await wait_until(lambda: a.stable_in() and a.assignment == partitions("t", 4), "a to own all again")
        finally:
            await a.close()
        assert ledger.violations == []
        assert ledger.owner == {}


async def test_session_expiry_of_a_killed_member_hands_its_partitions_over() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        ledger = Ledger()
        a = Member(bs, "a", ledger, ["t"], session_timeout_ms=6000)
        k = Member(bs, "k", ledger, ["t"], session_timeout_ms=1000)
        try:
            await asyncio.gather(a.membership.ensure_active(DEADLINE_S), k.membership.ensure_active(DEADLINE_S))
            await all_stable([a, k], partitions("t", 4))
            killed = k.membership.member_id
            await k.kill()
            await wait_until(lambda: a.stable_in() and a.assignment == partitions("t", 4),
                             "a to get the killed member's partitions")
            # The broker removed k when its session (1 s) ran out: no LeaveGroup, and no
            # rebalance timeout (5 s) waited. Read from its rebalance history, not a clock.
            events = b.groups.history_for("g")
            expired = [(e["member_id"], e["session_timeout_ms"]) for e in events if e["kind"] == "session-expired"]
            assert expired == [(killed, 1000)]
            assert not [e for e in events if e["kind"] == "removed-at-rebalance-timeout"]
            assert not [e for e in events if e["kind"] == "member-left" and e["member_id"] == killed]
        finally:
            await a.close()
        assert ledger.violations == []


async def test_cooperative_rebalance_revokes_only_the_partitions_that_move() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 6)
        ledger = Ledger()
        coop = {"partition_assignment_strategy": ["cooperative-sticky"]}
        a = Member(bs, "a", ledger, ["t"], **coop)
        c = Member(bs, "c", ledger, ["t"], **coop)
        try:
            await a.membership.ensure_active(DEADLINE_S)
            assert a.membership.protocol == "COOPERATIVE"
            assert a.assignment == partitions("t", 6)
            await c.membership.ensure_active(DEADLINE_S)
            await all_stable([a, c], partitions("t", 6))
            assert len(a.assignment) == len(c.assignment) == 3
            revoked = [tps for kind, tps in a.recorder.events if kind == "revoked"]
            assert revoked == [sorted(c.assignment)]  # only what moved, once
            assert "lost" not in a.recorder.kinds()
            # c got nothing in the first round (a still owned it all) and its share in the
            # second, after a released it (KIP-429)
            assert c.recorder.events == [("assigned", []), ("assigned", sorted(c.assignment))]
        finally:
            await c.close()
            await a.close()
        assert ledger.violations == []


async def test_member_id_required_then_rejoin_with_the_given_id() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 1)
        m = Member(bs, "a", Ledger(), ["t"])
        seen: list[tuple[int, str]] = []
        original = m.membership.core.on_join_response

        def spy(response: Any, sent: str | None = None, now: float | None = None) -> Any:
            seen.append((response.error_code, response.member_id))
            return original(response, sent, now)

        m.membership.core.on_join_response = spy  # type: ignore[method-assign]
        try:
            gen = await m.membership.ensure_active(DEADLINE_S)
            assert seen[0][0] == ErrorCode.MEMBER_ID_REQUIRED
            assert seen[1] == (ErrorCode.NONE, seen[0][1])
            assert gen.member_id == seen[0][1]
        finally:
            await m.close()


async def test_static_member_restart_gets_its_partitions_back_without_a_rebalance() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 4)
        ledger = Ledger()
        a = Member(bs, "a", ledger, ["t"], group_instance_id="host-a")
        c = Member(bs, "c", ledger, ["t"], group_instance_id="host-c")
        a2: Member | None = None
        try:
            await asyncio.gather(a.membership.ensure_active(DEADLINE_S), c.membership.ensure_active(DEADLINE_S))
            await all_stable([a, c], partitions("t", 4))
            gen = c.membership.generation
            assert gen is not None
            a_partitions, c_rebalances = a.assignment, c.membership.rebalances
            await a.close()  # static: no LeaveGroup
            a2 = Member(bs, "a", ledger, ["t"], group_instance_id="host-a")
            gen2 = await a2.membership.ensure_active(DEADLINE_S)
            assert set(gen2.assignment) == a_partitions
            assert gen2.generation_id == gen.generation_id
            # c saw nothing: same generation, no new join
            await asyncio.sleep(0.3)  # several heartbeats: c would have heard of a rebalance
            assert c.membership.rebalances == c_rebalances and c.stable_in(gen.generation_id)
        finally:
            if a2 is not None:
                await a2.close()
            await c.close()
        assert ledger.violations == []


async def test_a_second_consumer_with_the_same_instance_id_fences_the_first() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        ledger = Ledger()
        a = Member(bs, "a", ledger, ["t"], group_instance_id="same")
        a2 = Member(bs, "a2", ledger, ["t"], group_instance_id="same")
        try:
            await a.membership.ensure_active(DEADLINE_S)
            await a2.membership.ensure_active(DEADLINE_S)
            await wait_until(lambda: a.membership.error is not None, "the first to be fenced")
            assert isinstance(a.membership.error, FencedInstanceError)
            with pytest.raises(FencedInstanceError, match="same"):
                await a.membership.ensure_active(1)
            assert a.recorder.kinds()[-1] == "lost"
        finally:
            await a.close()
            await a2.close()


async def test_commit_after_the_group_moved_on_fails_with_a_clear_error() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        ledger = Ledger()
        a = Member(bs, "a", ledger, ["t"])
        c = Member(bs, "c", ledger, ["t"])
        try:
            gen1 = await a.membership.ensure_active(DEADLINE_S)
            await c.membership.ensure_active(DEADLINE_S)
            await all_stable([a, c], partitions("t", 2))
            with pytest.raises(CommitFailedError, match="rebalanced") as err:
                await a.offsets.commit({("t", 0): 1}, gen1)
            assert err.value.code == ErrorCode.ILLEGAL_GENERATION
        finally:
            await c.close()
            await a.close()


async def test_leader_rejoins_when_a_subscribed_topic_gains_partitions() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 2)
        ledger = Ledger()
        a = Member(bs, "a", ledger, ["t"], metadata_max_age_ms=100)
        try:
            gen = await a.membership.ensure_active(DEADLINE_S)
            assert set(gen.assignment) == partitions("t", 2)
            admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})
            futures = await asyncio.to_thread(admin.create_partitions, [NewPartitions("t", 3)])
            await asyncio.to_thread(futures["t"].result, 10)
            await wait_until(lambda: a.stable_in() and a.assignment == partitions("t", 3), "the new partition")
            assert a.membership.generation is not None and a.membership.generation.generation_id > gen.generation_id
        finally:
            await a.close()


async def test_subscription_change_rejoins_with_the_new_topics() -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 1)
        await create_topic(bs, "u", 2)
        m = Member(bs, "a", Ledger(), ["t"], partition_assignment_strategy=["cooperative-sticky"])
        try:
            await m.membership.ensure_active(DEADLINE_S)
            m.membership.subscribe(["u"])
            gen = await m.membership.ensure_active(DEADLINE_S)
            assert set(gen.assignment) == partitions("u", 2)
            assert ("revoked", [("t", 0)]) in m.recorder.events
        finally:
            await m.close()


# ---------------------------------------------------------------------------- interop


class CkMember:
    """A confluent-kafka consumer polled in its own thread; exposes its current assignment."""

    def __init__(self, bootstrap: str, strategy: str, topic: str) -> None:
        self.consumer = CkConsumer({
            "bootstrap.servers": bootstrap,
            "group.id": "g",
            "client.id": "confluent",
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
            "enable.auto.commit": False,
            "log_level": 0,
        })
        self.consumer.subscribe([topic])
        self.assignment: set[TopicPartition] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and msg.error() and msg.error().code() >= 0:
                self.errors.append(str(msg.error()))
            self.assignment = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        self.consumer.close()

    async def close(self) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 15)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
async def test_mixed_group_with_a_confluent_kafka_member(strategy: str) -> None:
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 6)
        ledger = Ledger()
        m = Member(bs, "ours", ledger, ["t"], partition_assignment_strategy=[strategy])
        ck: CkMember | None = None
        try:
            await m.membership.ensure_active(DEADLINE_S)
            ck = CkMember(bs, strategy, "t")
            ck_ref = ck

            def split() -> bool:
                ours, theirs = m.assignment, ck_ref.assignment
                return (
                    m.stable_in() and bool(ours) and bool(theirs) and not ours & theirs
                    and ours | theirs == partitions("t", 6)
                )

            await wait_until(split, f"slipstream and confluent-kafka to split the topic ({strategy})")
            assert len(m.assignment) == 3
            assert ck.errors == []
            if strategy == "cooperative-sticky":
                assert "lost" not in m.recorder.kinds()
                # cooperative: we kept three partitions all along and revoked only the others
                revoked = [tps for kind, tps in m.recorder.events if kind == "revoked"]
                assert revoked == [sorted(ck.assignment)]
        finally:
            if ck is not None:
                await ck.close()
            await m.close()
        assert ledger.violations == []


async def test_membership_core_and_offsets_without_a_group_id_are_refused() -> None:
    with pytest.raises(ValueError, match="group_id"):
        GroupMembership(Cluster("127.0.0.1:1"), ConsumerConfig())
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        ConsumerConfig(group_id="g", heartbeat_interval_ms=10000, session_timeout_ms=6000).validate()


# ---------------------------------------------------------------------------- churn


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
async def test_churn_never_assigns_a_partition_to_two_live_members(strategy: str) -> None:
    """Members killed, closed and replaced at random for a while; then the group settles
    with every partition owned exactly once, and no hook ever saw a double owner."""
    rng = random.Random(4)
    async with group_broker() as b:
        bs = b.bootstrap_servers
        await create_topic(bs, "t", 12)
        ledger = Ledger()
        members: list[Member] = []
        counter = 0

        def new() -> None:
            nonlocal counter
            counter += 1
            m = Member(bs, f"m{counter}", ledger, ["t"], partition_assignment_strategy=[strategy],
                       session_timeout_ms=1000, rebalance_timeout_ms=2000)
            members.append(m)
            m.membership.start()

        for _ in range(4):
            new()
        try:
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                await asyncio.sleep(rng.uniform(0.05, 0.4))
                victim = rng.choice(members)
                action = rng.choice(["kill", "close", "keep"])
                if action != "keep":
                    members.remove(victim)
                    await (victim.kill() if action == "kill" else victim.close())
                    new()
            await all_stable(members, partitions("t", 12))
            assert sorted(len(m.assignment) for m in members) == [3, 3, 3, 3]
            assert all(m.membership.error is None for m in members)
        finally:
            for m in members:
                await m.close()
        assert ledger.violations == []
