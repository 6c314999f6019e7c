"""Consumer groups with confluent-kafka (librdkafka): range, roundrobin, cooperative-sticky.

The scenario (test_groups_harness.group_scenario): three members join a
6-partition topic while a producer writes; one closes, one is killed and its
session expires, a new one joins; ownership never overlaps, every record is
processed, the committed offsets are what was processed, and after kill -9 of
the broker the group resumes from them.
"""

from __future__ import annotations

import functools
import uuid

import pytest
from test_groups_harness import group_scenario, live_broker_crash_scenario, start_python_member

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_group_lifecycle(group_broker, topic_name, assignor):
    group = f"g-ck-{assignor}-{uuid.uuid4().hex[:8]}"
    launch = functools.partial(start_python_member, "confluent", bootstrap=group_broker.bootstrap,
                               topic=topic_name, group=group, assignor=assignor)
    result = group_scenario(group_broker, topic_name, group, lambda name: launch(name), protocol=assignor)
    print(assignor, result)


def test_group_survives_broker_kill9_under_live_members(group_broker, topic_name):
    group = f"g-ck-crash-{uuid.uuid4().hex[:8]}"
    launch = functools.partial(start_python_member, "confluent", bootstrap=group_broker.bootstrap,
                               topic=topic_name, group=group, assignor="range")
    print(live_broker_crash_scenario(group_broker, topic_name, group, lambda name: launch(name)))
