"""The server-side assignor interface: what an assignor is given and must return."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import PartitionAssignorError
from ..partitions import PartitionMap, TopicId


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: TopicId
    name: str
    partition_count: int


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as an assignor sees it."""

    member_id: str
    subscribed_topic_ids: frozenset[TopicId]
    # The member's current target assignment: the base a sticky assignor keeps.
    current_assignment: PartitionMap = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: Mapping[str, MemberSubscription]
    # Metadata of (at least) every subscribed topic.
    topics: Mapping[TopicId, TopicMetadata]

    def is_homogeneous(self) -> bool:
        return len({m.subscribed_topic_ids for m in self.members.values()}) <= 1

    def partition_count(self, topic_id: TopicId) -> int:
        topic = self.topics.get(topic_id)
        if topic is None:
            raise PartitionAssignorError(
                f"members are subscribed to topic {topic_id}, which is not in the topic metadata"
            )
        return topic.partition_count

    def sorted_member_ids(self) -> list[str]:
        return sorted(self.members)


GroupAssignment = dict[str, dict[TopicId, frozenset[int]]]


class PartitionAssignor(Protocol):
    """Computes a group's target assignment. Must be deterministic: the same spec
    gives the same assignment; every member of the spec gets an entry."""

    @property
    def name(self) -> str: ...

    def assign(self, spec: GroupSpec) -> GroupAssignment: ...


def retained_partitions(
    spec: GroupSpec, member: MemberSubscription, claimed: dict[TopicId, set[int]]
) -> list[tuple[TopicId, int]]:
    """The partitions of ``member``'s current assignment it may keep, in sorted order:
    still subscribed, still existing, and not already kept by an earlier member (the
    first claim wins, so a corrupt input can never give a partition two owners).
    Marks them in ``claimed``."""
    kept: list[tuple[TopicId, int]] = []
    for topic_id in sorted(member.current_assignment):
        if topic_id not in member.subscribed_topic_ids or topic_id not in spec.topics:
            continue
        count = spec.topics[topic_id].partition_count
        taken = claimed.setdefault(topic_id, set())
        for partition in sorted(member.current_assignment[topic_id]):
            if partition < count and partition not in taken:
                taken.add(partition)
                kept.append((topic_id, partition))
    return kept


def to_assignment(pairs: list[tuple[TopicId, int]]) -> dict[TopicId, frozenset[int]]:
    out: dict[TopicId, set[int]] = {}
    for topic_id, partition in pairs:
        out.setdefault(topic_id, set()).add(partition)
    return {t: frozenset(p) for t, p in out.items()}
