"""ConsumerGroupMember values and the ConsumerGroup's indexes and derived state."""

from __future__ import annotations

import pytest
from consumer_helpers import pm, tid

from slipstream.coordinator.consumer import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    PartitionOwnershipError,
    SubscriptionType,
    replacement_for_static_member,
    topic_partitions,
)

# ----- member -----


def test_member_is_immutable_and_replace_returns_a_copy() -> None:
    m = ConsumerGroupMember("m1", subscribed_topic_names=frozenset({"foo"}))
    with pytest.raises(AttributeError):
        m.member_epoch = 3  # type: ignore[misc]
    m2 = m.replace(client_id="c")
    assert (m.client_id, m2.client_id) == ("", "c")
    assert m2.member_id == "m1"


def test_replace_with_nothing_new_is_the_same_value_and_a_change_normalizes() -> None:
    m = ConsumerGroupMember("m1", assigned_partitions=pm({"foo": [0, 1]}))
    assert m.replace(client_id="", assigned_partitions=pm({"foo": [0, 1]})) is m
    changed = m.replace(assigned_partitions={tid("foo"): {2}})
    assert changed.assigned_partitions == {tid("foo"): frozenset({2})}
    assert isinstance(changed.assigned_partitions[tid("foo")], frozenset)


def test_a_copy_is_the_member_the_constructor_builds_from_the_same_fields() -> None:
    m = ConsumerGroupMember("m1", member_epoch=3, subscribed_topic_names=frozenset({"foo"}), rack_id="r1")
    changes = {
        "subscribed_topic_names": {"bar"},
        "assigned_partitions": {tid("foo"): {1}, tid("bar"): set()},
        "partitions_pending_revocation": {tid("bar"): [2, 2]},
        "state": MemberState.UNREVOKED_PARTITIONS,
    }
    built = ConsumerGroupMember(
        "m1", member_epoch=3, rack_id="r1", **changes  # type: ignore[arg-type]
    )
    copied = m.replace(**changes)
    assert copied == built and hash(copied) == hash(built)
    assert copied.subscribed_topic_names == frozenset({"bar"})
    assert copied.assigned_partitions == pm({"foo": [1]})
    assert copied.partitions_pending_revocation == pm({"bar": [2]})
    assert (copied.rack_id, m.assigned_partitions) == ("r1", {})  # the original is untouched
    static = replacement_for_static_member(copied.with_epoch(5), "m2")
    assert (static.member_id, static.member_epoch, static.previous_member_epoch) == ("m2", 0, 0)
    assert static.assigned_partitions == copied.assigned_partitions


def test_member_defaults_match_a_fresh_kafka_member() -> None:
    m = ConsumerGroupMember("m1")
    assert (m.member_epoch, m.previous_member_epoch, m.state) == (0, -1, MemberState.STABLE)
    assert (m.rebalance_timeout_ms, m.subscribed_topic_regex, m.server_assignor) == (-1, "", None)


def test_with_epoch_keeps_the_old_epoch_as_previous() -> None:
    m = ConsumerGroupMember("m1", member_epoch=4, previous_member_epoch=2).with_epoch(7)
    assert (m.member_epoch, m.previous_member_epoch) == (7, 4)


def test_members_with_the_same_partitions_compare_equal_whatever_the_input_form() -> None:
    a = ConsumerGroupMember("m1", assigned_partitions={tid("foo"): frozenset({1}), tid("bar"): frozenset()})
    b = ConsumerGroupMember("m1", assigned_partitions={tid("foo"): {1}})  # type: ignore[dict-item]
    assert a == b
    assert a.assigned_partitions == pm({"foo": [1]})


def test_with_subscription_only_changes_what_is_given() -> None:
    m = ConsumerGroupMember("m1", subscribed_topic_names=frozenset({"foo"}), rack_id="r1")
    assert m.with_subscription() is m
    m2 = m.with_subscription(topic_names={"bar"}, server_assignor="range")
    assert (m2.subscribed_topic_names, m2.server_assignor, m2.rack_id) == (
        frozenset({"bar"}),
        "range",
        "r1",
    )
    assert m2.subscription_differs(m)
    assert not m.replace(client_id="x").subscription_differs(m)
    assert m.with_subscription(topic_regex="f.*").subscription_differs(m)


def test_static_replacement_keeps_assignment_and_resets_epochs() -> None:
    old = ConsumerGroupMember(
        "old", member_epoch=5, previous_member_epoch=4, instance_id="i1",
        assigned_partitions=pm({"foo": [0]}), subscribed_topic_names=frozenset({"foo"}),
    )
    new = replacement_for_static_member(old, "new")
    assert (new.member_id, new.member_epoch, new.previous_member_epoch) == ("new", 0, 0)
    assert (new.instance_id, new.assigned_partitions) == ("i1", pm({"foo": [0]}))


# ----- group -----


def stable(member_id: str, epoch: int, assigned: dict[str, list[int]], **kw: object) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id, member_epoch=epoch, assigned_partitions=pm(assigned),
        subscribed_topic_names=frozenset(assigned) or frozenset({"foo"}), **kw,  # type: ignore[arg-type]
    )


def test_new_group_is_empty() -> None:
    g = ConsumerGroup("g")
    assert (g.state, g.group_epoch, g.target_assignment_epoch) == (ConsumerGroupState.EMPTY, 0, 0)


def test_group_state_follows_epochs_and_members() -> None:
    g = ConsumerGroup("g")
    g.update_member(stable("m1", 0, {}))
    g.set_group_epoch(1)
    assert g.state is ConsumerGroupState.ASSIGNING
    g.set_target_assignment_epoch(1)
    assert g.state is ConsumerGroupState.RECONCILING  # m1 still at epoch 0
    g.update_member(stable("m1", 1, {"foo": [0]}))
    assert g.state is ConsumerGroupState.STABLE
    g.update_member(g.members["m1"].replace(state=MemberState.UNRELEASED_PARTITIONS))
    assert g.state is ConsumerGroupState.RECONCILING
    g.remove_member("m1")
    assert g.state is ConsumerGroupState.EMPTY
    g.mark_dead()
    g.update_member(stable("m2", 0, {}))
    assert g.state is ConsumerGroupState.DEAD


def test_partition_epochs_track_assigned_and_pending_revocation() -> None:
    g = ConsumerGroup("g")
    g.update_member(
        stable("m1", 3, {"foo": [0]}).replace(partitions_pending_revocation=pm({"foo": [1]}))
    )
    assert g.current_partition_epoch(tid("foo"), 0) == 3
    assert g.current_partition_epoch(tid("foo"), 1) == 3
    assert g.current_partition_epoch(tid("foo"), 2) == -1
    # Moving to a new epoch re-stamps what it keeps and frees what it released.
    g.update_member(stable("m1", 4, {"foo": [0]}))
    assert g.current_partition_epoch(tid("foo"), 0) == 4
    assert g.current_partition_epoch(tid("foo"), 1) == -1
    g.remove_member("m1")
    assert g.current_partition_epoch(tid("foo"), 0) == -1


def test_a_partition_cannot_get_a_second_owner_and_the_group_is_left_unchanged() -> None:
    g = ConsumerGroup("g")
    g.update_member(stable("m1", 3, {"foo": [0]}))
    g.update_member(stable("m2", 3, {"foo": [1]}))
    with pytest.raises(PartitionOwnershipError):
        g.update_member(stable("m2", 4, {"foo": [0, 1]}))
    assert g.members["m2"].assigned_partitions == pm({"foo": [1]})
    assert g.current_partition_epoch(tid("foo"), 0) == 3
    assert g.current_partition_epoch(tid("foo"), 1) == 3


def test_subscription_counts_and_type() -> None:
    g = ConsumerGroup("g")
    g.update_member(stable("m1", 0, {"foo": [], "bar": []}))
    g.update_member(stable("m2", 0, {"foo": [], "bar": []}))
    assert dict(g.subscribed_topic_names) == {"foo": 2, "bar": 2}
    assert g.subscription_type() is SubscriptionType.HOMOGENEOUS
    g.update_member(stable("m2", 0, {"foo": []}))
    assert dict(g.subscribed_topic_names) == {"foo": 2, "bar": 1}
    assert g.subscription_type() is SubscriptionType.HETEROGENEOUS
    g.remove_member("m1")
    assert dict(g.subscribed_topic_names) == {"foo": 1}
    assert g.subscription_type() is SubscriptionType.HOMOGENEOUS


def test_regex_subscriptions_use_their_resolution() -> None:
    g = ConsumerGroup("g")
    m1 = ConsumerGroupMember("m1", subscribed_topic_regex="f.*")
    g.update_member(m1)
    assert dict(g.subscribed_regexes) == {"f.*": 1}
    assert g.member_subscribed_topics(m1) == frozenset()
    g.set_resolved_regex("f.*", frozenset({"foo", "fab"}))
    assert g.member_subscribed_topics(m1) == frozenset({"foo", "fab"})
    assert g.all_subscribed_topics() == frozenset({"foo", "fab"})
    g.remove_member("m1")
    assert dict(g.subscribed_regexes) == {}


def test_static_member_index_follows_replacement() -> None:
    g = ConsumerGroup("g")
    old = stable("old", 2, {"foo": [0]}, instance_id="i1")
    g.update_member(old)
    assert g.static_member_id("i1") == "old"
    assert g.static_member("i1") == old
    # Replay order of a replacement: remove the old member, add the new one.
    g.remove_member("old")
    assert g.static_member_id("i1") is None
    g.update_member(replacement_for_static_member(old, "new"))
    assert g.static_member_id("i1") == "new"
    assert g.current_partition_epoch(tid("foo"), 0) == 0


def test_preferred_server_assignor_is_the_most_requested() -> None:
    g = ConsumerGroup("g")
    assert g.preferred_server_assignor() is None
    g.update_member(ConsumerGroupMember("m1", server_assignor="range"))
    g.update_member(ConsumerGroupMember("m2", server_assignor="uniform"))
    assert g.preferred_server_assignor() == "range"  # tie -> smallest name
    g.update_member(ConsumerGroupMember("m3", server_assignor="uniform"))
    assert g.preferred_server_assignor() == "uniform"
    g.remove_member("m3")
    g.remove_member("m2")
    assert g.preferred_server_assignor() == "range"


def test_waiting_on_unreleased_partition() -> None:
    g = ConsumerGroup("g")
    g.update_member(stable("m1", 2, {"foo": [0]}))
    m2 = stable("m2", 3, {"foo": [1]}).replace(state=MemberState.UNRELEASED_PARTITIONS)
    g.update_member(m2)
    g.update_target_assignment("m2", pm({"foo": [0, 1]}))
    live = {tid("foo"): "foo"}.get
    assert g.waiting_on_unreleased_partition(m2, live)
    g.remove_member("m1")
    assert not g.waiting_on_unreleased_partition(m2, live)


def test_a_member_may_take_back_a_partition_it_was_revoking() -> None:
    g = ConsumerGroup("g")
    g.update_member(ConsumerGroupMember("m1", member_epoch=10, partitions_pending_revocation=pm({"foo": [1]})))
    assert g.current_partition_epoch(tid("foo"), 1) == 10
    g.update_member(ConsumerGroupMember("m1", member_epoch=11, assigned_partitions=pm({"foo": [1]})))
    assert g.current_partition_epoch(tid("foo"), 1) == 11


def test_removing_an_unknown_member_is_a_no_op() -> None:
    g = ConsumerGroup("g")
    g.remove_member("nobody")
    g.remove_target_assignment("nobody")
    assert g.state is ConsumerGroupState.EMPTY


def test_topic_partitions_lists_an_assignment_in_a_stable_order() -> None:
    assignment = pm({"foo": [2, 0], "bar": [1]})
    assert topic_partitions(assignment) == sorted(
        [(tid("foo"), [0, 2]), (tid("bar"), [1])], key=lambda tp: tp[0]
    )


def test_a_deleted_topics_partitions_hold_back_the_recreated_topic_until_released() -> None:
    g = ConsumerGroup("g")
    old, new = tid("t-old"), tid("t-new")
    live = {new: "t"}.get  # "t" was deleted (old id) and created again (new id)
    g.update_member(stable("m1", 3, {"t-old": [0, 1]}).replace(subscribed_topic_names=frozenset({"t"})))
    g.update_member(stable("m2", 3, {}).replace(subscribed_topic_names=frozenset({"t"})))
    lookup = g.owner_epoch_lookup(live, "m2")
    assert g.current_partition_epoch(new, 0) == -1  # by id it is free ...
    assert lookup(new, 0) == 3 and lookup(new, 1) == 3 and lookup(new, 2) == -1  # ... by name it is not
    assert g.owner_epoch_lookup(live, "m1")(new, 0) == -1  # the holder itself is not held back
    # A member subscribed to other names does not hold "t" back.
    g.update_member(stable("m1", 4, {"t-old": [0, 1]}).replace(subscribed_topic_names=frozenset({"u"})))
    assert g.owner_epoch_lookup(live, "m2")(new, 0) == -1
    # Released (the member moved on, or left): nothing holds it back any more.
    g.update_member(stable("m1", 5, {}).replace(subscribed_topic_names=frozenset({"t"})))
    assert g.owner_epoch_lookup(live, "m2")(new, 0) == -1
    g.update_member(stable("m1", 6, {"t-old": [1]}).replace(subscribed_topic_names=frozenset({"t"})))
    assert g.owner_epoch_lookup(live, "m2")(new, 1) == 6
    g.remove_member("m1")
    assert g.owner_epoch_lookup(live, "m2")(new, 1) == -1
    assert old not in g._topic_holders


def test_a_deleted_topics_partition_being_revoked_holds_back_every_name() -> None:
    """Revoking, the holder may have left the deleted topic's subscription, so its name is
    unknown: the partition number waits for its acknowledgement whatever the name."""
    g = ConsumerGroup("g")
    new = tid("t-new")
    live = {new: "t"}.get
    g.update_member(
        ConsumerGroupMember(
            "m1", member_epoch=7, state=MemberState.UNREVOKED_PARTITIONS,
            partitions_pending_revocation=pm({"t-old": [0]}), subscribed_topic_names=frozenset({"u"}),
        )
    )  # fmt: skip
    g.update_member(stable("m2", 7, {}).replace(subscribed_topic_names=frozenset({"t"})))
    lookup = g.owner_epoch_lookup(live, "m2")
    assert lookup(new, 0) == 7 and lookup(new, 1) == -1
    g.update_member(stable("m1", 8, {}).replace(subscribed_topic_names=frozenset({"u"})))
    assert g.owner_epoch_lookup(live, "m2")(new, 0) == -1
