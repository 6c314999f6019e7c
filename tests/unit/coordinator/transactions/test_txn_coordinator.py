"""The transaction coordinator's state machine on a manual clock."""

from __future__ import annotations

import pytest
from txn_context import CONFIG, TIMEOUT_MS, TxnContext

from slipstream.coordinator import RequestContext
from slipstream.coordinator.records import partition_for
from slipstream.coordinator.transactions import (
    VALID_PREVIOUS_STATES,
    IllegalTxnTransition,
    TxnState,
    TxnTransit,
)
from slipstream.coordinator.transactions.metadata import MAX_EPOCH
from slipstream.coordinator.transactions.state import check_transition
from slipstream.protocol import txn_records as tr
from slipstream.protocol.apis.describe_transactions import DescribeTransactionsRequest
from slipstream.protocol.apis.list_transactions import ListTransactionsRequest
from slipstream.protocol.errors import ErrorCode

E = ErrorCode
TP = ("orders", 0)
TP2 = ("orders", 1)


@pytest.fixture
def ctx() -> TxnContext:
    return TxnContext()


def begin(ctx: TxnContext, tid: str = "t1") -> tuple[int, int]:
    r = ctx.init(tid)
    assert r.error_code == E.NONE
    assert ctx.add(tid, r.producer_id, r.producer_epoch, TP) == {TP: E.NONE}
    return r.producer_id, r.producer_epoch


def decoded(ctx: TxnContext) -> list[TxnTransit | None]:
    return [None if r.value is None else TxnTransit.from_value(tr.decode_value(r.value)) for r in ctx.log]


# ------------------------------------------------------------------ the transition table


def test_transition_table_is_kafkas() -> None:
    S = TxnState
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert [s.id for s in S] == list(range(8))
    with pytest.raises(IllegalTxnTransition, match="PrepareCommit"):
        check_transition("x", S.EMPTY, S.PREPARE_COMMIT)
    with pytest.raises(IllegalTxnTransition):
        check_transition("x", S.PREPARE_COMMIT, S.ONGOING)


# ------------------------------------------------------------------ InitProducerId


def test_new_transactional_id_gets_a_producer_id_and_epoch_zero(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
    assert ctx.state("t1") is TxnState.EMPTY
    (transit,) = decoded(ctx)
    assert transit is not None and transit.state is TxnState.EMPTY and transit.timeout_ms == TIMEOUT_MS
    assert ctx.log[0].partition == partition_for("t1", CONFIG.transaction_state_num_partitions)


def test_init_again_bumps_the_epoch_and_keeps_the_id(ctx: TxnContext) -> None:
    first = ctx.init("t1")
    second = ctx.init("t1")
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    # The old epoch is fenced.
    assert ctx.add_error("t1", first.producer_id, 0, TP) == E.PRODUCER_FENCED


@pytest.mark.parametrize("timeout", [0, -1, CONFIG.transaction_max_timeout_ms + 1])
def test_transaction_timeout_is_bounded(ctx: TxnContext, timeout: int) -> None:
    assert ctx.init("t1", timeout_ms=timeout).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert ctx.log == []


def test_empty_transactional_id_is_invalid(ctx: TxnContext) -> None:
    assert ctx.init("").error_code == E.INVALID_REQUEST


def test_kip360_expected_producer_and_epoch(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    pid = r.producer_id
    bumped = ctx.init("t1", producer_id=pid, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (E.NONE, pid, 1)
    # A retry of that bump (the answer was lost) gets the same epoch back.
    retry = ctx.init("t1", producer_id=pid, producer_epoch=0)
    assert (retry.error_code, retry.producer_epoch) == (E.NONE, 1)
    # An epoch the coordinator never handed out, or another producer id: fenced.
    assert ctx.init("t1", producer_id=pid, producer_epoch=7).error_code == E.PRODUCER_FENCED
    assert ctx.init("t1", producer_id=pid + 99, producer_epoch=0).error_code == E.PRODUCER_FENCED
    # v3 knows no PRODUCER_FENCED: it gets INVALID_PRODUCER_EPOCH.
    assert ctx.init("t1", producer_id=pid + 99, producer_epoch=0, version=3).error_code == E.INVALID_PRODUCER_EPOCH
    # Only one of id and epoch given.
    assert ctx.init("t1", producer_id=pid, producer_epoch=-1).error_code == E.INVALID_REQUEST


def test_exhausted_epoch_rotates_the_producer_id(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    txn = ctx.coordinator.transaction("t1")
    assert txn is not None
    txn.producer_epoch = MAX_EPOCH - 1
    rotated = ctx.init("t1")
    assert rotated.producer_id != r.producer_id and rotated.producer_epoch == 0
    # The producer that held the exhausted epoch may retry with it and gets the new id.
    again = ctx.coordinator.transaction("t1")
    assert again is not None and again.last_producer_id == r.producer_id


def test_init_while_ongoing_fences_the_producer_and_aborts(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    r = ctx.init("t1")
    assert r.error_code == E.CONCURRENT_TRANSACTIONS
    assert ctx.state() is TxnState.PREPARE_ABORT
    (job,) = ctx.markers
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (pid, epoch + 1, False, {TP})
    # The zombie is fenced at once, before the abort completes.
    assert ctx.end("t1", pid, epoch, True) == E.PRODUCER_FENCED
    assert ctx.end("t1", pid, epoch, True, version=1) == E.INVALID_PRODUCER_EPOCH
    # Completing: the new producer retries and gets the next epoch.
    assert ctx.init("t1").error_code == E.CONCURRENT_TRANSACTIONS
    ctx.write_markers()
    assert ctx.state() is TxnState.COMPLETE_ABORT
    retried = ctx.init("t1")
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (E.NONE, pid, epoch + 2)


# ------------------------------------------------------------------ AddPartitions / AddOffsets


def test_add_partitions_starts_the_transaction(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    start = ctx.now
    assert ctx.add("t1", r.producer_id, 0, TP, TP2) == {TP: E.NONE, TP2: E.NONE}
    txn = ctx.coordinator.transaction("t1")
    assert txn is not None
    assert (txn.state, txn.partitions, txn.start_ms) == (TxnState.ONGOING, {TP, TP2}, start)
    written = len(ctx.log)
    ctx.advance(10)
    # Already in the transaction: answered without a write; the start time stays.
    assert ctx.add("t1", r.producer_id, 0, TP) == {TP: E.NONE}
    assert len(ctx.log) == written
    ctx.add("t1", r.producer_id, 0, ("other", 3))
    txn = ctx.coordinator.transaction("t1")
    assert txn is not None and txn.start_ms == start and len(txn.partitions) == 3


def test_add_partitions_checks_the_producer(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    assert ctx.add_error("nope", r.producer_id, 0, TP) == E.INVALID_PRODUCER_ID_MAPPING
    assert ctx.add_error("t1", r.producer_id + 1, 0, TP) == E.INVALID_PRODUCER_ID_MAPPING
    assert ctx.add_error("t1", r.producer_id, 1, TP) == E.PRODUCER_FENCED
    assert ctx.add_error("", r.producer_id, 0, TP) == E.INVALID_REQUEST


def test_add_offsets_adds_the_groups_offsets_partition(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    assert ctx.add_offsets("t1", r.producer_id, 0, "my-group") == E.NONE
    txn = ctx.coordinator.transaction("t1")
    assert txn is not None
    assert txn.partitions == {("__consumer_offsets", partition_for("my-group", CONFIG.offsets_topic_num_partitions))}
    assert ctx.add_offsets("t1", r.producer_id, 5, "my-group") == E.PRODUCER_FENCED
    assert ctx.add_offsets("t1", r.producer_id, 5, "my-group", version=1) == E.INVALID_PRODUCER_EPOCH


def test_verify_only(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    result = ctx.coordinator.verify_partitions("t1", pid, epoch, [TP, TP2])
    errors = {(t.name, p.partition_index): p.partition_error_code for t in result.topic_results for p in t.results_by_partition}
    assert errors == {TP: E.NONE, TP2: E.TRANSACTION_ABORTABLE}
    written = len(ctx.log)
    assert ctx.coordinator.verify_partitions("t1", pid, epoch + 1, [TP]).topic_results[0].results_by_partition[
        0
    ].partition_error_code == E.PRODUCER_FENCED
    assert len(ctx.log) == written


# ------------------------------------------------------------------ EndTxn


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_prepares_answers_then_completes_after_markers(ctx: TxnContext, commit: bool) -> None:
    pid, epoch = begin(ctx)
    assert ctx.end("t1", pid, epoch, commit) == E.NONE
    prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    assert ctx.state() is prepared
    (job,) = ctx.markers
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (pid, epoch, commit, {TP})
    # While the markers are written everything else waits.
    assert ctx.end("t1", pid, epoch, commit) == E.CONCURRENT_TRANSACTIONS
    assert ctx.end("t1", pid, epoch, not commit) == E.INVALID_TXN_STATE
    assert ctx.add_error("t1", pid, epoch, TP2) == E.CONCURRENT_TRANSACTIONS
    assert ctx.init("t1").error_code == E.CONCURRENT_TRANSACTIONS
    ctx.write_markers()
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    assert ctx.state() is done
    last = decoded(ctx)[-1]
    assert last is not None and last.state is done and last.partitions == frozenset()
    # A retried EndTxn of the same outcome succeeds; the other outcome is invalid.
    assert ctx.end("t1", pid, epoch, commit) == E.NONE
    assert ctx.end("t1", pid, epoch, not commit) == E.INVALID_TXN_STATE
    # The next transaction starts from the completed state.
    assert ctx.add("t1", pid, epoch, TP2) == {TP2: E.NONE}
    assert ctx.state() is TxnState.ONGOING


def test_end_txn_without_transaction_is_invalid(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    assert ctx.end("t1", r.producer_id, 0, True) == E.INVALID_TXN_STATE
    assert ctx.end("t1", r.producer_id + 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING


def test_markers_written_twice_complete_once(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    ctx.end("t1", pid, epoch, True)
    (job,) = ctx.markers
    ctx.write_markers()
    written = len(ctx.log)
    ctx.run(job.on_written(ctx.now))
    assert len(ctx.log) == written


def test_failed_append_answers_an_error_and_changes_nothing(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    ctx.fail_appends = E.KAFKA_STORAGE_ERROR
    assert ctx.end("t1", pid, epoch, True) == E.NOT_COORDINATOR
    assert ctx.state() is TxnState.ONGOING and ctx.markers == []
    ctx.fail_appends = E.NONE
    assert ctx.end("t1", pid, epoch, True) == E.NONE


def test_failed_completion_is_retried(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    ctx.end("t1", pid, epoch, True)
    ctx.fail_appends = E.KAFKA_STORAGE_ERROR
    ctx.write_markers()
    assert ctx.state() is TxnState.PREPARE_COMMIT
    ctx.fail_appends = E.NONE
    ctx.advance(1_000)
    assert ctx.state() is TxnState.COMPLETE_COMMIT


# ------------------------------------------------------------------ timers


def test_transaction_timeout_aborts_and_fences(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    ctx.advance(TIMEOUT_MS - 1)
    assert ctx.state() is TxnState.ONGOING
    ctx.advance(1)
    assert ctx.state() is TxnState.PREPARE_ABORT
    (job,) = ctx.markers
    assert (job.commit, job.producer_epoch) == (False, epoch + 1)
    ctx.write_markers()
    assert ctx.state() is TxnState.COMPLETE_ABORT
    # The producer that went quiet is fenced.
    assert ctx.end("t1", pid, epoch, True) == E.PRODUCER_FENCED
    assert ctx.add_error("t1", pid, epoch, TP) == E.PRODUCER_FENCED


def test_timeout_counts_from_the_first_partition_not_the_last(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    ctx.add("t1", r.producer_id, 0, TP)
    ctx.advance(TIMEOUT_MS // 2)
    ctx.add("t1", r.producer_id, 0, TP2)
    ctx.advance(TIMEOUT_MS // 2)
    assert ctx.state() is TxnState.PREPARE_ABORT


def test_committed_transaction_does_not_time_out(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx)
    ctx.end("t1", pid, epoch, True)
    ctx.write_markers()
    ctx.advance(TIMEOUT_MS * 2)
    assert ctx.state() is TxnState.COMPLETE_COMMIT
    assert ctx.markers == []


def test_idle_transactional_id_expires(ctx: TxnContext) -> None:
    ctx.init("t1")
    pid, _epoch = begin(ctx, "t2")  # its timeout aborts it long before
    ctx.advance(CONFIG.transactional_id_expiration_ms - 1)
    assert ctx.state("t1") is TxnState.EMPTY
    ctx.advance(1)
    assert ctx.state("t1") is None
    assert ctx.log[-1].value is None
    response = ctx.coordinator.describe_transactions(DescribeTransactionsRequest(transactional_ids=["t1"]))
    assert response.transaction_states[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    # A new producer with the id starts over with a new producer id.
    assert ctx.init("t1").producer_id not in (1000, pid)


def test_activity_postpones_expiration(ctx: TxnContext) -> None:
    r = ctx.init("t1")
    ctx.advance(CONFIG.transactional_id_expiration_ms - 10)
    ctx.add("t1", r.producer_id, 0, TP)
    ctx.end("t1", r.producer_id, 0, True)
    ctx.write_markers()
    ctx.advance(100)
    assert ctx.state("t1") is TxnState.COMPLETE_COMMIT


# ------------------------------------------------------------------ loading and replay


def test_requests_wait_while_loading(ctx: TxnContext) -> None:
    ctx.coordinator.begin_loading()
    assert ctx.init("t1").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    listed = ctx.coordinator.list_transactions(RequestContext(0), ListTransactionsRequest(), ctx.now)
    assert listed.error_code == E.COORDINATOR_LOAD_IN_PROGRESS


def _scenario(ctx: TxnContext) -> None:
    """init, add, commit (markers), add, abort (markers), fence by a new init (markers)."""
    pid, epoch = begin(ctx)
    ctx.add_offsets("t1", pid, epoch, "g")
    ctx.end("t1", pid, epoch, True)
    ctx.write_markers()
    ctx.add("t1", pid, epoch, TP2)
    ctx.end("t1", pid, epoch, False)
    ctx.write_markers()
    ctx.add("t1", pid, epoch, TP)
    ctx.init("t1")
    ctx.write_markers()
    ctx.init("t1")


def test_replay_after_every_crash_point_agrees_and_finishes_prepared_transactions() -> None:
    full = TxnContext()
    _scenario(full)
    states = [t.state if t else None for t in decoded(full)]
    assert TxnState.PREPARE_COMMIT in states and TxnState.PREPARE_ABORT in states
    for crash_at in range(1, len(full.log) + 1):
        crashed = TxnContext()
        crashed.log = full.log[:crash_at]
        restarted = crashed.reload()
        last = TxnTransit.from_value(tr.decode_value(full.log[crash_at - 1].value or b""))
        txn = restarted.coordinator.transaction("t1")
        assert txn is not None
        assert (txn.state, txn.producer_id, txn.producer_epoch, txn.partitions) == (
            last.state,
            last.producer_id,
            last.producer_epoch,
            last.partitions,
        ), crash_at
        if last.state.is_prepared:
            # The restarted coordinator writes the markers again, then completes.
            (job,) = restarted.markers
            assert job.commit is (last.state is TxnState.PREPARE_COMMIT)
            assert job.partitions == last.partitions and job.producer_epoch == last.producer_epoch
            restarted.write_markers()
            assert restarted.state() in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        else:
            assert restarted.markers == []


def test_ongoing_transaction_times_out_after_restart() -> None:
    ctx = TxnContext()
    begin(ctx)
    ctx.advance(TIMEOUT_MS // 2)
    restarted = ctx.reload()
    restarted.advance(TIMEOUT_MS // 2)
    assert restarted.state() is TxnState.PREPARE_ABORT


def test_transaction_started_before_restart_past_its_timeout_aborts_at_once() -> None:
    ctx = TxnContext()
    begin(ctx)
    ctx.timer.set_now(ctx.now + TIMEOUT_MS * 3)  # the broker was down meanwhile
    restarted = ctx.reload()
    restarted.advance(0)
    assert restarted.state() is TxnState.PREPARE_ABORT


def test_record_layout_is_kafkas() -> None:
    # Key v0: int16 version, int16 length, the id.
    assert tr.encode_key("t1") == b"\x00\x00\x00\x02t1"
    value = TxnTransit(
        producer_id=7,
        producer_epoch=3,
        timeout_ms=60_000,
        state=TxnState.ONGOING,
        partitions=frozenset({("a", 1), ("a", 0)}),
        start_ms=5,
        last_update_ms=6,
    ).to_value()
    data = tr.encode_value(value)
    expected = (
        b"\x00\x00"  # value version 0
        + (7).to_bytes(8, "big")
        + (3).to_bytes(2, "big")
        + (60_000).to_bytes(4, "big")
        + b"\x01"  # Ongoing
        + (1).to_bytes(4, "big")  # one topic
        + b"\x00\x01a"
        + (2).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + (6).to_bytes(8, "big")
        + (5).to_bytes(8, "big")
    )
    assert data == expected
    assert tr.decode_value(data) == value
    # Empty writes a null partition list.
    empty = TxnTransit(7, 3, 60_000, TxnState.EMPTY, frozenset(), -1, 6).to_value()
    assert b"\xff\xff\xff\xff" in tr.encode_value(empty)
    # v1 (flexible) decodes too.
    assert tr.decode_value(tr.encode_value(value, 1)) == value


def test_malformed_records_are_skipped(ctx: TxnContext) -> None:
    ctx.coordinator.replay(tr.encode_key("x"), b"\x00\x09junk")
    ctx.coordinator.replay(b"\x00\x05whatever", b"")
    assert ctx.coordinator.transactions == {}


# ------------------------------------------------------------------ Describe / List


def test_describe_and_list(ctx: TxnContext) -> None:
    pid, epoch = begin(ctx, "a")
    ctx.init("b")
    start = ctx.coordinator.transaction("a").start_ms  # type: ignore[union-attr]
    ctx.advance(5_000)
    described = ctx.coordinator.describe_transactions(DescribeTransactionsRequest(transactional_ids=["a", "zz"]))
    a, zz = described.transaction_states
    assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch) == (E.NONE, "Ongoing", pid, epoch)
    assert (a.transaction_start_time_ms, a.transaction_timeout_ms) == (start, TIMEOUT_MS)
    assert [(t.topic, t.partitions) for t in a.topics] == [("orders", [0])]
    assert zz.error_code == E.TRANSACTIONAL_ID_NOT_FOUND

    def listed(version: int = 1, **filters: object) -> list[str]:
        response = ctx.coordinator.list_transactions(RequestContext(version), ListTransactionsRequest(**filters), ctx.now)
        return [t.transactional_id for t in response.transaction_states]

    assert listed() == ["a", "b"]
    assert listed(state_filters=["Ongoing"]) == ["a"]
    assert listed(producer_id_filters=[pid]) == ["a"]
    # Running longer than the filter; "b" has no transaction (start -1) and passes, as in Kafka.
    assert listed(duration_filter=4_999) == ["a", "b"]
    assert listed(duration_filter=5_000) == ["b"]
    assert listed(version=0, duration_filter=6_000) == ["a", "b"]
    unknown = ctx.coordinator.list_transactions(
        RequestContext(0), ListTransactionsRequest(state_filters=["Bogus", "Empty"]), ctx.now
    )
    assert unknown.unknown_state_filters == ["Bogus"]
    assert [t.transactional_id for t in unknown.transaction_states] == ["b"]
