"""Reconciliation of one member (every transition) and the heartbeat epoch rule."""

from __future__ import annotations

import uuid

import pytest
from consumer_helpers import pm, tid

from slipstream.coordinator.consumer import (
    ConsumerGroupMember,
    FencedMemberEpochError,
    MemberState,
    PartitionMap,
    reconcile,
    validate_member_epoch,
)


def free(_topic: uuid.UUID, _partition: int) -> int:
    return -1


def owned_by_other(busy: PartitionMap, epoch: int = 9):
    def lookup(topic: uuid.UUID, partition: int) -> int:
        return epoch if partition in busy.get(topic, frozenset()) else -1

    return lookup


def member(
    epoch: int = 10,
    state: MemberState = MemberState.STABLE,
    assigned: PartitionMap | None = None,
    revoking: PartitionMap | None = None,
    previous: int = 9,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "m1",
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned_partitions=assigned or {},
        partitions_pending_revocation=revoking or {},
    )


# ----- STABLE -----


def test_stable_member_at_target_epoch_is_unchanged() -> None:
    m = member(assigned=pm({"foo": [0, 1]}))
    assert reconcile(m, 10, pm({"foo": [0, 1, 2]}), free, pm({"foo": [0, 1]})) is m


def test_stable_member_gains_free_partitions_and_moves_to_target_epoch() -> None:
    m = member(assigned=pm({"foo": [0, 1]}))
    new = reconcile(m, 11, pm({"foo": [0, 1, 2], "bar": [0]}), free, pm({"foo": [0, 1]}))
    assert new.state is MemberState.STABLE
    assert (new.member_epoch, new.previous_member_epoch) == (11, 10)
    assert new.assigned_partitions == pm({"foo": [0, 1, 2], "bar": [0]})
    assert new.partitions_pending_revocation == {}


def test_stable_member_with_unchanged_target_moves_epoch_only() -> None:
    m = member(assigned=pm({"foo": [0]}))
    new = reconcile(m, 11, pm({"foo": [0]}), free, pm({"foo": [0]}))
    assert (new.state, new.member_epoch, new.assigned_partitions) == (
        MemberState.STABLE,
        11,
        pm({"foo": [0]}),
    )


def test_revocation_comes_first_and_keeps_the_epoch() -> None:
    m = member(assigned=pm({"foo": [0, 1, 2]}))
    new = reconcile(m, 11, pm({"foo": [0, 3]}), free, pm({"foo": [0, 1, 2]}))
    assert new.state is MemberState.UNREVOKED_PARTITIONS
    assert new.member_epoch == 10
    # Kept only what it may keep; the new partition 3 is not handed out yet.
    assert new.assigned_partitions == pm({"foo": [0]})
    assert new.partitions_pending_revocation == pm({"foo": [1, 2]})


def test_revocation_when_owned_partitions_are_not_reported() -> None:
    m = member(assigned=pm({"foo": [0, 1]}))
    new = reconcile(m, 11, pm({"foo": [0]}), free, None)
    assert new.state is MemberState.UNREVOKED_PARTITIONS
    assert new.partitions_pending_revocation == pm({"foo": [1]})


def test_no_revocation_round_when_the_member_already_dropped_the_partitions() -> None:
    # The heartbeat shows the partitions to revoke are already gone: skip straight ahead.
    m = member(assigned=pm({"foo": [0, 1]}))
    new = reconcile(m, 11, pm({"foo": [0], "bar": [0]}), free, pm({"foo": [0]}))
    assert new.state is MemberState.STABLE
    assert new.member_epoch == 11
    assert new.assigned_partitions == pm({"foo": [0], "bar": [0]})


def test_whole_topic_removed_from_target_is_revoked() -> None:
    m = member(assigned=pm({"foo": [0], "bar": [0, 1]}))
    new = reconcile(m, 11, pm({"foo": [0]}), free, pm({"foo": [0], "bar": [0, 1]}))
    assert new.partitions_pending_revocation == pm({"bar": [0, 1]})
    assert new.assigned_partitions == pm({"foo": [0]})


def test_partition_owned_by_another_member_is_unreleased() -> None:
    m = member(assigned=pm({"foo": [0]}))
    lookup = owned_by_other(pm({"foo": [1]}))
    new = reconcile(m, 11, pm({"foo": [0, 1, 2]}), lookup, pm({"foo": [0]}))
    assert new.state is MemberState.UNRELEASED_PARTITIONS
    assert new.member_epoch == 11
    assert new.assigned_partitions == pm({"foo": [0, 2]})


def test_only_unreleased_partitions_missing_still_moves_epoch() -> None:
    m = member(assigned=pm({"foo": [0]}))
    lookup = owned_by_other(pm({"foo": [1]}))
    new = reconcile(m, 11, pm({"foo": [0, 1]}), lookup, pm({"foo": [0]}))
    assert new.state is MemberState.UNRELEASED_PARTITIONS
    assert (new.member_epoch, new.assigned_partitions) == (11, pm({"foo": [0]}))


# ----- UNREVOKED_PARTITIONS -----


def unrevoked() -> ConsumerGroupMember:
    return member(
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned=pm({"foo": [0]}),
        revoking=pm({"foo": [1, 2]}),
        previous=10,
    )


@pytest.mark.parametrize(
    "owned",
    [None, pm({"foo": [0, 1, 2]}), pm({"foo": [0, 2]}), pm({"foo": [2]})],
    ids=["not-reported", "all", "some", "one"],
)
def test_unrevoked_member_waits_while_it_still_owns_a_revoked_partition(
    owned: PartitionMap | None,
) -> None:
    m = unrevoked()
    assert reconcile(m, 11, pm({"foo": [0, 3]}), free, owned) is m


def test_unrevoked_member_moves_on_once_revocation_is_acknowledged() -> None:
    new = reconcile(unrevoked(), 11, pm({"foo": [0, 3]}), free, pm({"foo": [0]}))
    assert new.state is MemberState.STABLE
    assert (new.member_epoch, new.previous_member_epoch) == (11, 10)
    assert new.assigned_partitions == pm({"foo": [0, 3]})
    assert new.partitions_pending_revocation == {}


def test_unrevoked_member_acknowledging_with_an_empty_list_moves_on() -> None:
    new = reconcile(unrevoked(), 11, pm({"foo": [0]}), free, {})
    assert (new.state, new.member_epoch) == (MemberState.STABLE, 11)


def test_unrevoked_member_revokes_again_when_the_target_moved_meanwhile() -> None:
    # Target epoch 12 takes partition 0 away too: another revocation round at epoch 11.
    new = reconcile(unrevoked(), 12, pm({"foo": [3]}), free, pm({"foo": [0]}))
    assert new.state is MemberState.UNREVOKED_PARTITIONS
    assert new.member_epoch == 11
    assert new.partitions_pending_revocation == pm({"foo": [0]})
    assert new.assigned_partitions == {}


def test_unrevoked_member_moves_to_unreleased_when_new_partitions_are_busy() -> None:
    lookup = owned_by_other(pm({"foo": [3]}))
    new = reconcile(unrevoked(), 11, pm({"foo": [0, 3]}), lookup, pm({"foo": [0]}))
    assert new.state is MemberState.UNRELEASED_PARTITIONS
    assert (new.member_epoch, new.assigned_partitions) == (11, pm({"foo": [0]}))


# ----- UNRELEASED_PARTITIONS -----


def test_unreleased_member_gets_the_partition_once_it_is_released() -> None:
    m = member(epoch=11, state=MemberState.UNRELEASED_PARTITIONS, assigned=pm({"foo": [0]}))
    target = pm({"foo": [0, 1]})
    still_busy = owned_by_other(pm({"foo": [1]}))
    waiting = reconcile(m, 11, target, still_busy, pm({"foo": [0]}))
    assert waiting.state is MemberState.UNRELEASED_PARTITIONS
    assert waiting.assigned_partitions == pm({"foo": [0]})

    released = reconcile(waiting, 11, target, free, pm({"foo": [0]}))
    assert released.state is MemberState.STABLE
    assert released.member_epoch == 11
    assert released.assigned_partitions == pm({"foo": [0, 1]})


def test_unreleased_member_follows_a_newer_target() -> None:
    m = member(epoch=11, state=MemberState.UNRELEASED_PARTITIONS, assigned=pm({"foo": [0]}))
    new = reconcile(m, 12, pm({"foo": [2]}), free, pm({"foo": [0]}))
    assert new.state is MemberState.UNREVOKED_PARTITIONS
    assert new.member_epoch == 11
    assert new.partitions_pending_revocation == pm({"foo": [0]})


# ----- UNKNOWN -----


@pytest.mark.parametrize("owned", [None, pm({"foo": [0]})], ids=["not-reported", "owns"])
def test_unknown_state_fences_a_member_that_may_own_partitions(owned: PartitionMap | None) -> None:
    m = member(state=MemberState.UNKNOWN, assigned=pm({"foo": [0]}))
    with pytest.raises(FencedMemberEpochError) as info:
        reconcile(m, 11, pm({"foo": [0]}), free, owned)
    assert info.value.code == 110


def test_unknown_state_with_nothing_owned_reconciles_from_scratch() -> None:
    m = member(state=MemberState.UNKNOWN, assigned=pm({"foo": [0]}))
    new = reconcile(m, 11, pm({"foo": [0, 1]}), free, {})
    assert (new.state, new.member_epoch) == (MemberState.STABLE, 11)
    assert new.assigned_partitions == pm({"foo": [0, 1]})


def test_state_values_round_trip_and_unknown_values_map_to_unknown() -> None:
    for state in MemberState:
        assert MemberState.from_value(state.value) is state
    assert MemberState.from_value(42) is MemberState.UNKNOWN


def test_reported_partitions_the_member_should_not_have_do_not_grant_them() -> None:
    # The member claims foo-5, never assigned to it: reconciliation ignores the claim.
    m = member(assigned=pm({"foo": [0]}))
    new = reconcile(m, 11, pm({"foo": [0]}), free, pm({"foo": [0, 5]}))
    assert new.assigned_partitions == pm({"foo": [0]})
    assert tid("foo") in new.assigned_partitions


# ----- validate_member_epoch -----


def test_current_epoch_is_accepted() -> None:
    validate_member_epoch(member(), 10, pm({"foo": [9]}))
    validate_member_epoch(member(), 10, None)


def test_higher_epoch_is_fenced() -> None:
    with pytest.raises(FencedMemberEpochError, match="greater"):
        validate_member_epoch(member(), 11, {})


def test_previous_epoch_with_a_subset_of_the_assignment_is_accepted() -> None:
    # The response that bumped the member to epoch 10 was lost.
    m = member(assigned=pm({"foo": [0, 1]}))
    validate_member_epoch(m, 9, pm({"foo": [0]}))
    validate_member_epoch(m, 9, {})


@pytest.mark.parametrize(
    ("received", "owned"),
    [
        (9, None),  # owned partitions not reported
        (9, pm({"foo": [0, 2]})),  # owns a partition not assigned to it
        (9, pm({"bar": [0]})),
        (8, pm({"foo": [0]})),  # older than the previous epoch
    ],
    ids=["not-reported", "extra-partition", "extra-topic", "too-old"],
)
def test_lower_epoch_is_fenced_otherwise(received: int, owned: PartitionMap | None) -> None:
    m = member(assigned=pm({"foo": [0, 1]}))
    with pytest.raises(FencedMemberEpochError, match="smaller") as info:
        validate_member_epoch(m, received, owned)
    assert info.value.code == 110


# ----- exact epochs, previous epochs included, across transitions -----

S, REV, REL = MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS


@pytest.mark.parametrize(
    ("start", "target_epoch", "target", "busy", "owned", "expected"),
    [
        pytest.param(
            (S, 10, 10, {"a": [1, 2, 3]}, {}), 11, {"a": [1, 2, 3]}, False, None,
            (S, 11, 10, {"a": [1, 2, 3]}, {}), id="stable-to-stable",
        ),
        pytest.param(
            (S, 10, 10, {"a": [1, 2]}, {}), 11, {"a": [1, 2], "b": [7]}, True, {},
            (REL, 11, 10, {"a": [1, 2]}, {}), id="stable-to-unreleased",
        ),
        pytest.param(
            (REV, 10, 10, {"a": [2, 3]}, {"a": [1]}), 11, {"a": [2, 3]}, False, {"a": [2, 3]},
            (S, 11, 10, {"a": [2, 3]}, {}), id="unrevoked-to-stable",
        ),
        pytest.param(
            (REV, 10, 10, {"a": [2, 3]}, {"a": [1]}), 12, {"a": [3]}, False, {"a": [2, 3]},
            (REV, 11, 10, {"a": [3]}, {"a": [2]}), id="unrevoked-to-unrevoked",
        ),
        pytest.param(
            (REV, 11, 10, {"a": [2, 3]}, {}), 11, {"a": [2, 3, 4]}, True, {"a": [2, 3]},
            (REL, 11, 11, {"a": [2, 3]}, {}), id="unrevoked-to-unreleased",
        ),
        pytest.param(
            (REL, 11, 11, {"a": [2, 3]}, {}), 12, {"a": [2, 3]}, True, None,
            (S, 12, 11, {"a": [2, 3]}, {}), id="unreleased-to-stable",
        ),
        pytest.param(
            (REL, 11, 11, {"a": [2, 3]}, {}), 11, {"a": [2, 3, 4]}, False, None,
            (S, 11, 11, {"a": [2, 3, 4]}, {}), id="unreleased-to-stable-with-new",
        ),
        pytest.param(
            (REL, 11, 11, {"a": [2, 3]}, {}), 11, {"a": [2, 3, 4]}, True, None,
            (REL, 11, 11, {"a": [2, 3]}, {}), id="unreleased-stays",
        ),
        pytest.param(
            (REL, 11, 11, {"a": [2, 3]}, {}), 12, {"a": [3]}, True, None,
            (REV, 11, 11, {"a": [3]}, {"a": [2]}), id="unreleased-to-unrevoked",
        ),
    ],
)
def test_transition_table(
    start: tuple[MemberState, int, int, dict[str, list[int]], dict[str, list[int]]],
    target_epoch: int,
    target: dict[str, list[int]],
    busy: bool,
    owned: dict[str, list[int]] | None,
    expected: tuple[MemberState, int, int, dict[str, list[int]], dict[str, list[int]]],
) -> None:
    state, epoch, previous, assigned, revoking = start
    m = member(epoch, state, pm(assigned), pm(revoking), previous)

    # busy: every partition the member lacks is owned by someone at epoch 10.
    new = reconcile(m, target_epoch, pm(target), owned_by_other(pm(target), 10) if busy else free, None if owned is None else pm(owned))
    e_state, e_epoch, e_previous, e_assigned, e_revoking = expected
    assert (new.state, new.member_epoch, new.previous_member_epoch) == (e_state, e_epoch, e_previous)
    assert new.assigned_partitions == pm(e_assigned)
    assert new.partitions_pending_revocation == pm(e_revoking)
