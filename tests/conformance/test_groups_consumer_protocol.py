"""Consumer groups with the consumer (KIP-848) protocol: confluent-kafka and the Java client.

The same scenario as the classic groups (test_groups_harness.group_scenario):
three members join a 6-partition topic while a producer writes; one closes, one
is killed and its session expires on the broker, a new one joins; no partition
is ever owned by two members, every record is processed, commits are what was
processed, and after kill -9 of the broker the group resumes from them. The
broker owns the session timeout and the heartbeat interval with this protocol,
so the test broker sets them (group.consumer.*).
"""

from __future__ import annotations

import functools
import time
import uuid

import pytest
from test_groups_harness import (
    SESSION_MS,
    TOPIC_PARTITIONS,
    admin_client,
    assignment_of,
    check_exclusive_ownership,
    describe_group,
    group_scenario,
    ownership_intervals,
    start_java_member,
    start_python_member,
    wait_stable,
    wait_until,
)

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_confluent_group_lifecycle(consumer_broker, topic_name, assignor):
    group = f"g-ck848-{assignor}-{uuid.uuid4().hex[:8]}"
    launch = functools.partial(start_python_member, "confluent", bootstrap=consumer_broker.bootstrap,
                               topic=topic_name, group=group, assignor=assignor, group_protocol="consumer")
    print(group_scenario(consumer_broker, topic_name, group, lambda name: launch(name), protocol=assignor))


def test_java_group_lifecycle(consumer_broker, topic_name, java_driver):
    group = f"g-java848-{uuid.uuid4().hex[:8]}"
    launch = functools.partial(start_java_member, java_driver, bootstrap=consumer_broker.bootstrap,
                               topic=topic_name, group=group, assignor="uniform", group_protocol="consumer")
    print(group_scenario(consumer_broker, topic_name, group, lambda name: launch(name), protocol="uniform"))


def test_ten_confluent_members_share_the_topic(consumer_broker, topic_name):
    from conformance_helpers import ck_create_topic

    group = f"g-ck848-ten-{uuid.uuid4().hex[:8]}"
    ck_create_topic(consumer_broker.bootstrap, topic_name, partitions=20)
    members = [
        start_python_member("confluent", f"m{i}", consumer_broker.bootstrap, topic_name, group,
                            group_protocol="consumer")
        for i in range(10)
    ]
    try:
        admin = admin_client(consumer_broker.bootstrap)
        desc = wait_stable(admin, group, members, partitions=20, timeout=60)
        assert sorted(len(assignment_of(md)) for md in desc.members) == [2] * 10
        for m in members[:5]:
            m.close()
        wait_stable(admin, group, members[5:], partitions=20, timeout=60)
        check_exclusive_ownership(ownership_intervals(members))
    finally:
        for m in members:
            m.reap()


@pytest.fixture
def no_migration_broker(tmp_path):
    """A consumer_broker with group.consumer.migration.policy=disabled."""
    from slipstream.testing.broker_process import CONSUMER_BROKER_ARGS, running_broker

    yield from running_broker(tmp_path, (*CONSUMER_BROKER_ARGS, "--set", "group.consumer.migration.policy=disabled"))


def test_mixed_group_is_refused_as_kafka_does(no_migration_broker, topic_name):
    """With group.consumer.migration.policy=disabled a consumer-protocol member cannot join a
    classic group that has members: GROUP_ID_NOT_FOUND, as Kafka answers when it does not
    convert (the default policy upgrades the group: test_groups_migration.py). The classic
    member is not disturbed."""
    from conformance_helpers import ck_create_topic

    consumer_broker = no_migration_broker
    group = f"g-mixed-{uuid.uuid4().hex[:8]}"
    ck_create_topic(consumer_broker.bootstrap, topic_name, partitions=TOPIC_PARTITIONS)
    classic = start_python_member("confluent", "classic", consumer_broker.bootstrap, topic_name, group)
    modern = None
    try:
        admin = admin_client(consumer_broker.bootstrap)
        wait_stable(admin, group, [classic])
        modern = start_python_member("confluent", "modern", consumer_broker.bootstrap, topic_name, group,
                                     group_protocol="consumer")
        wait_until(lambda: any("group id does not exist" in str(e)
                               for e in modern.snapshot() if e["event"] == "client_error"), 20,
                   lambda: f"the consumer-protocol member to be refused: {modern.diag()}")
        time.sleep(1)
        desc = describe_group(admin, group)
        assert [md.client_id for md in desc.members] == ["classic"]
        assert assignment_of(desc.members[0]) == set(range(TOPIC_PARTITIONS))
        assert modern.owned() == set()
    finally:
        classic.reap()
        if modern is not None:
            modern.reap()


def test_static_member_restart_keeps_its_partitions(consumer_broker, topic_name):
    """A static member (group.instance.id) that closes leaves with epoch -2; restarted within
    the session timeout it gets the same partitions back and the other member never notices."""
    from conformance_helpers import ck_create_topic

    group = f"g-static848-{uuid.uuid4().hex[:8]}"
    ck_create_topic(consumer_broker.bootstrap, topic_name, partitions=TOPIC_PARTITIONS)

    def launch(name: str, instance: str):  # type: ignore[no-untyped-def]
        return start_python_member("confluent", name, consumer_broker.bootstrap, topic_name, group,
                                   group_protocol="consumer", instance_id=instance)

    a, b = launch("a", "instance-a"), launch("b", "instance-b")
    members = [a, b]
    try:
        admin = admin_client(consumer_broker.bootstrap)
        desc = wait_stable(admin, group, [a, b])
        before = {md.client_id: assignment_of(md) for md in desc.members}
        b_events = len(b.snapshot())
        a.close()
        a2 = launch("a2", "instance-a")
        members.append(a2)
        wait_until(lambda: a2.owned() == before["a"], 20, lambda: f"a2 to get a's partitions back: {a2.diag()}")
        # b kept its partitions throughout: no revocation, no new assignment.
        assert not [e for e in b.snapshot()[b_events:] if e["event"] in ("assigned", "revoked", "lost")]
        assert b.owned() == before["b"]
        check_exclusive_ownership(ownership_intervals(members))
    finally:
        for m in members:
            m.reap()


def test_churn_keeps_ownership_exclusive_and_commits_monotonic(consumer_broker, topic_name):
    """Members join, close and are killed at random while a producer writes: no partition is
    ever owned by two live members, every acked record is processed, commits never go back."""
    import random

    from conformance_helpers import ck_create_topic
    from test_groups_harness import PacedProducer, finish_and_verify

    rng = random.Random(848)
    group = f"g-churn848-{uuid.uuid4().hex[:8]}"
    ck_create_topic(consumer_broker.bootstrap, topic_name, partitions=TOPIC_PARTITIONS)
    admin = admin_client(consumer_broker.bootstrap)
    members = []
    live = []
    counter = [0]

    def launch():  # type: ignore[no-untyped-def]
        counter[0] += 1
        m = start_python_member("confluent", f"c{counter[0]}", consumer_broker.bootstrap, topic_name, group,
                                group_protocol="consumer")
        members.append(m)
        live.append(m)
        return m

    producer = PacedProducer(consumer_broker.bootstrap, topic_name).start()
    try:
        for _ in range(3):
            launch()
        wait_stable(admin, group, live, timeout=30)
        for _ in range(8):
            action = rng.choice(["join", "close", "kill"] if len(live) > 1 else ["join"])
            if action == "join":
                launch()
            elif action == "close":
                live.pop(rng.randrange(len(live))).close()
            else:
                live.pop(rng.randrange(len(live))).kill()
            time.sleep(rng.uniform(0.2, 1.5))
        wait_stable(admin, group, live, timeout=SESSION_MS / 1000 + 30)
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, consumer_broker, group, topic_name, members, acks)
        print(report)
        # Commits of the whole group, in time order, never move a partition backwards.
        commits = sorted((e["t"], m.name, e["offsets"]) for m in members for e in m.snapshot()
                         if e["event"] == "committed")
        high: dict[str, int] = {}
        for t, name, offsets in commits:
            for p, offset in offsets.items():
                assert offset >= high.get(p, -1), f"{name} committed partition {p} back to {offset} at {t}"
                high[p] = offset
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


def test_group_survives_broker_kill9_with_its_epochs(consumer_broker, topic_name):
    """kill -9 under two live consumer-protocol members: the restarted broker has the group's
    epoch and assignments from __consumer_offsets, the members carry on without a rebalance,
    nothing is lost and nothing committed is delivered again."""
    from test_groups_harness import live_broker_crash_scenario

    group = f"g-crash848-{uuid.uuid4().hex[:8]}"
    launch = functools.partial(start_python_member, "confluent", bootstrap=consumer_broker.bootstrap,
                               topic=topic_name, group=group, group_protocol="consumer")
    result = live_broker_crash_scenario(consumer_broker, topic_name, group, lambda name: launch(name))
    print(result)
    assert result["rebalance_events_after_crash"] == 0, result


def test_epochs_and_assignments_are_replayed_after_kill9(consumer_broker, topic_name):
    from confluent_kafka.admin import AdminClient  # noqa: F401  (the admin below is confluent's)
    from conformance_helpers import ck_create_topic

    group = f"g-replay848-{uuid.uuid4().hex[:8]}"
    ck_create_topic(consumer_broker.bootstrap, topic_name, partitions=TOPIC_PARTITIONS)
    members = [start_python_member("confluent", f"r{i}", consumer_broker.bootstrap, topic_name, group,
                                   group_protocol="consumer") for i in range(3)]
    try:
        admin = admin_client(consumer_broker.bootstrap)
        wait_stable(admin, group, members)
        before = _consumer_view(consumer_broker.bootstrap, group)
        for m in members:
            m.kill()
        consumer_broker.kill9()
        consumer_broker.start()
        after = _consumer_view(consumer_broker.bootstrap, group)
        assert after == before
    finally:
        for m in members:
            m.reap()


def _consumer_view(bootstrap: str, group: str) -> tuple:
    """(group epoch, target epoch, {member: (epoch, assignment, target)}) from ConsumerGroupDescribe."""
    import asyncio

    from slipstream.client.admin import Admin
    from slipstream.client.cluster import Cluster

    async def describe() -> tuple:
        cluster = Cluster(bootstrap)
        try:
            (desc,) = await Admin(cluster).describe_consumer_groups([group])
        finally:
            await cluster.close()
        assert desc is not None
        members = {m.member_id: (m.member_epoch, m.assignment, m.target_assignment) for m in desc.members}
        return desc.group_epoch, desc.target_assignment_epoch, members

    return asyncio.run(describe())
