"""Steps 2-4 of a consumer-group member's request: group epoch, target assignment, reconciliation.

A ConsumerGroupHeartbeat (and a classic member's JoinGroup in a consumer group) first
applies the request's fields to the member; then:

2. the group epoch is bumped when the member joined, rejoined or changed its
   subscription, when a regex it uses resolves to other topics, or when the hash
   of the subscribed topics' metadata changed;
3. a group epoch ahead of the target assignment runs the server-side assignor
   (the most used ``server_assignor`` of the members, else the first configured);
4. the member is reconciled towards its target (``consumer/reconciliation.py``).

Only records and history events come out; replaying the records changes the group.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import consumer_records as crec
from . import history as ev
from .config import CoordinatorConfig
from .consumer import (
    ASSIGNORS,
    ConsumerGroup,
    ConsumerGroupMember,
    PartitionAssignor,
    PartitionMap,
    TargetAssignmentBuilder,
    matching_topics,
    reconcile,
)
from .result import Record
from .topics_image import TopicsImage

log = logging.getLogger("slipstream.coordinator")


@dataclass(slots=True)
class MemberChange:
    """One member's request, as the rebalance step sees it."""

    group: ConsumerGroup
    # The member as the group knows it (a new member: a blank one), and with the
    # request's fields applied.
    member: ConsumerGroupMember
    updated: ConsumerGroupMember
    # The partitions the member says it owns; None when the request did not say.
    owned: PartitionMap | None
    now_ms: int
    # Where the step appends what it decided.
    records: list[Record]
    events: list[ev.GroupEvent]
    # The static member whose place it takes, if any.
    replaced: ConsumerGroupMember | None = None
    # It rejoined under its own id (its old target was tombstoned), or joined just now.
    rejoined: bool = False
    is_new: bool = False


class ConsumerRebalance:
    def __init__(
        self, config: CoordinatorConfig, topics: Callable[[], TopicsImage], partition_for: Callable[[str], int]
    ) -> None:
        self.config = config
        self.topics = topics
        self.partition_for = partition_for

    def advance_member(self, change: MemberChange) -> tuple[ConsumerGroupMember, int, bool]:
        """Steps 2-4 for ``change.updated``: bump the group epoch if it changed what the group
        consumes, compute a new target assignment for a new epoch, and reconcile the member
        towards its target. Appends to ``change.records`` and ``change.events``; returns
        (the reconciled member, the target assignment epoch, whether the group epoch was
        bumped)."""
        group, member, updated, owned = change.group, change.member, change.updated, change.owned
        now_ms, records, events = change.now_ms, change.records, change.events
        replaced, rejoined, is_new = change.replaced, change.rejoined, change.is_new
        group_id = group.group_id
        member_id = updated.member_id
        partition = self.partition_for(group_id)
        image = self.topics()
        subscription_changed = updated.subscription_differs(member)
        # 2. Does the group need a new epoch?
        bump = group.group_epoch == 0 or rejoined or subscription_changed
        bump_cause = (
            "group created" if group.group_epoch == 0
            else f"member {member_id} rejoined" if rejoined
            else f"member {member_id} joined" if is_new
            else f"member {member_id} changed its subscription" if subscription_changed
            else ""
        )
        resolved = dict(group.resolved_regexes)
        refresh = image.version != group.checked_topics_version
        regexes = set(group.subscribed_regexes)
        old_regex = member.subscribed_topic_regex
        if (
            member.uses_regex
            and old_regex != updated.subscribed_topic_regex
            and group.subscribed_regexes.get(old_regex, 0) <= 1
        ):
            # The member was the regex's last subscriber.
            regexes.discard(old_regex)
            if old_regex in resolved:
                del resolved[old_regex]
                records.append(crec.regex_tombstone(partition, group_id, old_regex))
        if updated.uses_regex:
            regexes.add(updated.subscribed_topic_regex)
        names: list[str] | None = None
        for regex in sorted(regexes):
            if regex in resolved and not refresh:
                continue
            if names is None:
                names = image.public_names()
            topics = matching_topics(regex, names)
            if resolved.get(regex) != topics:
                resolved[regex] = topics
                records.append(crec.regex_record(partition, group_id, regex, topics, image.version, now_ms))
                bump = True
                bump_cause = bump_cause or f"regex {regex} now matches {sorted(topics)}"
        metadata_hash = group.metadata_hash
        if bump or refresh:
            members = dict(group.members)
            if replaced is not None:
                members.pop(replaced.member_id, None)
            members[member_id] = updated
            metadata_hash = image.metadata_hash(subscribed_names(members.values(), resolved))
            if metadata_hash != group.metadata_hash:
                bump = True
                bump_cause = bump_cause or "topic metadata changed"
            elif not bump:
                group.checked_topics_version = image.version  # a cache: nothing changed
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(crec.group_epoch_record(partition, group_id, group_epoch, metadata_hash))
            log.info("group %s: group epoch bumped to %d", group_id, group_epoch)
            events.append(
                ev.GroupEpochBumped(group_id=group_id, at_ms=now_ms, epoch=group_epoch, cause=bump_cause or "new epoch")
            )

        # 3. A new target assignment for a new group epoch.
        if group_epoch > group.target_assignment_epoch:
            assignor = self._assignor(group, member, updated)
            builder = (
                TargetAssignmentBuilder.for_group(group, group_epoch, assignor, image.by_id)
                .with_resolved_regexes(resolved)
                .add_or_update_member(updated)
            )
            result = builder.build()
            changed = dict(result.changed)
            if rejoined:
                # Its old target was tombstoned above: write it even where it did not change.
                changed[member_id] = result.assignment.get(member_id, {})
            for changed_id, parts in sorted(changed.items()):
                records.append(crec.target_assignment_record(partition, group_id, changed_id, parts))
            records.append(crec.target_epoch_record(partition, group_id, group_epoch, now_ms))
            events.append(
                ev.TargetAssignmentComputed(
                    group_id=group_id,
                    at_ms=now_ms,
                    epoch=group_epoch,
                    changed_member_ids=tuple(sorted(changed)),
                    assignor=_assignor_name(assignor),
                )
            )
            target_epoch = group_epoch
            target = result.assignment.get(member_id, {})
        else:
            target_epoch = group.target_assignment_epoch
            target = group.target_assignment_of(replaced.member_id if replaced is not None else member_id)

        # 4. Reconcile the member towards its target.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            owner_epoch = group.owner_epoch_lookup(image.name_of, updated.member_id)
            reconciled = reconcile(updated, target_epoch, target, owner_epoch, owned)
        if reconciled != updated:
            records.append(crec.current_assignment_record(partition, group_id, reconciled))
            if reconciled.member_epoch != updated.member_epoch or reconciled.state is not updated.state:
                events.append(_reconciliation_step(group_id, now_ms, updated, reconciled, image))
        return reconciled, target_epoch, bump

    def _assignor(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> PartitionAssignor:
        counts = Counter(group.server_assignor_counts)
        if member.server_assignor is not None and group.has_member(member.member_id):
            counts[member.server_assignor] -= 1
        if updated.server_assignor is not None:
            counts[updated.server_assignor] += 1
        named = [(n, c) for n, c in counts.items() if c > 0]
        name = min(named, key=lambda kv: (-kv[1], kv[0]))[0] if named else self.config.consumer_group_assignors[0]
        return ASSIGNORS[name]


def subscribed_names(members: Iterable[ConsumerGroupMember], resolved: dict[str, frozenset[str]]) -> set[str]:
    names: set[str] = set()
    for m in members:
        names |= m.subscribed_topic_names
        if m.uses_regex:
            names |= resolved.get(m.subscribed_topic_regex, frozenset())
    return names


def _assignor_name(assignor: PartitionAssignor) -> str | None:
    for name, known in ASSIGNORS.items():
        if known is assignor:
            return name
    return None


def _partition_names(image: TopicsImage, partitions: PartitionMap) -> tuple[str, ...]:
    return tuple(
        f"{image.name_of(topic_id) or topic_id}-{p}"
        for topic_id, parts in sorted(partitions.items())
        for p in sorted(parts)
    )


def _reconciliation_step(
    group_id: str, now_ms: int, before: ConsumerGroupMember, after: ConsumerGroupMember, image: TopicsImage
) -> ev.MemberEpochAdvanced:
    gained = {
        t: frozenset(parts) - frozenset(before.assigned_partitions.get(t, ()))
        for t, parts in after.assigned_partitions.items()
    }
    return ev.MemberEpochAdvanced(
        group_id=group_id,
        at_ms=now_ms,
        member_id=after.member_id,
        from_epoch=before.member_epoch,
        to_epoch=after.member_epoch,
        state=after.state.name.lower().replace("_", "-"),
        revoking=_partition_names(image, after.partitions_pending_revocation),
        assigning=_partition_names(image, {t: ps for t, ps in gained.items() if ps}),
    )
