"""The ``range`` assignor: per topic, contiguous co-partitioned ranges.

For each topic, its subscribers in a fixed order take consecutive ranges; the first
``partitions % subscribers`` take one extra. The order is static members by instance
id, then dynamic members by member id, so topics with the same partition count and
subscribers are co-partitioned (a member gets the same partition numbers of each).
Like Kafka's server-side RangeAssignor since KAFKA-16944, the result does not depend
on the current assignment: stickiness comes from instance ids, which survive a
restart, so a group of static members keeps its assignment while its membership and
topics stay the same.
"""

from __future__ import annotations

from ..partitions import TopicId
from .base import GroupAssignment, GroupSpec

RANGE_ASSIGNOR_NAME = "range"


class RangeAssignor:
    @property
    def name(self) -> str:
        return RANGE_ASSIGNOR_NAME

    def assign(self, spec: GroupSpec) -> GroupAssignment:
        def order(member_id: str) -> tuple[int, str]:
            instance_id = spec.members[member_id].instance_id
            return (0, instance_id) if instance_id is not None else (1, member_id)

        ordered = sorted(spec.members, key=order)
        subscribers: dict[TopicId, list[str]] = {}
        for m in ordered:
            for t in sorted(spec.members[m].subscribed_topic_ids):
                subscribers.setdefault(t, []).append(m)

        result: GroupAssignment = {m: {} for m in ordered}
        for t, members in subscribers.items():
            quota, extra = divmod(spec.partition_count(t), len(members))
            start = 0
            for i, m in enumerate(members):
                end = start + quota + (1 if i < extra else 0)
                if end > start:
                    result[m][t] = frozenset(range(start, end))
                start = end
        return result
