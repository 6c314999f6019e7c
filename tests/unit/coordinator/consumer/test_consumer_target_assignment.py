"""TargetAssignmentBuilder: members added/updated/removed, static takeover, regexes."""

from __future__ import annotations

import pytest
from consumer_helpers import pm, topics

from slipstream.coordinator.consumer import (
    ConsumerGroup,
    ConsumerGroupMember,
    PartitionAssignorError,
    RangeAssignor,
    TargetAssignmentBuilder,
    UniformAssignor,
    replacement_for_static_member,
)


def sub(member_id: str, *names: str, **kw: object) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, subscribed_topic_names=frozenset(names), **kw)  # type: ignore[arg-type]


def test_first_member_gets_everything_and_is_reported_changed() -> None:
    result = (
        TargetAssignmentBuilder("g", 1, UniformAssignor())
        .with_topics(topics(foo=3))
        .add_or_update_member(sub("m1", "foo"))
        .build()
    )
    assert result.epoch == 1
    assert result.assignment == {"m1": pm({"foo": [0, 1, 2]})}
    assert result.changed == result.assignment
    assert result.removed == frozenset()


def test_joining_member_takes_partitions_and_only_changed_targets_are_reported() -> None:
    members = {"m1": sub("m1", "foo"), "m2": sub("m2", "foo")}
    target = {"m1": pm({"foo": [0, 1]}), "m2": pm({"foo": [2, 3]})}
    result = (
        TargetAssignmentBuilder("g", 5, UniformAssignor())
        .with_members(members)
        .with_target_assignment(target)
        .with_topics(topics(foo=4, bar=2))
        .add_or_update_member(sub("m3", "bar"))
        .build()
    )
    assert result.assignment == {**target, "m3": pm({"bar": [0, 1]})}
    assert result.changed == {"m3": pm({"bar": [0, 1]})}


def test_removed_member_partitions_are_redistributed() -> None:
    members = {"m1": sub("m1", "foo"), "m2": sub("m2", "foo")}
    target = {"m1": pm({"foo": [0, 1]}), "m2": pm({"foo": [2, 3]})}
    result = (
        TargetAssignmentBuilder("g", 6, UniformAssignor())
        .with_members(members)
        .with_target_assignment(target)
        .with_topics(topics(foo=4))
        .remove_member("m2")
        .build()
    )
    assert result.assignment == {"m1": pm({"foo": [0, 1, 2, 3]})}
    assert result.changed == {"m1": pm({"foo": [0, 1, 2, 3]})}
    assert result.removed == frozenset({"m2"})


def test_updated_subscription_drops_unsubscribed_topics() -> None:
    members = {"m1": sub("m1", "foo", "bar")}
    target = {"m1": pm({"foo": [0], "bar": [0]})}
    result = (
        TargetAssignmentBuilder("g", 2, UniformAssignor())
        .with_members(members)
        .with_target_assignment(target)
        .with_topics(topics(foo=1, bar=1))
        .add_or_update_member(sub("m1", "foo"))
        .build()
    )
    assert result.assignment == {"m1": pm({"foo": [0]})}


def test_subscribed_names_missing_from_metadata_are_ignored() -> None:
    result = (
        TargetAssignmentBuilder("g", 1, UniformAssignor())
        .with_topics(topics(foo=1))
        .add_or_update_member(sub("m1", "foo", "not-yet-created"))
        .build()
    )
    assert result.assignment == {"m1": pm({"foo": [0]})}


def test_static_member_replacing_another_takes_over_its_target() -> None:
    old = sub("old", "foo", instance_id="i1")
    members = {"old": old, "m2": sub("m2", "foo")}
    target = {"old": pm({"foo": [0, 1]}), "m2": pm({"foo": [2, 3]})}
    result = (
        TargetAssignmentBuilder("g", 7, UniformAssignor())
        .with_members(members)
        .with_static_members({"i1": "old"})
        .with_target_assignment(target)
        .with_topics(topics(foo=4))
        .add_or_update_member(replacement_for_static_member(old, "new"))
        .build()
    )
    assert result.assignment == {"new": pm({"foo": [0, 1]}), "m2": pm({"foo": [2, 3]})}
    assert result.changed == {"new": pm({"foo": [0, 1]})}
    assert result.removed == frozenset({"old"})


def test_static_members_keep_range_assignment_across_a_full_restart() -> None:
    group = ConsumerGroup("g")
    meta = topics(foo=5)
    for i, (member_id, instance) in enumerate([("a", "i0"), ("b", "i1")]):
        builder = TargetAssignmentBuilder.for_group(group, i + 1, RangeAssignor(), meta)
        result = builder.add_or_update_member(sub(member_id, "foo", instance_id=instance)).build()
        group.update_member(sub(member_id, "foo", instance_id=instance))
        for m, parts in result.changed.items():
            group.update_target_assignment(m, parts)
    before = dict(group.target_assignment)
    # Both restart under new member ids, one after the other.
    for epoch, (old_id, new_id) in enumerate([("a", "x"), ("b", "y")], start=3):
        old = group.members[old_id]
        result = (
            TargetAssignmentBuilder.for_group(group, epoch, RangeAssignor(), meta)
            .add_or_update_member(replacement_for_static_member(old, new_id))
            .build()
        )
        group.remove_member(old_id)
        group.remove_target_assignment(old_id)
        group.update_member(replacement_for_static_member(old, new_id).replace(assigned_partitions={}))
        for m, parts in result.changed.items():
            group.update_target_assignment(m, parts)
    assert group.target_assignment == {"x": before["a"], "y": before["b"]}


def test_regex_subscription_resolves_through_the_group() -> None:
    group = ConsumerGroup("g")
    group.set_resolved_regex("f.*", frozenset({"foo", "fab"}))
    result = (
        TargetAssignmentBuilder.for_group(group, 1, UniformAssignor(), topics(foo=1, fab=1, bar=1))
        .add_or_update_member(ConsumerGroupMember("m1", subscribed_topic_regex="f.*"))
        .build()
    )
    assert result.assignment == {"m1": pm({"foo": [0], "fab": [0]})}


def test_assignor_errors_propagate() -> None:
    class Broken:
        name = "broken"

        def assign(self, spec: object) -> dict[str, dict[object, frozenset[int]]]:
            raise PartitionAssignorError("nope")

    with pytest.raises(PartitionAssignorError):
        TargetAssignmentBuilder("g", 1, Broken()).add_or_update_member(sub("m1")).build()  # type: ignore[arg-type]
