"""Consumer (KIP-848) groups in ``__consumer_offsets``, offsets, admin APIs and classic groups beside them."""

from __future__ import annotations

from consumer_group_client import Member, describe, heartbeat, set_topics, settle
from coord_context import GroupContext, protocols

from slipstream.coordinator import CoordinatorConfig, GroupCoordinator, ManualTimer
from slipstream.coordinator.config import MigrationPolicy
from slipstream.coordinator.consumer import ConsumerGroupState, MemberState
from slipstream.protocol import consumer_protocol as cp
from slipstream.protocol import group_records as gr
from slipstream.protocol.apis.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from slipstream.protocol.errors import ErrorCode


def reload(ctx: GroupContext) -> GroupCoordinator:
    fresh = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now), topics=lambda: ctx.topics)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    return fresh


def snapshot(coordinator: GroupCoordinator, group_id: str) -> tuple:
    group = coordinator.consumer_group(group_id)
    assert group is not None
    return (
        group.group_epoch,
        group.target_assignment_epoch,
        group.state,
        dict(group.members),
        dict(group.target_assignment),
        dict(group.resolved_regexes),
        group.metadata_hash,
    )


def test_records_use_kafka_key_types_and_replay_to_the_same_group() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=6, **{"logs-a": 2})
    members = [Member(ctx, "g", topics=["t"]) for _ in range(3)] + [Member(ctx, "g", regex="logs-.*")]
    members.append(Member(ctx, "g", topics=["t"], instance_id="static"))
    for m in members:
        m.join()
    settle(*members)
    members[1].leave()
    members[4].leave(-2)
    # Mid-reconciliation state is stored too: a member that must still revoke.
    heartbeat(ctx, "g", members[0].member_id, members[0].epoch, owned={k: sorted(v) for k, v in members[0].owned.items()})
    types = {gr.decode_key(r.key).version for r in ctx.log}
    assert types == {3, 5, 6, 7, 8, 16}
    fresh = reload(ctx)
    assert snapshot(fresh, "g") == snapshot(ctx.coordinator, "g")
    assert fresh.consumer_group("g").static_member("static").member_epoch == -2


def test_a_reloaded_group_fences_members_whose_session_ran_out() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    timer = ManualTimer(start_ms=ctx.now)
    fresh = GroupCoordinator(ctx.config, timer=timer, topics=lambda: ctx.topics)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    records = []
    for fired in timer.advance(45_000):
        records.extend(fired.result.records)
    for r in records:
        fresh.replay(r.key, r.value)
    assert not fresh.consumer_group("g").members
    assert fresh.consumer_group("g").state is ConsumerGroupState.EMPTY


def test_a_consumer_group_member_commit_on_a_replaced_connection_is_refused() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    for offset, connection, expected in [(5, 4, ErrorCode.NONE), (9, 8, ErrorCode.NONE), (7, 4, ErrorCode.REQUEST_TIMED_OUT)]:
        call = ctx.commit("g", {("t", 0): offset}, generation=a.epoch, member_id=a.member_id, version=9, connection=connection)
        assert call.response.topics[0].partitions[0].error_code == expected, (offset, connection)
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 9}


def test_a_heartbeat_on_a_replaced_connection_cannot_release_partitions() -> None:
    """Consumer seed 33042: a member's heartbeat left on a connection it gave up on reached
    the coordinator after the member had been given more partitions over its new connection.
    It carried the previous epoch and an older owned set; Kafka accepts that (the member may
    have lost the answer) and, the next target taking a partition away from the member, read
    the partition missing from that old set as already revoked. It went to another member
    while the first still held it. A heartbeat from a replaced connection is refused."""
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"], connection=3)
    a.join()
    first_epoch = a.epoch
    a.connection = 8  # a's link drops with a heartbeat of this epoch, owning nothing yet, in flight
    set_topics(ctx, t=4)
    settle(a)
    assert a.partitions() == {("t", p) for p in range(4)} and a.epoch > first_epoch
    b = Member(ctx, "g", topics=["t"])
    b.join()  # the new target moves some of a's partitions to b once a has revoked them
    late = heartbeat(ctx, "g", a.member_id, first_epoch, owned={}, connection=3)
    assert late.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    b.beat()
    assert not (a.partitions() & b.partitions()), "b was given a partition a still holds"
    # A leftover leave is refused as well; a and b then settle as usual.
    assert heartbeat(ctx, "g", a.member_id, -1, connection=3).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    settle(a, b)
    assert len(a.partitions()) == 2 and len(b.partitions()) == 2


def test_offset_commit_checks_the_member_epoch() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    ok = ctx.commit("g", {("t", 0): 5}, generation=a.epoch, member_id=a.member_id, version=9)
    assert ok.response.topics[0].partitions[0].error_code == ErrorCode.NONE
    stale = ctx.commit("g", {("t", 0): 6}, generation=a.epoch - 1, member_id=a.member_id, version=9)
    assert stale.response.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    unknown = ctx.commit("g", {("t", 0): 6}, generation=a.epoch, member_id="who", version=9)
    assert unknown.response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    old_api = ctx.commit("g", {("t", 0): 6}, generation=a.epoch, member_id=a.member_id, version=8)
    assert old_api.response.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    # Outside the group (admin): refused while it has members, accepted once it is empty.
    admin = ctx.commit("g", {("t", 0): 7}, version=9)
    assert admin.response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    a.leave()
    admin = ctx.commit("g", {("t", 0): 7}, version=9)
    assert admin.response.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert ctx.fetched("g") == {("t", 0): 7}


def test_offset_fetch_v9_checks_the_member_epoch() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=1)
    a = Member(ctx, "g", topics=["t"])
    a.join()

    def fetch(member_id: str | None, epoch: int) -> int:
        request = OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group_id="g", member_id=member_id, member_epoch=epoch, topics=None)],
            require_stable=True,
        )
        return ctx.send("offset_fetch", request, 9).response.groups[0].error_code

    assert fetch(a.member_id, a.epoch) == ErrorCode.NONE
    assert fetch(None, -1) == ErrorCode.NONE
    assert fetch(a.member_id, a.epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("who", 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_list_describe_and_delete_report_both_group_types() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    ctx.form_group("classic", 1)
    a = Member(ctx, "modern", topics=["t"])
    a.join()
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in ctx.list_groups().groups}
    assert listed == {"classic": ("classic", "consumer", "Stable"), "modern": ("consumer", "consumer", "Stable")}
    assert [g.group_id for g in ctx.list_groups(types=["consumer"]).groups] == ["modern"]
    assert [g.group_id for g in ctx.list_groups(types=["classic"]).groups] == ["classic"]
    assert [g.group_id for g in ctx.list_groups(states=["stable"], types=["consumer"]).groups] == ["modern"]

    (classic_view,) = ctx.describe("modern").groups
    assert (classic_view.protocol_type, classic_view.protocol_data, classic_view.group_state) == (
        "consumer",
        "uniform",
        "Stable",
    )
    (member,) = classic_view.members
    _, assignment = cp.decode_assignment(member.member_assignment)
    assert [(tp.topic, sorted(tp.partitions)) for tp in assignment.assigned_partitions] == [("t", [0, 1])]
    assert cp.decode_subscription(member.member_metadata)[1].topics == ["t"]

    (described,) = describe(ctx, "modern").groups
    assert (described.group_epoch, described.assignment_epoch, described.group_state) == (1, 1, "Stable")
    (m,) = described.members
    assert m.member_id == a.member_id and m.member_type == 1
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [("t", [0, 1])]
    assert [(tp.topic_name, tp.partitions) for tp in m.target_assignment.topic_partitions] == [("t", [0, 1])]
    assert describe(ctx, "classic").groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert describe(ctx, "none").groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

    ctx.commit("modern", {("t", 0): 3}, generation=a.epoch, member_id=a.member_id, version=9)
    assert ctx.delete_groups("modern").response.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    a.leave()
    assert ctx.delete_groups("modern").response.results[0].error_code == ErrorCode.NONE
    assert ctx.coordinator.consumer_group("modern") is None
    assert ctx.fetched("modern") == {}
    assert reload(ctx).consumer_group("modern") is None


def test_classic_and_consumer_groups_do_not_share_an_id_with_members() -> None:
    # With group.consumer.migration.policy=disabled (the default, bidirectional, converts:
    # test_coordinator_consumer_migration.py), as Kafka answers.
    ctx = GroupContext(config=CoordinatorConfig(offsets_topic_num_partitions=4,
                                                consumer_group_migration_policy=MigrationPolicy.DISABLED))
    set_topics(ctx, t=2)
    ctx.form_group("classic", 1)
    refused = heartbeat(ctx, "classic", "m", 0, topics=["t"], owned={}, rebalance_timeout_ms=1000)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group classic is not a consumer group.",
    )
    a = Member(ctx, "modern", topics=["t"])
    a.join()
    # A classic member of another protocol type than the consumer's never joins it.
    join = ctx.join("modern", protos=protocols("range"), protocol_type="connect")
    assert join.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_empty_groups_change_type_and_keep_their_offsets() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    # A classic group with members that all left: Empty, offsets committed.
    (x,) = ctx.form_group("g", 1)
    ctx.commit("g", {("t", 0): 11}, generation=1, member_id=x.member_id)
    ctx.leave("g", (x.member_id, None))
    a = Member(ctx, "g", topics=["t"])
    assert a.join().error_code == ErrorCode.NONE
    assert ctx.coordinator.group("g") is None
    assert ctx.fetched("g") == {("t", 0): 11}
    a.leave()
    # And back: a classic consumer joins the now empty consumer group.
    join = ctx.join("g", protos=protocols("range"))
    assert join.error == ErrorCode.MEMBER_ID_REQUIRED  # the classic protocol's first answer
    assert ctx.coordinator.consumer_group("g") is None
    (y,) = ctx.form_group("g", 1)
    assert y.generation == 1
    assert ctx.fetched("g") == {("t", 0): 11}
    # Both survive a restart the same way.
    fresh = reload(ctx)
    assert fresh.consumer_group("g") is None
    assert fresh.committed_offsets("g")[("t", 0)].offset == 11


def test_member_state_values_match_kafka() -> None:
    assert [s.value for s in (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS)] == [0, 1, 2]


def test_contradicting_records_are_skipped_and_loading_goes_on() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    (assigned,) = [r for r in ctx.log if gr.decode_key(r.key).version == 8]
    # The same partitions claimed by a second member: refused on replay, not fatal.
    other = gr.ConsumerGroupCurrentMemberAssignmentKey(group="g", member_id="intruder")
    value = gr.decode_consumer_group_value(gr.decode_key(assigned.key), assigned.value)
    records = [(r.key, r.value) for r in ctx.log] + [
        (gr.encode_consumer_group_key(other), gr.encode_consumer_group_value(value))
    ]
    fresh = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now), topics=lambda: ctx.topics)
    fresh.load(records, ctx.now)
    group = fresh.consumer_group("g")
    assert group is not None and not group.has_member("intruder")
    assert group.member(a.member_id).assigned_partitions == ctx.coordinator.consumer_group("g").member(
        a.member_id
    ).assigned_partitions


def test_offsets_of_topics_nobody_consumes_expire_then_the_empty_group_goes() -> None:
    ctx = GroupContext(config=CoordinatorConfig(offsets_topic_num_partitions=4, offsets_retention_ms=30_000))
    set_topics(ctx, t=1, old=1)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    ctx.commit("g", {("t", 0): 5, ("old", 0): 9}, generation=a.epoch, member_id=a.member_id, version=9)
    for _ in range(6):  # past the retention, the member alive
        ctx.advance(5_000)
        a.beat()
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    # "t" is consumed by a member: kept; "old" is not: expired.
    assert ctx.fetched("g") == {("t", 0): 5}
    assert ctx.coordinator.consumer_group("g") is not None
    a.leave()
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    # Empty: nothing is consumed any more, the last offset expires and the group with it.
    assert ctx.fetched("g") == {}
    assert ctx.coordinator.consumer_group("g") is None
    assert reload(ctx).consumer_group("g") is None
