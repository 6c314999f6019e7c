"""The transactional producer's state table and its sorting of errors (pure)."""

from __future__ import annotations

import pytest

from slipstream.client.transactions import (
    VALID_PREVIOUS,
    TransactionError,
    TransactionState,
    TransactionStateError,
    TxnState,
    classify,
)
from slipstream.protocol.errors import ErrorCode, KafkaError

S = TxnState


def ready() -> TransactionState:
    txn = TransactionState("t")
    txn.transition(S.INITIALIZING)
    txn.transition(S.READY)
    return txn


def test_happy_path_and_usage_errors() -> None:
    txn = TransactionState("t")
    with pytest.raises(TransactionStateError, match="Uninitialized"):
        txn.require(S.READY, what="begin_transaction")
    txn = ready()
    txn.transition(S.IN_TRANSACTION)
    txn.partitions.add(("a", 0))
    txn.transition(S.COMMITTING)
    txn.transition(S.READY)
    assert txn.partitions == set() and not txn.has_work
    with pytest.raises(TransactionStateError):
        txn.transition(S.COMMITTING)  # no transaction to commit


def test_abortable_error_needs_an_abort() -> None:
    txn = ready()
    txn.transition(S.IN_TRANSACTION)
    error = txn.fail(KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, "a record failed"))
    assert error.abortable and txn.state is S.ABORTABLE_ERROR
    with pytest.raises(TransactionError):
        txn.require(S.IN_TRANSACTION, what="commit_transaction")  # the error, not a usage error
    txn.transition(S.ABORTING)
    txn.transition(S.READY)
    assert txn.error is None


def test_fatal_error_ends_the_producer() -> None:
    txn = ready()
    txn.transition(S.IN_TRANSACTION)
    error = txn.fail(classify(ErrorCode.PRODUCER_FENCED, "EndTxn"))
    assert error.fatal and txn.state is S.FATAL_ERROR
    for target in (S.ABORTING, S.READY):
        with pytest.raises(TransactionError) as info:
            txn.transition(target)
        assert info.value is error
    # A later abortable error does not hide the fatal one.
    assert txn.fail(KafkaError(ErrorCode.REQUEST_TIMED_OUT, "late")) is error


def test_error_classes() -> None:
    assert classify(ErrorCode.PRODUCER_FENCED, "x").fatal
    assert classify(ErrorCode.INVALID_TXN_STATE, "x").fatal
    assert classify(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "x").fatal
    assert classify(ErrorCode.INVALID_PRODUCER_EPOCH, "x").fatal
    # The group refusing a zombie's offsets: abortable (Java's CommitFailedException).
    assert classify(ErrorCode.ILLEGAL_GENERATION, "x", fenced_is_fatal=False).abortable
    assert classify(ErrorCode.INVALID_PRODUCER_EPOCH, "x", fenced_is_fatal=False).abortable
    assert classify(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "x").abortable
    # Every state can reach FatalError; nothing leaves it but FatalError.
    assert all(s in VALID_PREVIOUS[S.FATAL_ERROR] for s in TxnState)
    assert all(S.FATAL_ERROR not in VALID_PREVIOUS[s] for s in TxnState if s is not S.FATAL_ERROR)
