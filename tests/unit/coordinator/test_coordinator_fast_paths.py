"""The coordinator's hot paths give exactly what the general ones would.

Hand-written record encoders vs the declarations, ``apply`` vs ``replay``,
the cached group -> partition mapping, and sessions extended without
rescheduling their timer on every heartbeat or commit.
"""

from __future__ import annotations

import pytest
from coord_context import SESSION_MS, GroupContext

from slipstream.coordinator import GroupCoordinator, GroupState, ManualTimer
from slipstream.coordinator import records as rec
from slipstream.coordinator.offset_and_metadata import OffsetAndMetadata
from slipstream.protocol import group_records as gr
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.versioned_records import encode_versioned

S = GroupState
NAMES = ["g", "", "a-b", "ünïcödé-группа", "x" * 300, "emoji-\U0001f600"]


@pytest.mark.parametrize("group", NAMES)
@pytest.mark.parametrize("partition", [0, 7, 2**31 - 1])
def test_offset_commit_key_matches_the_declaration(group: str, partition: int) -> None:
    key = gr.OffsetCommitKey(group=group, topic=group[::-1], partition=partition)
    declared = encode_versioned(1, key, False)
    assert gr.offset_commit_key(group, group[::-1], partition) == declared


@pytest.mark.parametrize("metadata", ["", "meta", "ü" * 40])
@pytest.mark.parametrize(("epoch", "expire"), [(-1, -1), (5, -1), (-1, 1_700_000_000_000), (3, 99)])
def test_offset_commit_value_bytes_match_the_declaration(metadata: str, epoch: int, expire: int) -> None:
    value = gr.OffsetCommitValue(
        offset=2**40, leader_epoch=epoch, metadata=metadata, commit_timestamp=1_600_000_000_000,
        expire_timestamp=expire,
    )
    fast = gr.offset_commit_value_bytes(2**40, epoch, metadata, 1_600_000_000_000, expire)
    assert fast == gr.encode_offset_commit_value(value)
    assert gr.decode_offset_commit_value(fast).offset == 2**40


@pytest.mark.parametrize("om", [
    OffsetAndMetadata(10, 4, "m", 1_000, -1),
    OffsetAndMetadata(10, -1, "", 1_000, -1),
    # Written as v1 (explicit expiry), which has no leader epoch: replay drops it.
    OffsetAndMetadata(10, 4, "m", 1_000, 50_000),
])
def test_apply_of_a_commit_record_equals_replaying_its_bytes(om: OffsetAndMetadata) -> None:
    record = rec.offset_commit_record(3, "g", "t", 1, om)
    assert record.commit is not None
    applied = GroupCoordinator(timer=ManualTimer())
    replayed = GroupCoordinator(timer=ManualTimer())
    applied.apply(record, 5)
    replayed.replay(record.key, record.value, 5)
    assert applied.committed_offsets("g") == replayed.committed_offsets("g")
    expected_epoch = om.leader_epoch if om.expire_timestamp_ms == -1 else -1
    assert replayed.committed_offsets("g")[("t", 1)].leader_epoch == expected_epoch


def test_apply_of_other_records_replays_them() -> None:
    coordinator = GroupCoordinator(timer=ManualTimer())
    coordinator.apply(rec.offset_commit_record(0, "g", "t", 0, OffsetAndMetadata(1, -1, "", 0)), 0)
    coordinator.apply(rec.offset_tombstone(0, "g", "t", 0), 0)
    assert coordinator.committed_offsets("g") == {}


def test_records_compare_by_partition_key_and_value_only() -> None:
    om = OffsetAndMetadata(1, -1, "", 0)
    built = rec.offset_commit_record(2, "g", "t", 0, om)
    assert built == gr_record(2, built.key, built.value)


def gr_record(partition: int, key: bytes, value: bytes | None) -> rec.Record:
    return rec.Record(partition, key, value)


@pytest.mark.parametrize("group", NAMES)
def test_cached_partition_for_matches_the_hash(group: str) -> None:
    uncached = rec.partition_for.__wrapped__  # type: ignore[attr-defined]
    for n in (1, 50, 7):
        assert rec.partition_for(group, n) == uncached(group, n)


def _stable(ctx: GroupContext) -> tuple[str, int]:
    call = ctx.join_new("g")
    ctx.advance_until_done(call)
    member = call.response.member_id
    generation = call.response.generation_id
    assert ctx.sync("g", generation, member, {member: b"A"}).response.error_code == 0
    assert ctx.state("g") is S.STABLE
    return member, generation


@pytest.mark.parametrize("keep_alive", ["heartbeat", "commit"])
def test_a_session_ends_exactly_one_timeout_after_the_last_heartbeat_or_commit(
    ctx: GroupContext, keep_alive: str
) -> None:
    member, generation = _stable(ctx)
    for _ in range(5):  # keep alive every 3 s, several times within one session timeout
        ctx.advance(3_000)
        if keep_alive == "heartbeat":
            assert ctx.heartbeat("g", generation, member).error == ErrorCode.NONE
        else:
            call = ctx.commit("g", {("t", 0): 1}, member_id=member, generation=generation)
            assert call.response.topics[0].partitions[0].error_code == 0
    group = ctx.coordinator.group("g")
    assert group is not None
    ctx.advance(SESSION_MS - 1)
    assert group.has_member(member)
    ctx.advance(1)
    assert not group.has_member(member)
    assert ctx.state("g") in (S.PREPARING_REBALANCE, S.EMPTY)


def test_a_session_extended_lazily_is_still_cut_short_by_leaving(ctx: GroupContext) -> None:
    member, generation = _stable(ctx)
    ctx.advance(1_000)
    assert ctx.heartbeat("g", generation, member).error == ErrorCode.NONE
    assert ctx.leave("g", (member, None)).response.error_code == 0
    assert ctx.state("g") is S.EMPTY
    group = ctx.coordinator.group("g")
    assert group is not None and not group.has_member(member)
    ctx.advance(2 * SESSION_MS)  # the old session timer finds nothing to expire
    assert ctx.state("g") is S.EMPTY
    assert not ctx.coordinator.group_manager.sessions.armed
    assert not ctx.coordinator.group_manager.sessions.due


def test_a_heartbeat_does_not_move_an_armed_session_timer(ctx: GroupContext) -> None:
    from slipstream.coordinator.classic_sessions import heartbeat_key

    member, generation = _stable(ctx)
    key = heartbeat_key("g", member)
    ctx.advance(1_000)
    assert ctx.heartbeat("g", generation, member).error == ErrorCode.NONE  # (re)arms the timer
    armed = ctx.timer.deadline(key)
    assert armed is not None
    ctx.advance(3_000)
    assert ctx.heartbeat("g", generation, member).error == ErrorCode.NONE
    assert ctx.timer.deadline(key) == armed  # noted, not rescheduled
    ctx.advance(armed - ctx.now)  # fires at the old deadline and re-arms for the rest
    assert ctx.timer.deadline(key) == armed + 3_000


def test_apply_of_consumer_group_records_equals_replaying_their_bytes() -> None:
    """Records a consumer (KIP-848) group writes carry their key and value: ``apply`` skips decoding."""
    from consumer_group_client import Member, set_topics, settle

    ctx = GroupContext()  # replays the bytes of every record
    set_topics(ctx, t=6, u=2)
    members = [Member(ctx, "g", topics=["t"]) for _ in range(3)]
    members.append(Member(ctx, "g", regex="u.*"))
    members.append(Member(ctx, "g", topics=["t"], instance_id="static-1"))
    for m in members:
        m.join()
    settle(*members)
    members[0].leave()
    members[4].leave(epoch=-2)
    settle(*members[1:4])
    assert all(r.consumer is not None for r in ctx.log if r.commit is None)

    applied = GroupCoordinator(timer=ManualTimer())
    for record in ctx.log:
        applied.apply(record, ctx.now)

    def state(coordinator: GroupCoordinator) -> tuple[object, ...]:
        group = coordinator.consumer_group("g")
        assert group is not None
        return (
            group.group_epoch,
            group.target_assignment_epoch,
            group.metadata_hash,
            dict(group.resolved_regexes),
            dict(group.members),
            {m: group.target_assignment_of(m) for m in group.members},
        )

    assert state(applied) == state(ctx.coordinator)
