"""Compute a group's target assignment for a new group epoch.

The builder takes the group's members and their current targets, applies one
pending change (a member added, updated or removed), resolves each member's
subscription (topic names plus what its regex matched) to topic ids through the
topic metadata, and runs the assignor. The caller writes one target-assignment
record per member in ``changed`` and then the target-assignment epoch record
(``removed`` names the targets that belong to members no longer in the group).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .assignors.base import GroupSpec, MemberSubscription, PartitionAssignor, TopicMetadata
from .group import ConsumerGroup
from .member import ConsumerGroupMember
from .partitions import PartitionMap, TopicId, normalize


@dataclass(frozen=True, slots=True)
class TargetAssignmentResult:
    epoch: int
    # The full new target assignment, one entry per member.
    assignment: Mapping[str, PartitionMap]
    # Members whose target differs from their previous one (new members included).
    changed: Mapping[str, PartitionMap]
    # Members that had a target and are no longer in the group (removed or replaced).
    removed: frozenset[str]


class TargetAssignmentBuilder:
    def __init__(self, group_id: str, group_epoch: int, assignor: PartitionAssignor) -> None:
        self.group_id = group_id
        self.group_epoch = group_epoch
        self.assignor = assignor
        self._members: Mapping[str, ConsumerGroupMember] = {}
        self._static_members: Mapping[str, str] = {}
        self._target_assignment: Mapping[str, PartitionMap] = {}
        self._topics: Mapping[TopicId, TopicMetadata] = {}
        self._resolved_regexes: Mapping[str, frozenset[str]] = {}
        # member id -> new member, or None to remove it.
        self._updates: dict[str, ConsumerGroupMember | None] = {}

    @classmethod
    def for_group(
        cls,
        group: ConsumerGroup,
        group_epoch: int,
        assignor: PartitionAssignor,
        topics: Mapping[TopicId, TopicMetadata],
    ) -> TargetAssignmentBuilder:
        """A builder preloaded with ``group``'s members, targets, static members and regexes."""
        return (
            cls(group.group_id, group_epoch, assignor)
            .with_members(group.members)
            .with_static_members(group.static_members)
            .with_target_assignment(group.target_assignment)
            .with_resolved_regexes(group.resolved_regexes)
            .with_topics(topics)
        )

    def with_members(self, members: Mapping[str, ConsumerGroupMember]) -> TargetAssignmentBuilder:
        self._members = members
        return self

    def with_static_members(self, static_members: Mapping[str, str]) -> TargetAssignmentBuilder:
        """Instance id -> member id, before the pending change."""
        self._static_members = static_members
        return self

    def with_target_assignment(self, target: Mapping[str, PartitionMap]) -> TargetAssignmentBuilder:
        self._target_assignment = target
        return self

    def with_topics(self, topics: Mapping[TopicId, TopicMetadata]) -> TargetAssignmentBuilder:
        """Metadata of the existing topics; subscribed names not found here are ignored."""
        self._topics = topics
        return self

    def with_resolved_regexes(self, resolved: Mapping[str, frozenset[str]]) -> TargetAssignmentBuilder:
        self._resolved_regexes = resolved
        return self

    def add_or_update_member(self, member: ConsumerGroupMember) -> TargetAssignmentBuilder:
        self._updates[member.member_id] = member
        return self

    def remove_member(self, member_id: str) -> TargetAssignmentBuilder:
        self._updates[member_id] = None
        return self

    def build(self) -> TargetAssignmentResult:
        ids_by_name = {t.name: t.topic_id for t in self._topics.values()}

        def subscription(member: ConsumerGroupMember, current: PartitionMap) -> MemberSubscription:
            names = set(member.subscribed_topic_names)
            if member.uses_regex:
                names |= self._resolved_regexes.get(member.subscribed_topic_regex, frozenset())
            return MemberSubscription(
                member_id=member.member_id,
                subscribed_topic_ids=frozenset(ids_by_name[n] for n in names if n in ids_by_name),
                current_assignment=current,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
            )

        specs = {
            member_id: subscription(member, self._target_assignment.get(member_id, {}))
            for member_id, member in self._members.items()
        }
        for member_id, updated in self._updates.items():
            if updated is None:
                specs.pop(member_id, None)
                continue
            current = self._target_assignment.get(member_id, {})
            # A static member rejoining under a new member id takes over the target of
            # the member it replaces.
            previous_id = self.static_member_id(updated.instance_id)
            if previous_id is not None and previous_id != member_id:
                current = self._target_assignment.get(previous_id, {})
                specs.pop(previous_id, None)
            specs[member_id] = subscription(updated, current)

        computed = self.assignor.assign(GroupSpec(members=specs, topics=self._topics))
        assignment = {member_id: normalize(computed.get(member_id, {})) for member_id in specs}
        changed = {
            member_id: parts
            for member_id, parts in assignment.items()
            if member_id not in self._target_assignment or self._target_assignment[member_id] != parts
        }
        removed = frozenset(m for m in self._target_assignment if m not in assignment)
        return TargetAssignmentResult(
            epoch=self.group_epoch, assignment=assignment, changed=changed, removed=removed
        )

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self._static_members.get(instance_id)
