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
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import GROUP_BROKER_ARGS, BrokerProcess, _make_broker
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

CONSUMER_BROKER_ARGS = (
    *GROUP_BROKER_ARGS,
    "--set", f"group.consumer.session.timeout.ms={SESSION_MS}",
    "--set", "group.consumer.heartbeat.interval.ms=500",
)


@pytest.fixture
def consumer_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from _make_broker(tmp_path, CONSUMER_BROKER_ARGS)


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


def test_mixed_group_is_refused_as_kafka_does(consumer_broker, topic_name):
    """A consumer-protocol member cannot join a classic group that has members (Kafka 4
    would upgrade the group online; Slipstream answers GROUP_ID_NOT_FOUND, as Kafka does when
    it does not convert). The classic member is not disturbed."""
    from conformance_helpers import ck_create_topic

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
