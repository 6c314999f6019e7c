"""ConsumerGroup marks and claim iterators: what the per-message fast paths must keep.

Marks are kept raw per partition and turned into ``OffsetAndMetadata`` only when
read (``marked()``, ``pending_commits()``) or committed; a claim's ``messages()``
ends on its own ``stopped`` flag, whichever task (or context) drives it.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest
from client_helpers import DEADLINE_S, fast_consumer_settings, group_broker, wait_until
from confluent_kafka import Producer as CkProducer

from slipstream.client.admin import Admin
from slipstream.client.assignors import TopicPartition
from slipstream.client.cluster import Cluster
from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler
from slipstream.client.consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from slipstream.client.consumer_messages import ConsumerMessage
from slipstream.client.membership_types import Generation
from slipstream.client.offsets import OffsetAndMetadata

pytestmark = pytest.mark.timeout(60)

COOPERATIVE = fast_consumer_settings(
    max_poll_interval_ms=10000,
    auto_commit_interval_ms=600_000,
    partition_assignment_strategy=["cooperative-sticky"],
)


def msg(topic: str, partition: int, offset: int, epoch: int = -1) -> ConsumerMessage:
    return ConsumerMessage(topic, partition, offset, None, b"v", leader_epoch=epoch)


async def test_marks_are_read_and_committed_as_offset_and_metadata() -> None:
    group = ConsumerGroup("127.0.0.1:1", "g-marks")
    try:
        gen = Generation(3, "m-1", "range", "m-1", (("t", 0), ("t", 1)))
        session = ConsumerGroupSession(group, gen)
        for tp in gen.assignment:
            session._claims[tp] = ConsumerGroupClaim(session, tp[0], tp[1], 0)

        session.mark_message(msg("t", 0, 4, epoch=7))
        session.mark_message(msg("t", 0, 2, epoch=9))  # lower: ignored
        session.mark_message(msg("u", 0, 1))  # not claimed: ignored
        session.mark_offset("t", 1, 10, "meta")
        session.mark_offset("t", 1, 8, "older")  # lower: ignored
        assert session.marked() == {
            ("t", 0): OffsetAndMetadata(5, None, 7),
            ("t", 1): OffsetAndMetadata(10, "meta", -1),
        }
        assert session.pending_commits() == session.marked()
        session.mark_message(msg("t", 0, 5, epoch=8), "note")
        assert session.marked()[("t", 0)] == OffsetAndMetadata(6, "note", 8)

        sent: list[tuple[dict[TopicPartition, OffsetAndMetadata], Generation | None]] = []

        async def commit(offsets: dict[TopicPartition, OffsetAndMetadata], generation: Any) -> None:
            sent.append((dict(offsets), generation))

        group._offsets.commit = commit  # type: ignore[method-assign,assignment]
        await session.commit()
        assert sent == [
            (
                {("t", 0): OffsetAndMetadata(6, "note", 8), ("t", 1): OffsetAndMetadata(10, "meta")},
                gen,
            )
        ]
        assert session.pending_commits() == {}
        await session.commit()  # nothing pending: nothing sent
        assert len(sent) == 1

        session.mark_message(msg("t", 1, 10))
        assert session.pending_commits() == {("t", 1): OffsetAndMetadata(11, None, -1)}
        await session._forget([("t", 1)])
        del session._claims[("t", 1)]
        assert session.pending_commits() == {}
        session.mark_message(msg("t", 1, 20))  # handed over: ignored
        assert ("t", 1) not in session.marked()
    finally:
        await group.close()


async def test_logged_marks_fold_to_the_highest_offset_per_partition_and_claim() -> None:
    group = ConsumerGroup("127.0.0.1:1", "g-fold")
    try:
        gen = Generation(1, "m-1", "range", "m-1", (("t", 0), ("t", 1)))
        session = ConsumerGroupSession(group, gen)
        for tp in gen.assignment:
            session._claims[tp] = ConsumerGroupClaim(session, tp[0], tp[1], 0)
        for offset in (20, 30, 25):  # out of order within a run: the highest wins
            session.mark_message(msg("t", 0, offset, epoch=offset))
        session.mark_message(msg("t", 1, 7))
        session.mark_message(msg("t", 0, 26))  # a later run, lower than the mark: ignored
        session.mark_message(msg("x", 0, 99))  # never claimed: ignored
        assert session.marked() == {
            ("t", 0): OffsetAndMetadata(31, None, 30),
            ("t", 1): OffsetAndMetadata(8, None, -1),
        }
        session.mark_message(msg("t", 1, 9))
        session.mark_offset("t", 1, 9)  # not above the logged mark of 10
        assert session.marked()[("t", 1)] == OffsetAndMetadata(10, None, -1)
        # A partition's marks made while it was not claimed stay ignored once it is.
        session.mark_message(msg("t", 2, 5))
        group._add_claims(session, {("t", 2): 0})  # not owned: no claim is created
        session._owned.add(("t", 2))
        group._add_claims(session, {("t", 2): 0})
        assert ("t", 2) in session._claims and ("t", 2) not in session.marked()
        session.mark_message(msg("t", 2, 6))
        assert session.marked()[("t", 2)] == OffsetAndMetadata(7, None, -1)
    finally:
        await group.close()


# ---------------------------------------------------------------------------- with a broker


def _produce(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    p = CkProducer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5})
    for partition in range(partitions):
        for i in range(n):
            p.produce(topic, value=f"{partition}:{i}".encode(), partition=partition)
    assert p.flush(15) == 0


async def test_revoked_claim_iterator_driven_outside_its_context_ends() -> None:
    """The iterator ends on the claim's own flag, even in a task that does not carry
    the claim's context (where ``session.ended`` cannot tell the claim is over)."""
    async with group_broker() as b:
        bs = b.bootstrap_servers
        cluster = Cluster(bs)
        try:
            await Admin(cluster).create_topic("t", 2)
        finally:
            await cluster.close()
        await asyncio.to_thread(_produce, bs, "t", 2, 5)
        got: dict[int, list[int]] = {0: [], 1: []}
        ended: dict[int, bool] = {}

        class Handler(ConsumerGroupHandler):
            async def consume_claim(
                self, session: ConsumerGroupSession, claim: ConsumerGroupClaim
            ) -> None:
                async def drive() -> None:
                    async for m in claim.messages():
                        got[m.partition].append(m.offset)
                        session.mark_message(m)
                    ended[claim.partition] = True

                # A fresh context: no per-claim context variable in the driving task.
                await asyncio.get_running_loop().create_task(
                    drive(), context=contextvars.Context()
                )

        group = ConsumerGroup(bs, "g-ctx", rebalance_timeout_ms=30_000, **COOPERATIVE)

        async def run() -> None:
            while not group.closed:
                await group.consume(["t"], Handler())

        task = asyncio.create_task(run())
        try:
            await wait_until(lambda: len(got[0]) == 5 and len(got[1]) == 5, "10 messages")
            # The revocation must not wait for the rebalance timeout (30 s) to end the claim:
            # half of it is a hang, not a slow machine.
            await asyncio.wait_for(group._membership.listener.on_partitions_revoked([("t", 1)]), 15)
            assert ended == {1: True}
            session = group.session
            assert session is not None and not session.ended
            marked = session.marked()
            assert marked.keys() == {("t", 0)} and marked[("t", 0)].offset == 5
        finally:
            await group.close()
            await asyncio.wait_for(task, DEADLINE_S)
        assert ended == {0: True, 1: True}
