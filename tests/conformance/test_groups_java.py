"""Consumer groups with the Apache Kafka Java client (kafka-clients 3.9.1, classic protocol).

Members are ``SlipstreamDriver group-consume`` processes (range and
cooperative-sticky); the scenario is test_groups_harness.group_scenario: three
members join a 6-partition topic while a producer writes, one closes (SIGTERM:
commit, LeaveGroup), one is killed (SIGKILL of the JVM) and expires, a new one
joins; then kill -9 of the broker, and the group resumes from its offsets.
"""

from __future__ import annotations

import uuid

import pytest
from test_groups_harness import group_scenario, live_broker_crash_scenario, start_java_member

pytestmark = [pytest.mark.conformance, pytest.mark.java]


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_group_lifecycle(group_broker, java_driver, topic_name, assignor):
    group = f"g-java-{assignor}-{uuid.uuid4().hex[:8]}"

    def launch(name):
        return start_java_member(java_driver, name, group_broker.bootstrap, topic_name, group, assignor=assignor)

    result = group_scenario(group_broker, topic_name, group, launch, protocol=assignor)
    print(assignor, result)


def test_group_survives_broker_kill9_under_live_members(group_broker, java_driver, topic_name):
    group = f"g-java-crash-{uuid.uuid4().hex[:8]}"

    def launch(name):
        return start_java_member(java_driver, name, group_broker.bootstrap, topic_name, group,
                                 assignor="cooperative-sticky")

    print(live_broker_crash_scenario(group_broker, topic_name, group, launch))
