"""Mixed consumer groups: Slipstream's ConsumerGroup with confluent-kafka and with the Java client.

Each group mixes members of Slipstream's handler-API client (processes of
test_client_churn's member program) with confluent-kafka members
(test_groups_harness) or Java kafka-clients classic members (the driver's
``group-consume``), all using the same assignor (range, cooperative-sticky).
Members join in two waves, one foreign member then leaves gracefully and one
of ours is killed (its session expires) while Slipstream's AIOProducer writes.
At every stable point the broker's DescribeGroups (confluent AdminClient) shows
the expected members with assignments that partition the topic, each member
owning what the broker says. At the end: every acked record processed, the
harness's ownership/processing checks, commits never backwards, and the
committed offsets equal the log end offsets.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from test_client_churn import SlipProducer, start_slipstream_member, verify_end
from test_groups_harness import (
    TOPIC_PARTITIONS,
    Member,
    admin_client,
    assignment_of,
    mono_ns,
    progressed,
    start_java_member,
    start_python_member,
    wait_stable,
)

pytestmark = [pytest.mark.conformance]

ASSIGNORS = ["range", "cooperative-sticky"]


def mixed_scenario(broker: Any, topic: str, group: str, assignor: str,
                   foreign: Callable[[str], Member]) -> dict[str, Any]:
    from conformance_helpers import ck_create_topic

    bootstrap = broker.bootstrap
    ck_create_topic(bootstrap, topic, partitions=TOPIC_PARTITIONS)
    admin = admin_client(bootstrap)
    members: list[Member] = []

    def ours(name: str) -> Member:
        m = start_slipstream_member(name, bootstrap, topic, group, assignor=assignor)
        members.append(m)
        return m

    def theirs(name: str) -> Member:
        m = foreign(name)
        members.append(m)
        return m

    def stable(live: list[Member]) -> Any:
        desc = wait_stable(admin, group, live, partitions=TOPIC_PARTITIONS, timeout=30)
        assert desc.partition_assignor == assignor, desc.partition_assignor
        sizes = sorted(len(assignment_of(md)) for md in desc.members)
        assert sizes[-1] - sizes[0] <= 1, f"unbalanced: {sizes}"
        return desc

    # The cap only bounds a runaway run: every step after a membership change needs new
    # records (progressed), and with Java members the steps take well over a minute.
    producer = SlipProducer(bootstrap, topic, rate=200, cap=60_000)
    try:
        s1, f1 = ours("s1"), theirs("f1")
        stable([s1, f1])
        producer.start()
        progressed([s1, f1], mono_ns())
        s2, f2 = ours("s2"), theirs("f2")
        t = mono_ns()
        stable([s1, f1, s2, f2])
        progressed([s1, f1, s2, f2], t)
        f1.close()  # graceful: commit, LeaveGroup
        t = mono_ns()
        stable([s1, s2, f2])
        progressed([s1, s2, f2], t)
        s1.kill()  # session expires on the broker
        t = mono_ns()
        stable([s2, f2])
        progressed([s2, f2], t)
        acks = producer.stop()
        report = verify_end(admin, bootstrap, group, topic, members, acks,
                            cooperative=assignor == "cooperative-sticky", partitions=TOPIC_PARTITIONS)
        return {"records": len(acks), "report": report}
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_mixed_group_with_confluent(group_broker, topic_name, assignor):
    group = f"g-mix-ck-{assignor}-{uuid.uuid4().hex[:8]}"

    def foreign(name: str) -> Member:
        return start_python_member("confluent", name, group_broker.bootstrap, topic_name, group, assignor=assignor)

    print(assignor, mixed_scenario(group_broker, topic_name, group, assignor, foreign))


@pytest.mark.java
@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_mixed_group_with_java(group_broker, java_driver, topic_name, assignor):
    group = f"g-mix-java-{assignor}-{uuid.uuid4().hex[:8]}"

    def foreign(name: str) -> Member:
        return start_java_member(java_driver, name, group_broker.bootstrap, topic_name, group, assignor=assignor)

    print(assignor, mixed_scenario(group_broker, topic_name, group, assignor, foreign))
