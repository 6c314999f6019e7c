"""TxnOffsetCommit: offsets pending per producer until the transaction's marker."""

from __future__ import annotations

from coord_context import GroupContext

from slipstream.coordinator import CoordinatorConfig
from slipstream.protocol.apis.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from slipstream.protocol.errors import ErrorCode

E = ErrorCode
PID, EPOCH = 77, 3


def txn_commit(
    ctx: GroupContext,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    producer_id: int = PID,
    producer_epoch: int = EPOCH,
    version: int = 4,
    generation: int = -1,
    member_id: str = "",
    metadata: str | None = "m",
) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    request = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=group,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=generation,
        member_id=member_id,
        topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    response = ctx.send("txn_offset_commit", request, version).response
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def stable_errors(ctx: GroupContext, group: str) -> dict[tuple[str, int], int]:
    (g,) = ctx.fetch(group, {"t": [0, 1]}, require_stable=True).response.groups
    return {(t.name, p.partition_index): p.error_code for t in g.topics for p in t.partitions}


def test_pending_until_commit_marker() -> None:
    ctx = GroupContext()
    ctx.commit("g", {("t", 0): 5})
    assert txn_commit(ctx, "g", {("t", 0): 10, ("t", 1): 20}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    # Written in the producer's transactional batch.
    assert [r.producer for r in ctx.log[-2:]] == [(PID, EPOCH), (PID, EPOCH)]
    # Not visible yet; require_stable fetches are told to retry.
    assert ctx.fetched("g", {"t": [0, 1]}) == {("t", 0): 5, ("t", 1): -1}
    assert stable_errors(ctx, "g") == {("t", 0): E.UNSTABLE_OFFSET_COMMIT, ("t", 1): E.UNSTABLE_OFFSET_COMMIT}
    ctx.coordinator.replay_end_transaction(PID, commit=True)
    assert ctx.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): 20}
    assert stable_errors(ctx, "g") == {("t", 0): E.NONE, ("t", 1): E.NONE}


def test_abort_marker_drops_them() -> None:
    ctx = GroupContext()
    ctx.commit("g", {("t", 0): 5})
    txn_commit(ctx, "g", {("t", 0): 10})
    ctx.coordinator.replay_end_transaction(PID, commit=False)
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 5}
    assert stable_errors(ctx, "g")[("t", 0)] == E.NONE
    # A second marker for the same producer changes nothing.
    ctx.coordinator.replay_end_transaction(PID, commit=True)
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 5}


def test_producers_are_kept_apart() -> None:
    ctx = GroupContext()
    txn_commit(ctx, "g", {("t", 0): 10}, producer_id=1)
    txn_commit(ctx, "g", {("t", 1): 20}, producer_id=2)
    ctx.coordinator.replay_end_transaction(1, commit=True)
    assert ctx.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): -1}
    assert stable_errors(ctx, "g") == {("t", 0): E.NONE, ("t", 1): E.UNSTABLE_OFFSET_COMMIT}
    ctx.coordinator.replay_end_transaction(2, commit=False)
    assert stable_errors(ctx, "g")[("t", 1)] == E.NONE


def test_replay_of_the_log_agrees() -> None:
    ctx = GroupContext()
    txn_commit(ctx, "g", {("t", 0): 10})
    txn_commit(ctx, "g", {("t", 1): 20}, producer_id=PID + 1)
    # The log as written: the records, then (as control batches) a COMMIT for PID only.
    fresh = GroupContext(start_loaded=False)
    fresh.coordinator.begin_loading()
    for record in ctx.log:
        fresh.coordinator.replay(record.key, record.value, fresh.now, *(record.producer or (-1, -1)))
    fresh.coordinator.replay_end_transaction(PID, commit=True)
    fresh.coordinator.finish_loading(fresh.now)
    assert fresh.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): -1}
    assert stable_errors(fresh, "g")[("t", 1)] == E.UNSTABLE_OFFSET_COMMIT


def test_generation_and_member_checks() -> None:
    ctx = GroupContext()
    a, _other = ctx.form_group("g", 2)
    ok = txn_commit(ctx, "g", {("t", 0): 1}, generation=a.generation, member_id=a.member_id)
    assert ok == {("t", 0): E.NONE}
    assert txn_commit(ctx, "g", {("t", 0): 1}, generation=a.generation + 1, member_id=a.member_id) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert txn_commit(ctx, "g", {("t", 0): 1}, generation=a.generation, member_id="stranger") == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    # v0-2 carry no member fields: accepted whatever the group's state (as Kafka).
    assert txn_commit(ctx, "g", {("t", 0): 1}, version=2) == {("t", 0): E.NONE}
    # A group that does not exist cannot have a generation.
    assert txn_commit(ctx, "nobody", {("t", 0): 1}, generation=3, member_id="m") == {("t", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(ctx, "", {("t", 0): 1}) == {("t", 0): E.INVALID_GROUP_ID}


def test_metadata_too_large() -> None:
    ctx = GroupContext(config=CoordinatorConfig(offsets_topic_num_partitions=4, offset_metadata_max_bytes=3))
    assert txn_commit(ctx, "g", {("t", 0): 1}, metadata="toolong") == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}


def test_retention_leaves_pending_partitions_alone() -> None:
    ctx = GroupContext()
    ctx.commit("g", {("t", 0): 5})
    txn_commit(ctx, "g", {("t", 0): 10})
    ctx.advance(ctx.config.offsets_retention_ms + ctx.config.offsets_retention_check_interval_ms)
    ctx.coordinator.replay_end_transaction(PID, commit=True)
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 10}


def test_fenced_producer_cannot_commit_offsets() -> None:
    """After the marker of a newer epoch (the coordinator fenced the producer), a
    TxnOffsetCommit of the old epoch would otherwise wait, pending, for the new
    instance's next marker and be committed by it."""
    ctx = GroupContext()
    ctx.coordinator.replay_end_transaction(PID, commit=False, producer_epoch=EPOCH + 1)
    assert txn_commit(ctx, "g", {("t", 0): 10}) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert stable_errors(ctx, "g")[("t", 0)] == E.NONE
    assert txn_commit(ctx, "g", {("t", 0): 10}, producer_epoch=EPOCH + 1) == {("t", 0): E.NONE}
    # Its own transactional batches raise the epoch the group knows, in a replayed log too.
    fresh = GroupContext()
    for record in ctx.log:
        fresh.coordinator.replay(record.key, record.value, fresh.now, *(record.producer or (-1, -1)))
    assert txn_commit(fresh, "g", {("t", 0): 11}) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
