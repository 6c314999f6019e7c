"""Static membership (KIP-345): replacement without rebalance, fencing, SkipAssignment."""

from __future__ import annotations

import pytest
from coord_context import GroupContext, protocols

from slipstream.coordinator import GroupState
from slipstream.protocol import group_records as gr
from slipstream.protocol.errors import ErrorCode

S = GroupState


def test_static_follower_restart_replaces_the_old_member_without_rebalance(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, instance_ids=["i-a", "i-b"])
    log_before = len(ctx.log)
    # b restarts: same instance id, no member id.
    rejoin = ctx.join("g", instance_id="i-b")
    r = rejoin.response
    assert r.error_code == 0 and r.member_id != b.member_id and r.member_id.startswith("i-b-")
    assert (r.generation_id, r.leader, r.members, r.skip_assignment) == (1, a.member_id, [], False)
    assert ctx.state("g") is S.STABLE
    # The replacement was persisted, keeping b's assignment under its new id.
    (record,) = ctx.log[log_before:]
    assert record.value is not None
    value = gr.decode_group_metadata_value(record.value)
    by_instance = {m.group_instance_id: m for m in value.members}
    assert by_instance["i-b"].member_id == r.member_id
    assert ctx.sync("g", 1, r.member_id, instance_id="i-b").response.assignment == by_instance["i-b"].assignment
    # The old incarnation is fenced everywhere.
    assert ctx.heartbeat("g", 1, b.member_id, instance_id="i-b").error == ErrorCode.FENCED_INSTANCE_ID
    assert ctx.sync("g", 1, b.member_id, instance_id="i-b").error == ErrorCode.FENCED_INSTANCE_ID
    assert ctx.join("g", b.member_id, instance_id="i-b").error == ErrorCode.FENCED_INSTANCE_ID
    commit = ctx.commit("g", {("t", 1): 9}, generation=1, member_id=b.member_id, instance_id="i-b")
    assert commit.response.topics[0].partitions[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert ctx.heartbeat("g", 1, r.member_id, instance_id="i-b").error == 0


@pytest.mark.parametrize(("version", "skip"), [(9, True), (8, False), (5, False)])
def test_static_leader_restart(ctx: GroupContext, version: int, skip: bool) -> None:
    a, _b = ctx.form_group("g", 2, instance_ids=["i-a", "i-b"], version=version)
    r = ctx.join("g", instance_id="i-a", version=version).response
    assert r.error_code == 0 and ctx.state("g") is S.STABLE
    group = ctx.coordinator.group("g")
    assert group is not None and group.leader_id == r.member_id  # leadership moves with the instance
    if skip:
        # v9: told it is the leader, with the members, but must not run the assignor.
        assert r.skip_assignment and r.leader == r.member_id
        assert sorted(m.group_instance_id for m in r.members) == ["i-a", "i-b"]  # type: ignore[type-var]
    else:
        # Older clients would reassign as leader: they are shown the old leader id and act as followers.
        assert not r.skip_assignment and r.leader == a.member_id and r.members == []
    assert ctx.sync("g", 1, r.member_id, instance_id="i-a", version=min(version, 5)).error == 0


def test_static_rejoin_changing_the_selected_protocol_triggers_a_rebalance(ctx: GroupContext) -> None:
    a, _b = ctx.form_group("g", 2, instance_ids=["i-a", "i-b"], protos=protocols("range", "roundrobin"))
    rejoin = ctx.join("g", instance_id="i-b", protos=protocols("roundrobin"))
    assert not rejoin.done and ctx.state("g") is S.PREPARING_REBALANCE
    ra = ctx.join("g", a.member_id, instance_id="i-a", protos=protocols("range", "roundrobin"))
    assert ra.response.generation_id == 2 and ra.response.protocol_name == "roundrobin"
    assert rejoin.response.error_code == 0


def test_static_rejoin_during_completing_rebalance_rebalances_again(ctx: GroupContext) -> None:
    ja = ctx.join("g", instance_id="i-a")
    jb = ctx.join("g", instance_id="i-b")
    ctx.advance_until_done(ja, jb)
    assert ctx.state("g") is S.COMPLETING_REBALANCE
    old_b = jb.response.member_id
    fsync = ctx.sync("g", 1, old_b, instance_id="i-b")
    again = ctx.join("g", instance_id="i-b")
    assert fsync.error == ErrorCode.FENCED_INSTANCE_ID  # the old incarnation's parked SyncGroup
    assert ctx.state("g") is S.PREPARING_REBALANCE and not again.done
    ra = ctx.join("g", ja.response.member_id, instance_id="i-a")
    assert ra.response.generation_id == again.response.generation_id == 2


def test_static_rejoin_during_preparing_rebalance_fences_the_old_parked_join(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, instance_ids=["i-a", "i-b"])
    ra = ctx.join("g", a.member_id, instance_id="i-a")
    rb_old = ctx.join("g", b.member_id, instance_id="i-b")  # completes the phase...
    assert rb_old.response.generation_id == 2
    # ...now a restarts during CompletingRebalance before syncing: a new rebalance.
    assert ra.response.generation_id == 2
    ra2 = ctx.join("g", instance_id="i-a")
    assert ctx.state("g") is S.PREPARING_REBALANCE
    rb = ctx.join("g", b.member_id, instance_id="i-b")
    assert ra2.response.generation_id == rb.response.generation_id == 3


def test_static_members_have_ids_prefixed_by_instance(ctx: GroupContext) -> None:
    (a,) = ctx.form_group("g", 1, instance_ids=["instance-7"])
    assert a.member_id.startswith("instance-7-")
