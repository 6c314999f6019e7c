"""Transaction states, their ids in ``__transaction_state``, and the legal transitions.

The table is Kafka's (``TransactionState.validPreviousStates``): a transition not
listed is a bug in the coordinator, so ``check_transition`` raises.
PrepareEpochFence is never written to the log: it is the step a coordinator takes
when it fences a producer whose transaction is Ongoing (a new InitProducerId, or
the transaction timed out) on its way to PrepareAbort with a bumped epoch.
"""

from __future__ import annotations

from enum import Enum

from ..transitions import IllegalTransition


class TxnState(Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use."""
        return self.value[1]

    def __str__(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        state = _BY_ID.get(state_id)
        if state is None:
            raise ValueError(f"unknown transaction state id {state_id}")
        return state

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepared(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_BY_ID = {s.id: s for s in TxnState}
_BY_NAME = {s.display_name: s for s in TxnState}

_S = TxnState
# state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTxnTransition(IllegalTransition):
    def __init__(self, transactional_id: str, current: TxnState, target: TxnState) -> None:
        self.transactional_id = transactional_id
        super().__init__(
            f"transactional id {transactional_id!r} cannot move",
            current,
            target,
            VALID_PREVIOUS_STATES[target],
        )


def check_transition(transactional_id: str, current: TxnState, target: TxnState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTxnTransition(transactional_id, current, target)
