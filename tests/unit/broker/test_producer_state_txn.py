"""PartitionProducerState's transactions, as a pure object: open transactions, the LSO,
markers, fencing, and the rebuild from batch headers."""

from __future__ import annotations

import pytest

from slipstream.broker.producer_state import CompletedTxn, PartitionProducerState
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.record_batch import BatchHeader, parse_header
from slipstream.protocol.records import (
    CONTROL_ABORT,
    ProducerRecord,
    build_batch,
    build_control_batch,
)


def data(pid: int, offset: int, seq: int = 0, n: int = 1, *, epoch: int = 0, txn: bool = True) -> BatchHeader:
    raw = build_batch([ProducerRecord(b"k", b"v") for _ in range(n)], base_offset=offset, producer_id=pid,
                      producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    return parse_header(raw)


def marker(pid: int, offset: int, *, epoch: int = 0) -> BatchHeader:
    return parse_header(build_control_batch(CONTROL_ABORT, producer_id=pid, producer_epoch=epoch,
                                            timestamp_ms=0, base_offset=offset))


def append(state: PartitionProducerState, header: BatchHeader) -> None:
    assert state.check(header) is None
    state.record(header, header.base_offset)


def test_lso_follows_the_earliest_open_transaction() -> None:
    s = PartitionProducerState()
    assert s.last_stable_offset(0) == 0 and s.first_unstable_offset() is None
    append(s, data(1, 0, n=2))  # 0-1
    append(s, data(2, 2))  # 2
    append(s, data(1, 3, seq=2))  # 3: same transaction, still from 0
    assert s.open_transactions() == [(1, 0), (2, 2)]
    assert s.last_stable_offset(4) == 0
    assert s.record_marker(1, 0, 5, 4, aborted=True) == CompletedTxn(1, 0, 4, 2, True)
    assert s.last_stable_offset(5) == 2
    assert s.record_marker(2, 0, 5, 5, aborted=False) == CompletedTxn(2, 2, 5, 6, False)
    assert s.last_stable_offset(6) == 6
    assert s.record_marker(2, 0, 5, 6, aborted=False) is None  # nothing open: no transaction ended
    active = {p.producer_id: p for p in s.active_producers()}
    assert (active[1].coordinator_epoch, active[1].current_txn_start_offset) == (5, -1)


def test_fencing_and_mixed_writes() -> None:
    s = PartitionProducerState()
    append(s, data(1, 0, epoch=3))
    with pytest.raises(KafkaError) as mixed:
        s.check(data(1, 1, seq=1, epoch=3, txn=False))
    assert mixed.value.code == ErrorCode.INVALID_TXN_STATE
    with pytest.raises(KafkaError) as stale:
        s.check_marker(1, 2, 0)
    assert stale.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    # the coordinator aborts with a bumped epoch: the old epoch is fenced afterwards
    s.check_marker(1, 4, 1)
    s.record_marker(1, 4, 1, 1, aborted=True)
    with pytest.raises(KafkaError) as zombie:
        s.check(data(1, 2, seq=1, epoch=3))
    assert zombie.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as old_coordinator:
        s.check_marker(1, 4, 0)
    assert old_coordinator.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # the new epoch starts its sequences at 0
    with pytest.raises(KafkaError) as gap:
        s.check(data(1, 2, seq=5, epoch=4))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    append(s, data(1, 2, seq=0, epoch=4))
    assert s.open_transaction(1) == 2


def test_epoch_bump_inside_a_transaction_keeps_it_open() -> None:
    s = PartitionProducerState()
    append(s, data(1, 0, epoch=0))
    append(s, data(1, 1, seq=0, epoch=1))  # Kafka keeps the transaction's first offset
    assert s.open_transaction(1) == 0


def test_rebuild_from_headers_keeps_unended_transactions_open() -> None:
    headers = [
        data(1, 0, n=2), data(-1, 2, txn=False), data(2, 3), marker(1, 4), data(3, 5, txn=False),
        data(3, 6, seq=1, txn=False), data(4, 7),
    ]
    s = PartitionProducerState()
    assert s.rebuild(headers) == 4
    assert s.open_transactions() == [(2, 3), (4, 7)]
    assert s.last_stable_offset(8) == 3
    # the idempotent producer's sequence survives the rebuild
    assert s.check(data(3, 5, seq=0, txn=False)) is not None  # a retry: the cached original
