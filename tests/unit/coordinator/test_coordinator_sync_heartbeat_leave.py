"""SyncGroup, Heartbeat and LeaveGroup, including error tables, fencing and session expiry."""

from __future__ import annotations

import pytest
from coord_context import REBALANCE_MS, SESSION_MS, GroupContext, assignment

from slipstream.coordinator import GroupState
from slipstream.protocol import consumer_protocol as cp
from slipstream.protocol import group_records as gr
from slipstream.protocol.errors import ErrorCode

S = GroupState


def _completing(ctx: GroupContext) -> tuple[str, str]:
    """Two members, join phase done: (leader id, follower id) in CompletingRebalance."""
    a = ctx.join_new("g", client_id="a")
    b = ctx.join_new("g", client_id="b")
    ctx.advance_until_done(a, b)
    assert ctx.state("g") is S.COMPLETING_REBALANCE
    return a.response.member_id, b.response.member_id


def test_followers_wait_for_the_leader_and_get_their_assignment(ctx: GroupContext) -> None:
    leader, follower = _completing(ctx)
    fsync = ctx.sync("g", 1, follower)
    assert not fsync.done
    log_before = len(ctx.log)
    plan = {leader: assignment(t=[0]), follower: assignment(t=[1])}
    lsync = ctx.sync("g", 1, leader, plan)
    assert lsync.response.assignment == plan[leader]
    r = fsync.response
    assert (r.error_code, r.assignment, r.protocol_type, r.protocol_name) == (0, plan[follower], "consumer", "range")
    assert ctx.state("g") is S.STABLE
    # The assignment was persisted (before anyone got an answer) as Kafka's GroupMetadataValue v3.
    (record,) = ctx.log[log_before:]
    assert record.partition == ctx.coordinator.partition_for("g")
    assert record.value is not None and record.value[:2] == b"\x00\x03"
    value = gr.decode_group_metadata_value(record.value)
    assert value.generation == 1 and value.leader == leader and value.protocol == "range"
    assert {m.member_id: m.assignment for m in value.members} == plan
    assert [m.client_id for m in value.members] == ["a", "b"]
    _, decoded = cp.decode_assignment(r.assignment)
    assert decoded.assigned_partitions[0].partitions == [1]


def test_member_missing_from_leaders_assignment_gets_an_empty_one(ctx: GroupContext) -> None:
    leader, follower = _completing(ctx)
    fsync = ctx.sync("g", 1, follower)
    ctx.sync("g", 1, leader, {leader: assignment(t=[0, 1])})
    assert fsync.response.error_code == 0 and fsync.response.assignment == b""


def test_follower_syncing_after_the_group_is_stable_gets_its_assignment(ctx: GroupContext) -> None:
    leader, follower = _completing(ctx)
    ctx.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    assert ctx.state("g") is S.STABLE
    assert ctx.sync("g", 1, follower).response.assignment == b"F"


def test_nobody_is_answered_if_persisting_the_assignment_fails(ctx: GroupContext) -> None:
    leader, follower = _completing(ctx)
    fsync = ctx.sync("g", 1, follower)
    ctx.fail_appends_with = ErrorCode.KAFKA_STORAGE_ERROR
    lsync = ctx.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    assert lsync.error == fsync.error == ErrorCode.NOT_COORDINATOR
    assert lsync.response.assignment == b""
    # The group starts over rather than running without a durable assignment.
    assert ctx.state("g") is S.PREPARING_REBALANCE


SYNC_ERRORS = [
    # (description, request overrides, expected error)
    ("unknown group", {"group": "other"}, ErrorCode.UNKNOWN_MEMBER_ID),
    ("unknown member", {"member": "ghost"}, ErrorCode.UNKNOWN_MEMBER_ID),
    ("stale generation", {"generation": 0}, ErrorCode.ILLEGAL_GENERATION),
    ("future generation", {"generation": 2}, ErrorCode.ILLEGAL_GENERATION),
    ("protocol type differs (v5)", {"protocol_type": "connect"}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ("protocol name differs (v5)", {"protocol_name": "roundrobin"}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ("protocol type missing (v5)", {"protocol_type": None}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ("no protocol check before v5", {"protocol_name": None, "version": 4}, ErrorCode.NONE),
    ("unknown static instance", {"instance_id": "nobody"}, ErrorCode.UNKNOWN_MEMBER_ID),
    ("empty group id", {"group": ""}, ErrorCode.INVALID_GROUP_ID),
]


@pytest.mark.parametrize(("what", "overrides", "expected"), SYNC_ERRORS, ids=[c[0] for c in SYNC_ERRORS])
def test_sync_errors(ctx: GroupContext, what: str, overrides: dict, expected: int) -> None:
    _leader, follower = _completing(ctx)
    kw = {"group": "g", "generation": 1, "member": follower}
    kw.update(overrides)
    call = ctx.sync(
        kw.pop("group"), kw.pop("generation"), kw.pop("member"), **kw  # type: ignore[arg-type]
    )
    if expected == ErrorCode.NONE:
        assert not call.done  # a valid follower waits for the leader
    else:
        assert call.error == expected


def test_sync_during_preparing_rebalance_says_rebalance_in_progress(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    ctx.join("g", a.member_id)  # leader rejoins: PreparingRebalance
    assert ctx.sync("g", 1, b.member_id).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_to_an_empty_group_is_unknown_member(ctx: GroupContext) -> None:
    (a,) = ctx.form_group("g", 1)
    ctx.leave("g", (a.member_id, None))
    assert ctx.sync("g", 2, a.member_id).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_stale_leader_sync_is_fenced_by_generation(ctx: GroupContext) -> None:
    """A leader that missed a rebalance cannot install an assignment for the new generation."""
    a, b = ctx.form_group("g", 2)
    # b forces a new generation; a (the old leader) does not rejoin in time and is removed.
    rb = ctx.join("g", b.member_id, reason="metadata changed", protos=[("range", b"changed")])
    ctx.advance(REBALANCE_MS)
    assert rb.response.generation_id == 2 and rb.response.leader == b.member_id
    stale = ctx.sync("g", 1, a.member_id, {a.member_id: b"all", b.member_id: b""})
    assert stale.error == ErrorCode.UNKNOWN_MEMBER_ID  # removed from the group
    # Had it still been a member, its old generation would be refused:
    fresh = GroupContext()
    x, y = fresh.form_group("g", 2)
    fresh.join("g", y.member_id, protos=[("range", b"changed")])
    rx = fresh.join("g", x.member_id)
    assert rx.response.generation_id == 2
    assert fresh.sync("g", 1, x.member_id, {x.member_id: b"all"}).error == ErrorCode.ILLEGAL_GENERATION
    assert fresh.heartbeat("g", 1, x.member_id).error == ErrorCode.ILLEGAL_GENERATION
    assert fresh.commit("g", {("t", 0): 5}, generation=1, member_id=x.member_id).response.topics[0].partitions[
        0
    ].error_code == ErrorCode.ILLEGAL_GENERATION


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(ctx: GroupContext) -> None:
    leader, follower = _completing(ctx)
    lsync = ctx.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    assert lsync.response.error_code == 0 and ctx.state("g") is S.STABLE
    group = ctx.coordinator.group("g")
    assert group is not None
    for _ in range(REBALANCE_MS // 5_000 - 1):  # both heartbeat; the follower never syncs
        ctx.advance(5_000)
        assert ctx.heartbeat("g", 1, follower).error == ctx.heartbeat("g", 1, leader).error == 0
    ctx.advance(4_999)
    assert group.has_member(follower)
    ctx.advance(1)
    assert not group.has_member(follower) and group.has_member(leader)
    assert ctx.state("g") is S.PREPARING_REBALANCE


# ------------------------------------------------------------------ heartbeat


def test_heartbeat_rules_per_state(ctx: GroupContext) -> None:
    assert ctx.heartbeat("nope", 0, "m").error == ErrorCode.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("", 0, "m").error == ErrorCode.INVALID_GROUP_ID
    leader, follower = _completing(ctx)
    # Accepted between JoinGroup and SyncGroup.
    assert ctx.heartbeat("g", 1, follower).error == ErrorCode.NONE
    assert ctx.heartbeat("g", 0, follower).error == ErrorCode.ILLEGAL_GENERATION
    assert ctx.heartbeat("g", 1, "ghost").error == ErrorCode.UNKNOWN_MEMBER_ID
    ctx.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    assert ctx.heartbeat("g", 1, leader).error == ErrorCode.NONE
    ctx.join("g", leader)
    assert ctx.heartbeat("g", 1, follower).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeats_keep_a_member_alive_and_silence_expires_it(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    for _ in range(5):
        ctx.advance(SESSION_MS - 1)
        assert ctx.heartbeat("g", 1, a.member_id).error == 0
        if ctx.state("g") is S.STABLE:
            assert ctx.heartbeat("g", 1, b.member_id).error == 0
    assert ctx.state("g") is S.STABLE
    ctx.advance(SESSION_MS - 1)
    assert ctx.heartbeat("g", 1, a.member_id).error == 0
    ctx.advance(1)  # b fell silent a whole session ago
    group = ctx.coordinator.group("g")
    assert group is not None and not group.has_member(b.member_id)
    assert ctx.state("g") is S.PREPARING_REBALANCE
    assert ctx.heartbeat("g", 1, a.member_id).error == ErrorCode.REBALANCE_IN_PROGRESS
    ra = ctx.join("g", a.member_id)  # the only member left rejoins: done at once
    assert ra.response.generation_id == 2 and [m.member_id for m in ra.response.members] == [a.member_id]


def test_session_expiry_of_the_last_member_empties_the_group(ctx: GroupContext) -> None:
    ctx.form_group("g", 1)
    ctx.advance(SESSION_MS)
    assert ctx.state("g") is S.EMPTY
    assert ctx.coordinator.group("g").generation_id == 2  # type: ignore[union-attr]


def test_a_parked_join_keeps_its_member_alive(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, rebalance_ms=60_000)
    ra = ctx.join("g", a.member_id, rebalance_ms=60_000)
    ctx.advance(SESSION_MS)  # a sends nothing while parked; b stays silent too
    group = ctx.coordinator.group("g")
    assert group is not None and group.has_member(a.member_id) and not group.has_member(b.member_id)
    assert ra.response.generation_id == 2  # b's expiry completed the join phase
    ctx.advance(SESSION_MS)  # now a must heartbeat like everyone else
    assert not group.has_member(a.member_id) and ctx.state("g") is S.EMPTY


# ------------------------------------------------------------------ leave


def test_leave_group_v0_to_v2_single_member_top_level_error(ctx: GroupContext) -> None:
    _a, b = ctx.form_group("g", 2)
    assert ctx.leave("g", ("ghost", None), version=1).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert ctx.leave("nope", ("ghost", None), version=2).error == ErrorCode.UNKNOWN_MEMBER_ID
    ok = ctx.leave("g", (b.member_id, None), version=0)
    assert ok.error == 0 and ok.response.members == []
    assert ctx.state("g") is S.PREPARING_REBALANCE


def test_batched_leave_by_instance_id(ctx: GroupContext) -> None:
    _a, _b, c = ctx.form_group("g", 3, instance_ids=["i-a", "i-b", None])
    r = ctx.leave("g", ("", "i-a"), ("", "i-b"), ("", "i-zzz"), (c.member_id, None), version=3).response
    assert r.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("", "i-a", 0),
        ("", "i-b", 0),
        ("", "i-zzz", ErrorCode.UNKNOWN_MEMBER_ID),
        (c.member_id, None, 0),
    ]
    assert ctx.state("g") is S.EMPTY


def test_leave_with_a_stale_member_id_for_an_instance_is_fenced(ctx: GroupContext) -> None:
    (_a,) = ctx.form_group("g", 1, instance_ids=["i-a"])
    r = ctx.leave("g", ("i-a-old", "i-a")).response
    assert r.members[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert ctx.state("g") is S.STABLE


def test_leave_unknown_group_answers_per_member(ctx: GroupContext) -> None:
    r = ctx.leave("nope", ("m1", None), ("", "i1")).response
    assert r.error_code == 0 and [m.error_code for m in r.members] == [ErrorCode.UNKNOWN_MEMBER_ID] * 2


def test_pending_member_can_leave(ctx: GroupContext) -> None:
    first = ctx.join("g")
    pending_id = first.response.member_id
    r = ctx.leave("g", (pending_id, None)).response
    assert r.members[0].error_code == 0
    assert not ctx.coordinator.group("g").is_pending_member(pending_id)  # type: ignore[union-attr]


def test_leave_during_join_phase_completes_it_when_the_rest_has_joined(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    ra = ctx.join("g", a.member_id)
    assert not ra.done
    ctx.leave("g", (b.member_id, None))
    assert ra.response.generation_id == 2 and len(ra.response.members) == 1


def test_leaving_member_parked_join_is_answered(ctx: GroupContext) -> None:
    a, _b = ctx.form_group("g", 2)
    ra = ctx.join("g", a.member_id)
    ctx.leave("g", (a.member_id, None))
    assert ra.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_pipelined_adapter_late_append_callback_after_a_new_rebalance(ctx: GroupContext) -> None:
    """The adapter may run requests while an append is in flight; late callbacks must not misfire."""
    from slipstream.coordinator import RequestContext
    from slipstream.protocol.apis.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

    leader, follower = _completing(ctx)
    fsync = ctx.sync("g", 1, follower)
    request = SyncGroupRequest(
        group_id="g", generation_id=1, member_id=leader, protocol_type="consumer", protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=leader, assignment=b"L")],
    )
    result = ctx.coordinator.sync_group(RequestContext(5), request, ctx.now)
    assert result.pending is not None and result.records and result.after_append is not None
    ctx.parked.add(result.pending)
    for r in result.records:  # step 2: accepted by the log and replayed...
        ctx.coordinator.replay(r.key, r.value, ctx.now)
    newcomer = ctx.join_new("g", client_id="late")  # ...meanwhile a new member arrives
    assert ctx.state("g") is S.PREPARING_REBALANCE
    assert ctx.answers[result.pending].error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert fsync.error == ErrorCode.REBALANCE_IN_PROGRESS
    late = result.after_append(ErrorCode.NONE, ctx.now)  # step 3 arrives late: nothing to do
    assert late.is_empty or (not late.completions and not late.records)
    assert ctx.state("g") is S.PREPARING_REBALANCE
    ra, rb = ctx.join("g", leader), ctx.join("g", follower)
    assert ra.response.generation_id == rb.response.generation_id == newcomer.response.generation_id == 2
