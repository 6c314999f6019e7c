"""A cluster's coordinator owns some ``__consumer_offsets`` partitions only: the others'
groups answer NOT_COORDINATOR; giving a partition up drops its groups (timers stopped),
and loading it back from the log serves them again as they were."""

from __future__ import annotations

from coord_context import SESSION_MS, GroupContext

from slipstream.coordinator import GroupState
from slipstream.protocol.apis.delete_groups import DeleteGroupsRequest
from slipstream.protocol.errors import ErrorCode

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR


def test_groups_of_a_partition_owned_elsewhere_answer_not_coordinator() -> None:
    ctx = GroupContext()
    mine, foreign = "a", "b"
    pa, pb = ctx.coordinator.partition_for(mine), ctx.coordinator.partition_for(foreign)
    assert pa != pb
    ctx.coordinator.disown([pb], ctx.now)
    assert not ctx.coordinator.owns(pb) and ctx.coordinator.owns(pa)
    assert ctx.join(foreign).error == NOT_COORDINATOR
    assert ctx.sync(foreign, 1, "m").error == NOT_COORDINATOR
    assert ctx.heartbeat(foreign, 1, "m").error == NOT_COORDINATOR  # not "fine", unlike loading
    assert ctx.leave(foreign, ("m", None)).error == NOT_COORDINATOR
    commit = ctx.commit(foreign, {("t", 0): 1}).response
    assert {p.error_code for t in commit.topics for p in t.partitions} == {NOT_COORDINATOR}
    assert ctx.fetch(foreign, {"t": [0]}).response.groups[0].error_code == NOT_COORDINATOR
    assert ctx.describe(foreign).groups[0].error_code == NOT_COORDINATOR
    deleted = ctx.send("delete_groups", DeleteGroupsRequest(groups_names=[foreign]), 2).response
    assert deleted.results[0].error_code == NOT_COORDINATOR
    assert ctx.offset_delete(foreign, {"t": [0]}).error == NOT_COORDINATOR
    assert ctx.join(mine).error == ErrorCode.MEMBER_ID_REQUIRED  # the owned partition is served


def test_a_partition_given_up_and_loaded_back_serves_its_groups_as_the_log_has_them() -> None:
    ctx = GroupContext()
    a, _b = ctx.form_group("g", 2)
    ctx.commit("g", {("t", 0): 7}, generation=1, member_id=a.member_id)
    partition = ctx.coordinator.partition_for("g")
    dropped = ctx.coordinator.disown([partition], ctx.now)
    assert dropped == ["g"]
    assert ctx.coordinator.group("g") is None and ctx.coordinator.committed_offsets("g") == {}
    # No timer of the dropped group fires here any more (its sessions went with it).
    assert ctx.advance(SESSION_MS * 2) == []
    # Loading it back (the lease came back): replay this partition's records.
    ctx.coordinator.begin_loading([partition])
    assert ctx.join("g").error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for record in ctx.log:
        if record.partition == partition:
            ctx.coordinator.replay(record.key, record.value, ctx.now)
    ctx.coordinator.finish_loading(ctx.now, [partition])
    assert ctx.state("g") is GroupState.STABLE
    assert ctx.fetched("g") == {("t", 0): 7}
