"""The ``uniform`` assignor (Kafka's default server-side assignor): sticky and balanced.

Homogeneous groups (every member subscribes to the same topics) get a minimal-move
balanced assignment: each member keeps what it holds up to its quota (P // N, plus
one for the P % N members holding the most), the rest is dealt out. Heterogeneous
groups are handled in ``uniform_heterogeneous.py``. Not rack-aware: like Kafka's
uniform assignor, it ignores the members' racks.
"""

from __future__ import annotations

from ..partitions import TopicId
from .base import GroupAssignment, GroupSpec, retained_partitions, to_assignment
from .uniform_heterogeneous import assign_heterogeneous

UNIFORM_ASSIGNOR_NAME = "uniform"


class UniformAssignor:
    @property
    def name(self) -> str:
        return UNIFORM_ASSIGNOR_NAME

    def assign(self, spec: GroupSpec) -> GroupAssignment:
        if not spec.members:
            return {}
        if spec.is_homogeneous():
            return assign_homogeneous(spec)
        return assign_heterogeneous(spec)


def assign_homogeneous(spec: GroupSpec) -> GroupAssignment:
    member_ids = spec.sorted_member_ids()
    topic_ids = sorted(spec.members[member_ids[0]].subscribed_topic_ids)
    all_partitions = [(t, p) for t in topic_ids for p in range(spec.partition_count(t))]
    if not all_partitions:
        return {m: {} for m in member_ids}

    claimed: dict[TopicId, set[int]] = {}
    kept = {m: retained_partitions(spec, spec.members[m], claimed) for m in member_ids}

    # Quotas: the members holding the most get the extra partitions, which keeps the
    # most partitions where they are.
    min_quota, extra = divmod(len(all_partitions), len(member_ids))
    by_holding = sorted(member_ids, key=lambda m: (-len(kept[m]), m))
    quota = {m: min_quota + (1 if i < extra else 0) for i, m in enumerate(by_holding)}

    owned: dict[TopicId, set[int]] = {}
    result: dict[str, list[tuple[TopicId, int]]] = {}
    for m in member_ids:
        result[m] = kept[m][: quota[m]]
        for t, p in result[m]:
            owned.setdefault(t, set()).add(p)

    free = iter([(t, p) for t, p in all_partitions if p not in owned.get(t, ())])
    for m in member_ids:
        missing = quota[m] - len(result[m])
        result[m].extend(next(free) for _ in range(missing))
    return {m: to_assignment(result[m]) for m in member_ids}
