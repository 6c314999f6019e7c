"""The declared state table: every legal transition passes, every other one raises."""

from __future__ import annotations

import itertools

import pytest

from slipstream.coordinator import ClassicGroup, GroupState, IllegalStateTransition
from slipstream.coordinator.state import VALID_PREVIOUS_STATES, can_rebalance, check_transition

S = GroupState
LEGAL = {
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),
}


def test_table_is_kafkas() -> None:
    declared = {(prev, target) for target, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
    assert declared == LEGAL


@pytest.mark.parametrize(("current", "target"), list(itertools.product(GroupState, GroupState)))
def test_transition(current: GroupState, target: GroupState) -> None:
    group = ClassicGroup("g", 0, current)
    if (current, target) in LEGAL:
        group.transition_to(target, 42)
        assert group.state is target
        assert group.previous_state is current
        assert group.current_state_timestamp_ms == 42
    else:
        with pytest.raises(IllegalStateTransition) as info:
            group.transition_to(target, 42)
        assert info.value.current is current and info.value.target is target
        assert str(current) in str(info.value) and "'g'" in str(info.value)
        assert group.state is current


def test_check_transition_and_can_rebalance() -> None:
    check_transition("g", S.EMPTY, S.PREPARING_REBALANCE)
    with pytest.raises(IllegalStateTransition):
        check_transition("g", S.EMPTY, S.STABLE)
    assert [s for s in GroupState if can_rebalance(s)] == [S.EMPTY, S.COMPLETING_REBALANCE, S.STABLE]


def test_state_names_are_kafkas() -> None:
    assert [str(s) for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert S.PREPARING_REBALANCE.lower_name == "preparingrebalance"
