"""A ``__transaction_state`` partition moving between coordinators (a cluster): the
broker that gains its lease loads it (its ids answer COORDINATOR_LOAD_IN_PROGRESS
meanwhile), finishes what it left prepared with its lease epoch as coordinator epoch,
and aborts what ran past its timeout; the broker that lost it answers NOT_COORDINATOR
and stops its marker jobs. On a manual clock."""

from __future__ import annotations

import itertools

from txn_context import TIMEOUT_MS, TxnContext

from slipstream.coordinator.transactions import TxnState
from slipstream.protocol.errors import ErrorCode

E = ErrorCode
TP = ("orders", 0)
TP_ELSEWHERE = ("orders", 5)


def two_ids_in_different_partitions(ctx: TxnContext) -> tuple[str, str]:
    first = "tx-0"
    second = next(
        f"tx-{i}"
        for i in itertools.count(1)
        if ctx.coordinator.partition_for(f"tx-{i}") != ctx.coordinator.partition_for(first)
    )
    return first, second


def begin(ctx: TxnContext, tid: str) -> tuple[int, int]:
    r = ctx.init(tid)
    assert r.error_code == E.NONE
    assert ctx.add(tid, r.producer_id, r.producer_epoch, TP, TP_ELSEWHERE) == {TP: E.NONE, TP_ELSEWHERE: E.NONE}
    return r.producer_id, r.producer_epoch


def new_owner(old: TxnContext, partition: int, lease_epoch: int) -> TxnContext:
    """A coordinator on another broker that owns nothing but gains ``partition``."""
    fresh = TxnContext(config=old.config, start_ms=old.now, producer_ids=itertools.count(5000))
    fresh.log = list(old.log)
    coordinator = fresh.coordinator
    coordinator.disown(range(old.config.transaction_state_num_partitions))
    coordinator.begin_loading([partition], {partition: lease_epoch})
    for record in fresh.log:
        if record.partition == partition:
            coordinator.replay(record.key, record.value, fresh.now)
    fresh.run(coordinator.finish_loading(fresh.now, [partition]))
    return fresh


def test_ids_of_a_disowned_partition_answer_not_coordinator_and_others_are_served() -> None:
    ctx = TxnContext()
    mine, theirs = two_ids_in_different_partitions(ctx)
    ctx.coordinator.disown([ctx.coordinator.partition_for(theirs)])
    assert ctx.init(theirs).error_code == E.NOT_COORDINATOR
    assert ctx.init(mine).error_code == E.NONE


def test_ids_of_a_loading_partition_wait_while_others_are_served() -> None:
    ctx = TxnContext()
    mine, loading = two_ids_in_different_partitions(ctx)
    pid, epoch = begin(ctx, mine)
    ctx.coordinator.begin_loading([ctx.coordinator.partition_for(loading)], {})
    assert ctx.init(loading).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.end(mine, pid, epoch, True) == E.NONE
    assert len(ctx.write_markers()) == 1
    assert ctx.state(mine) is TxnState.COMPLETE_COMMIT


def test_the_new_owner_finishes_a_prepared_commit_with_its_lease_epoch() -> None:
    old = TxnContext()
    moving, staying = two_ids_in_different_partitions(old)
    pid, epoch = begin(old, moving)
    begin(old, staying)
    assert old.end(moving, pid, epoch, True) == E.NONE  # PrepareCommit durable, markers not written
    (old_job,) = old.markers
    partition = old.coordinator.partition_for(moving)

    dropped = old.coordinator.disown([partition])
    assert dropped == [moving]
    assert not old.coordinator.is_current(old_job)  # its marker job stops
    assert old.end(moving, pid, epoch, True) == E.NOT_COORDINATOR
    assert old.state(staying) is TxnState.ONGOING

    new = new_owner(old, partition, lease_epoch=7)
    assert new.state(staying) is None  # not its partition
    (job,) = new.markers
    assert (job.commit, job.producer_id, job.producer_epoch, job.coordinator_epoch) == (True, pid, epoch, 7)
    assert job.partitions == {TP, TP_ELSEWHERE}
    assert new.coordinator.is_current(job)
    new.write_markers()
    assert new.state(moving) is TxnState.COMPLETE_COMMIT
    assert new.end(moving, pid, epoch, True) == E.NONE  # the producer's retry


def test_the_new_owner_continues_an_ongoing_transaction() -> None:
    old = TxnContext()
    moving, _ = two_ids_in_different_partitions(old)
    pid, epoch = begin(old, moving)
    partition = old.coordinator.partition_for(moving)
    old.coordinator.disown([partition])
    new = new_owner(old, partition, lease_epoch=3)
    assert new.markers == []
    assert new.add(moving, pid, epoch, ("orders", 9)) == {("orders", 9): E.NONE}
    assert new.end(moving, pid, epoch, True) == E.NONE
    (job,) = new.write_markers()
    assert job.partitions == {TP, TP_ELSEWHERE, ("orders", 9)} and job.coordinator_epoch == 3


def test_the_new_owner_aborts_an_ongoing_transaction_past_its_timeout() -> None:
    old = TxnContext()
    moving, _ = two_ids_in_different_partitions(old)
    _, epoch = begin(old, moving)
    partition = old.coordinator.partition_for(moving)
    old.coordinator.disown([partition])
    old.timer.set_now(old.now + TIMEOUT_MS + 1)  # the producer went quiet with the old owner
    new = new_owner(old, partition, lease_epoch=2)
    new.advance(0)
    assert new.state(moving) is TxnState.PREPARE_ABORT
    (job,) = new.markers
    assert not job.commit and job.producer_epoch == epoch + 1 and job.coordinator_epoch == 2


def test_a_disowned_partition_fires_no_timer() -> None:
    ctx = TxnContext()
    moving, _ = two_ids_in_different_partitions(ctx)
    begin(ctx, moving)
    log_length = len(ctx.log)
    ctx.coordinator.disown([ctx.coordinator.partition_for(moving)])
    ctx.advance(TIMEOUT_MS * 2)
    assert len(ctx.log) == log_length and ctx.markers == []


def test_describe_answers_per_partition() -> None:
    from slipstream.protocol.apis.describe_transactions import DescribeTransactionsRequest

    ctx = TxnContext()
    mine, theirs = two_ids_in_different_partitions(ctx)
    begin(ctx, mine)
    ctx.coordinator.disown([ctx.coordinator.partition_for(theirs)])
    described = ctx.coordinator.describe_transactions(DescribeTransactionsRequest(transactional_ids=[mine, theirs]))
    assert [s.error_code for s in described.transaction_states] == [E.NONE, E.NOT_COORDINATOR]
