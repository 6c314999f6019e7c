"""Consumer groups with aiokafka (eager protocol): range and roundrobin.

Same scenario as test_groups_confluent (see test_groups_harness.group_scenario);
each member is an asyncio program in a process of its own.
"""

from __future__ import annotations

import functools
import uuid

import pytest
from test_groups_harness import group_scenario, start_python_member

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_group_lifecycle(group_broker, topic_name, assignor):
    group = f"g-aio-{assignor}-{uuid.uuid4().hex[:8]}"
    launch = functools.partial(start_python_member, "aiokafka", bootstrap=group_broker.bootstrap,
                               topic=topic_name, group=group, assignor=assignor)
    result = group_scenario(group_broker, topic_name, group, lambda name: launch(name), protocol=assignor)
    print(assignor, result)
