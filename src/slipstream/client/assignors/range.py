"""The "range" assignor (Kafka's ``RangeAssignor``, the Java client's default).

Per topic: the topic's subscribers in ``MemberInfo`` order (static members by
``group.instance.id``, then dynamic members by member id) each take a
contiguous run of partitions; with ``n`` partitions and ``m`` subscribers every
subscriber gets ``n // m`` and the first ``n % m`` get one more. Topics are
independent, so members subscribed to the same topics with the same partition
counts get co-partitioned ranges (partition i of every topic on one member).

Rack-aware range assignment (KIP-881) needs the replicas' racks, which this
interface does not carry; without them the Java client uses exactly this
non-rack-aware layout.
"""

from __future__ import annotations

from collections.abc import Mapping

from .types import (
    Assignment,
    EagerAssignor,
    Subscription,
    member_sort_key,
    subscribed_partition_counts,
)


class RangeAssignor(EagerAssignor):
    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignment:
        return range_assign(partitions_per_topic, subscriptions)


def range_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    counts = subscribed_partition_counts(partitions_per_topic, subscriptions)
    subscribers: dict[str, list[str]] = {t: [] for t in counts}
    for member, sub in subscriptions.items():
        for topic in set(sub.topics):
            if topic in subscribers:
                subscribers[topic].append(member)

    assignment: Assignment = {m: [] for m in subscriptions}
    for topic in sorted(counts):
        members = sorted(
            subscribers[topic],
            key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id),
        )
        per_member, extra = divmod(counts[topic], len(members))
        start = 0
        for i, member in enumerate(members):
            length = per_member + (1 if i < extra else 0)
            assignment[member].extend((topic, p) for p in range(start, start + length))
            start += length
    return assignment
