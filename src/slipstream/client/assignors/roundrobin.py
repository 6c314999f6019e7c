"""The "roundrobin" assignor (Kafka's ``RoundRobinAssignor``).

All partitions of all subscribed topics, sorted by topic then partition, are
dealt to the members in ``MemberInfo`` order (static members by
``group.instance.id``, then dynamic members by member id) as a circle: each
partition goes to the next member in the circle that subscribes to its topic,
members in between are skipped (and keep their turn position). With identical
subscriptions the counts differ by at most one; with differing subscriptions
the result can be unbalanced, exactly as in the Java client.
"""

from __future__ import annotations

from collections.abc import Mapping

from .types import (
    Assignment,
    EagerAssignor,
    Subscription,
    sorted_members,
    subscribed_partition_counts,
)


class RoundRobinAssignor(EagerAssignor):
    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignment:
        return roundrobin_assign(partitions_per_topic, subscriptions)


def roundrobin_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    counts = subscribed_partition_counts(partitions_per_topic, subscriptions)
    members = sorted_members(subscriptions)
    topics_of = {m: frozenset(subscriptions[m].topics) for m in members}
    assignment: Assignment = {m: [] for m in subscriptions}
    pos = 0  # index of the member whose turn it is
    for topic in sorted(counts):
        for partition in range(counts[topic]):
            # every topic in ``counts`` has at least one subscriber, so this ends
            while topic not in topics_of[members[pos]]:
                pos = (pos + 1) % len(members)
            assignment[members[pos]].append((topic, partition))
            pos = (pos + 1) % len(members)
    return assignment
