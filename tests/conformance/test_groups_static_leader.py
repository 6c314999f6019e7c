"""A static classic leader restarted while partitions were added (issue 18's static-leader
hazard), with Slipstream's client against a broker process.

The leader closes (a static member sends no LeaveGroup) and comes back with the same
group.instance.id within the session timeout; meanwhile the topic grows. The
coordinator hands the returning leader its old assignment and tells it to skip the
assignment (JoinGroup v9, KIP-814), so nobody would ever assign the new partitions:
its metadata watch starts from today's counts. The client checks the inherited
assignment (DescribeGroups) and rebalances, so the new partitions get owners. The
requests are Kafka's own; ``SLIPSTREAM_CONFORMANCE_BROKER_CMD`` runs this against
another broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest
from conformance_helpers import ck_create_topic, wait_for_partitions

from slipstream.client.assignors import TopicPartition
from slipstream.client.classic_membership import GroupMembership
from slipstream.client.cluster import Cluster
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.rebalance_listener import RebalanceListener
from slipstream.testing.broker_process import BrokerProcess

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

SESSION_MS = 10_000
DEADLINE_S = 45.0


class StaticMember(RebalanceListener):
    """One Slipstream consumer with a group.instance.id; records (generation, partitions)
    for every assignment it takes."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str) -> None:
        self.cluster = Cluster(bootstrap, client_id=instance)
        config = ConsumerConfig(
            bootstrap_servers=bootstrap, client_id=instance, group_id=group, group_instance_id=instance,
            partition_assignment_strategy=["range"], session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=200, retry_backoff_ms=20, retry_backoff_max_ms=200,
        )
        self.membership = GroupMembership(self.cluster, config, listener=self)
        self.membership.subscribe([topic])
        self.assignments: list[tuple[int, frozenset[TopicPartition]]] = []

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.assignments.append((self.membership.core.generation_id, self.membership.assignment))

    def settled(self) -> bool:
        return self.membership.generation is not None and not self.membership.rejoin_needed

    async def close(self) -> None:
        await self.membership.close()  # static: no LeaveGroup, the group keeps its place
        await self.cluster.close()


async def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {DEADLINE_S}s waiting for {what}")
        await asyncio.sleep(0.05)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=20)
    wait_for_partitions(bootstrap, topic, total)


async def restart_static_leader(bootstrap: str, topic: str, *, grow: bool) -> None:
    """Two static members; the leader restarts, while the topic grows from 2 to 4
    partitions (``grow``) or not."""
    group = f"g-static-leader-{uuid.uuid4().hex[:8]}"
    leader = StaticMember(bootstrap, group, topic, "host-1")
    follower = StaticMember(bootstrap, group, topic, "host-2")
    members = [leader, follower]
    try:
        await leader.membership.ensure_active(DEADLINE_S)  # first in: the leader
        await follower.membership.ensure_active(DEADLINE_S)
        await wait_until(
            lambda: all(m.settled() for m in members)
            and leader.membership.assignment | follower.membership.assignment == {(topic, 0), (topic, 1)},
            "both members to own the topic's 2 partitions",
        )
        assert leader.membership.core.is_leader
        generation, owned = leader.membership.core.generation_id, leader.membership.assignment

        follower_rebalances = follower.membership.rebalances
        await leader.close()
        if grow:
            await asyncio.to_thread(add_partitions, bootstrap, topic, 4)
        back = StaticMember(bootstrap, group, topic, "host-1")  # the same application, restarted
        members = [back, follower]
        await back.membership.ensure_active(DEADLINE_S)

        # It came back as the leader of the same generation with its old partitions: the
        # coordinator told it to skip the assignment.
        assert back.assignments[0] == (generation, owned)
        assert back.membership.core.is_leader
        if not grow:
            # The inherited assignment covers everything: no rebalance (static membership's point).
            await asyncio.sleep(1.0)  # several heartbeats: the follower would have heard of one
            assert back.settled() and back.assignments == [(generation, owned)]
            core = back.membership.core
            assert core.leader.skip_assignment and not core.assignment_unchecked  # checked
            assert follower.settled() and follower.membership.rebalances == follower_rebalances
            return
        everything = {(topic, p) for p in range(4)}
        await wait_until(
            lambda: all(m.settled() for m in members)
            and back.membership.assignment | follower.membership.assignment == everything,
            "the partitions added while the leader was away to be assigned",
        )
        assert not back.membership.assignment & follower.membership.assignment
        assert back.membership.core.generation_id > generation  # by a rebalance
    finally:
        for m in members:
            await m.close()


def test_a_static_leader_back_after_partitions_were_added_gets_them_assigned(
    group_broker: BrokerProcess, topic_name: str
) -> None:
    ck_create_topic(group_broker.bootstrap, topic_name, partitions=2)
    asyncio.run(restart_static_leader(group_broker.bootstrap, topic_name, grow=True))


def test_a_static_leader_back_to_an_unchanged_topic_causes_no_rebalance(
    group_broker: BrokerProcess, topic_name: str
) -> None:
    ck_create_topic(group_broker.bootstrap, topic_name, partitions=2)
    asyncio.run(restart_static_leader(group_broker.bootstrap, topic_name, grow=False))
