"""Classic group states and the declared table of legal transitions.

The table is Kafka's (``ClassicGroupState``): a transition not listed is a bug
in the coordinator, so ``check_transition`` raises instead of limping on.
"""

from __future__ import annotations

from enum import Enum

from .transitions import IllegalTransition


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value

    @property
    def lower_name(self) -> str:
        """The case-insensitive name ListGroups' states filter matches."""
        return self.value.lower()


# state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(IllegalTransition):
    """A group was asked to move between states the protocol does not connect."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        self.group_id = group_id
        super().__init__(
            f"group {group_id!r} cannot transition", current, target, VALID_PREVIOUS_STATES[target]
        )


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(group_id, current, target)


def can_rebalance(state: GroupState) -> bool:
    """Whether a rebalance may start from ``state`` (PreparingRebalance is enterable)."""
    return state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]
