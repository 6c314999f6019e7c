"""ConsumerGroupHeartbeat in the coordinator (KIP-848): epochs, reconciliation, fencing, timers.

Driven through ``GroupContext`` on a manual clock; every record is replayed as the
broker does, so the assertions read the group rebuilt from its records.
"""

from __future__ import annotations

from consumer_group_client import (
    REBALANCE_MS,
    Member,
    check_single_owner,
    create_topic_anew,
    describe,
    heartbeat,
    is_kafka_uuid_string,
    set_topics,
    settle,
)
from coord_context import GroupContext

from slipstream.coordinator import CoordinatorConfig, GroupCoordinator, ManualTimer
from slipstream.coordinator.consumer import ConsumerGroupState, MemberState
from slipstream.protocol.errors import ErrorCode


def commit_error(call) -> int:  # type: ignore[no-untyped-def]
    return int(call.response.topics[0].partitions[0].error_code)


def group_of(ctx: GroupContext, group_id: str = "g"):  # type: ignore[no-untyped-def]
    group = ctx.coordinator.consumer_group(group_id)
    assert group is not None
    return group


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a = Member(ctx, "g", topics=["t"])
    response = a.join()
    assert response.error_code == ErrorCode.NONE
    assert response.member_id == a.member_id
    assert response.member_epoch == 1
    # A group that just changed heartbeats fast, so its rebalance completes quickly ...
    assert response.heartbeat_interval_ms == 200
    assert a.partitions() == {("t", p) for p in range(4)}
    group = group_of(ctx)
    assert group.group_epoch == group.target_assignment_epoch == 1
    assert group.state is ConsumerGroupState.STABLE
    # A heartbeat with nothing new carries no assignment.
    assert a.beat().assignment is None
    # ... and a settled one at the regular interval.
    ctx.advance(5_000)
    assert a.beat().heartbeat_interval_ms == 5_000
    b = Member(ctx, "g", topics=["t"])
    b.join()
    assert a.beat().heartbeat_interval_ms == 200


def test_a_partition_moves_only_after_its_owner_released_it() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    b = Member(ctx, "g", topics=["t"])
    joined = b.join()
    # b is at the new epoch but gets nothing a still owns.
    assert joined.member_epoch == 2
    assert b.partitions() == set()
    assert group_of(ctx).member(b.member_id).state is MemberState.UNRELEASED_PARTITIONS
    # a is told to revoke two partitions, and stays at epoch 1 until it says it did.
    response = heartbeat(ctx, "g", a.member_id, 1, owned={"t": [0, 1, 2, 3]})
    assert response.member_epoch == 1
    kept = {p for tp in response.assignment.topic_partitions for p in tp.partitions}
    assert len(kept) == 2
    member_a = group_of(ctx).member(a.member_id)
    assert member_a.state is MemberState.UNREVOKED_PARTITIONS
    # b still gets nothing while a holds them.
    b.beat()
    assert b.partitions() == set()
    # a acknowledges: it moves to epoch 2; then b takes the released partitions.
    a.owned = {"t": kept}
    assert a.beat().member_epoch == 2
    b.beat()
    assert b.partitions() == {("t", p) for p in range(4)} - {("t", p) for p in kept}
    check_single_owner(a, b)
    assert group_of(ctx).state is ConsumerGroupState.STABLE


def test_ten_members_share_partitions_evenly_and_settle() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=12, u=8)
    members = [Member(ctx, "g", topics=["t", "u"]) for _ in range(10)]
    for m in members:
        m.join()
        check_single_owner(*members)
    settle(*members)
    counts = sorted(len(m.partitions()) for m in members)
    assert counts == [2] * 10
    assert set().union(*(m.partitions() for m in members)) == {("t", p) for p in range(12)} | {
        ("u", p) for p in range(8)
    }
    assert {m.epoch for m in members} == {group_of(ctx).group_epoch}


def test_leaving_member_bumps_the_epoch_and_the_rest_take_its_partitions() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a, b = Member(ctx, "g", topics=["t"]), Member(ctx, "g", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    epoch = group_of(ctx).group_epoch
    left = b.leave()
    assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
    assert group_of(ctx).group_epoch == epoch + 1
    assert not group_of(ctx).has_member(b.member_id)
    settle(a)
    assert a.partitions() == {("t", p) for p in range(4)}
    # The member that left is unknown now.
    assert heartbeat(ctx, "g", b.member_id, b.epoch, owned={}).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_fences_a_silent_member() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a, b = Member(ctx, "g", topics=["t"]), Member(ctx, "g", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    for _ in range(10):  # a keeps heartbeating, b is silent
        ctx.advance(5_000)
        a.beat()
    assert not group_of(ctx).has_member(b.member_id)
    settle(a)
    assert a.partitions() == {("t", 0), ("t", 1)}
    assert b.beat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    b = Member(ctx, "g", topics=["t"])
    b.join()
    # a keeps claiming both partitions.
    for _ in range(REBALANCE_MS // 5_000 - 1):
        assert heartbeat(ctx, "g", a.member_id, 1, owned={"t": [0, 1]}).error_code == ErrorCode.NONE
        b.beat()
        ctx.advance(5_000)
    assert group_of(ctx).has_member(a.member_id)
    ctx.advance(5_000)
    assert not group_of(ctx).has_member(a.member_id)
    b.beat()
    assert b.partitions() == {("t", 0), ("t", 1)}
    assert heartbeat(ctx, "g", a.member_id, 1, owned={"t": [0, 1]}).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_epochs_ahead_or_behind_are_fenced() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    assert heartbeat(ctx, "g", a.member_id, 5, owned={}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    b = Member(ctx, "g", topics=["t"])
    b.join()
    settle(a, b)
    assert a.epoch == 2
    # The previous epoch is accepted once with partitions it still owns (a lost response) ...
    assert heartbeat(ctx, "g", a.member_id, 1, owned={k: sorted(v) for k, v in a.owned.items()}).error_code == 0
    # ... but not with partitions it no longer has.
    response = heartbeat(ctx, "g", a.member_id, 1, owned={"t": [0, 1]})
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_request_validation_matches_kafka() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=1)
    cases = [
        (dict(member_id="", epoch=0, topics=["t"], owned={}, rebalance_timeout_ms=1), "MemberId can't be empty."),
        (dict(member_id="m", epoch=0, topics=["t"], owned={}), "RebalanceTimeoutMs must be provided in first request."),
        (dict(member_id="m", epoch=0, topics=["t"], rebalance_timeout_ms=1), "TopicPartitions must be empty when (re-)joining."),
        (
            dict(member_id="m", epoch=0, owned={}, rebalance_timeout_ms=1),
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        (dict(member_id="m", epoch=-2), "InstanceId can't be null."),
        (dict(member_id="m", epoch=-3), "MemberEpoch is invalid."),
    ]
    for fields, message in cases:
        member_id = fields.pop("member_id")
        epoch = fields.pop("epoch")
        response = heartbeat(ctx, "g", member_id, epoch, **fields)  # type: ignore[arg-type]
        assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST, message)
    unsupported = heartbeat(ctx, "g", "m", 0, topics=["t"], owned={}, rebalance_timeout_ms=1, assignor="sticky")
    assert unsupported.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "uniform, range" in unsupported.error_message
    bad_regex = heartbeat(ctx, "g", "m", 0, regex="(", owned={}, rebalance_timeout_ms=1)
    assert bad_regex.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert heartbeat(ctx, "nope", "m", 3, owned={}).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # Nothing was written for refused requests.
    assert ctx.log == []
    # v0 lets the coordinator pick the member id.
    v0 = heartbeat(ctx, "g", "", 0, topics=["t"], owned={}, rebalance_timeout_ms=1, version=0)
    assert v0.error_code == 0 and v0.member_id


def test_a_v0_member_without_an_id_gets_one_from_the_member_id_factory() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=1)
    v0 = heartbeat(ctx, "g", "", 0, topics=["t"], owned={}, rebalance_timeout_ms=1, version=0, client_id="c")
    assert (v0.error_code, v0.member_id, v0.member_epoch) == (ErrorCode.NONE, "c-1", 1)
    assert group_of(ctx).has_member("c-1")


def test_a_v0_member_id_made_by_the_coordinator_is_a_kafka_uuid_string() -> None:
    ctx = GroupContext(random_member_ids=True)
    set_topics(ctx, t=1)
    v0 = heartbeat(ctx, "g", "", 0, topics=["t"], owned={}, rebalance_timeout_ms=1, version=0)
    assert v0.error_code == ErrorCode.NONE
    assert is_kafka_uuid_string(v0.member_id)
    assert group_of(ctx).has_member(v0.member_id)


def test_group_max_size() -> None:
    ctx = GroupContext(config=CoordinatorConfig(offsets_topic_num_partitions=4, consumer_group_max_size=2))
    set_topics(ctx, t=3)
    a, b, c = (Member(ctx, "g", topics=["t"]) for _ in range(3))
    a.join()
    b.join()
    assert c.join().error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert a.beat().error_code == ErrorCode.NONE


def test_server_assignor_range_is_used_when_asked() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4, u=4)
    a = Member(ctx, "g", topics=["t", "u"])
    b = Member(ctx, "g", topics=["t", "u"])
    for m in (a, b):
        heartbeat(ctx, "g", m.member_id, 0, topics=["t", "u"], owned={}, rebalance_timeout_ms=REBALANCE_MS, assignor="range")
    settle(a, b)
    target = group_of(ctx).target_assignment
    first = min(a.member_id, b.member_id)
    # range: co-partitioned contiguous ranges, the smaller member id first.
    names = {meta.topic_id: name for name, meta in ctx.topics.by_name.items()}
    assert {(names[t], p) for t, ps in target[first].items() for p in ps} == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    assert describe(ctx, "g").groups[0].assignor_name == "range"


def test_static_member_keeps_its_partitions_across_a_restart() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a = Member(ctx, "g", topics=["t"], instance_id="a")
    b = Member(ctx, "g", topics=["t"], instance_id="b")
    a.join()
    b.join()
    settle(a, b)
    epoch, before = group_of(ctx).group_epoch, a.partitions()
    assert a.leave(-2).member_epoch == -2
    # Another process cannot take the instance id while a is still there.
    intruder = Member(ctx, "g", topics=["t"], instance_id="b")
    assert intruder.join().error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    # The restarted a (a new member id) gets its partitions back without a rebalance.
    ctx.advance(10_000)
    restarted = Member(ctx, "g", topics=["t"], instance_id="a")
    response = restarted.join()
    assert response.error_code == 0
    assert restarted.partitions() == before
    assert group_of(ctx).group_epoch == epoch
    assert not group_of(ctx).has_member(a.member_id)
    # The old incarnation is fenced by the new one.
    assert heartbeat(ctx, "g", a.member_id, a.epoch, owned={}, instance_id="a").error_code == ErrorCode.FENCED_INSTANCE_ID
    settle(restarted, b)
    assert restarted.partitions() == before


def test_static_member_that_does_not_come_back_is_removed_after_its_session() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"], instance_id="a")
    b = Member(ctx, "g", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    a.leave(-2)
    for _ in range(10):
        ctx.advance(5_000)
        b.beat()
    assert group_of(ctx).static_member("a") is None
    settle(b)
    assert b.partitions() == {("t", 0), ("t", 1)}


def test_new_partitions_and_topics_bump_the_epoch() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t", "later"])
    a.join()
    assert a.partitions() == {("t", 0), ("t", 1)}
    set_topics(ctx, t=3, later=1)
    a.beat()
    assert group_of(ctx).group_epoch == 2
    assert a.partitions() == {("t", 0), ("t", 1), ("t", 2), ("later", 0)}
    # Unchanged metadata: no new epoch.
    set_topics(ctx, t=3, later=1, other=5)
    a.beat()
    assert group_of(ctx).group_epoch == 2


def test_a_recreated_topics_partitions_wait_for_members_still_holding_the_deleted_ones() -> None:
    """A topic deleted and created again under its name has a new id, so by id its
    partitions are free at once. Clients fetch and commit by name, though: a member that
    has not heard of the deletion still consumes "t-2". The same partition numbers of the
    new topic wait until that member has revoked the old ones (simulation seeds 1608,
    3198, 4462 and 5517 of `wide`, consumer protocol; Kafka hands them out at once)."""
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    assert a.partitions() == {("t", p) for p in range(4)}
    create_topic_anew(ctx, "t", 4)  # t deleted and made again (a new id) while a says nothing
    b = Member(ctx, "g", topics=["t"])
    b.join()
    assert group_of(ctx).member(b.member_id).state is MemberState.UNRELEASED_PARTITIONS
    assert b.partitions() == set()  # a still holds t-0..3 of the deleted topic
    b.beat()
    assert b.partitions() == set()
    # a hears of it: the deleted topic's partitions are gone from its assignment, and it
    # takes its share of the new topic (its own old holdings do not stand in its way).
    a.owned = {}
    a.beat()
    assert len(a.partitions()) == 2
    b.beat()
    assert b.partitions() == {("t", p) for p in range(4)} - a.partitions()
    check_single_owner(a, b)


def test_a_member_holding_a_deleted_topic_cannot_commit_its_offsets_to_the_recreated_one() -> None:
    """Its commit by name would store the deleted topic's offset for the new topic (the
    next owner would start from it); it is told its epoch is stale, heartbeats, and then
    commits what it was given of the new topic."""
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    assert commit_error(ctx.commit("g", {("t", 0): 30}, generation=a.epoch, member_id=a.member_id, version=9)) == 0
    create_topic_anew(ctx, "t", 2)
    stale = ctx.commit("g", {("t", 0): 34}, generation=a.epoch, member_id=a.member_id, version=9)
    assert commit_error(stale) == ErrorCode.STALE_MEMBER_EPOCH
    a.owned = {}
    a.beat()
    a.beat()
    assert a.partitions() == {("t", 0), ("t", 1)}
    assert commit_error(ctx.commit("g", {("t", 0): 1}, generation=a.epoch, member_id=a.member_id, version=9)) == 0


def test_deleted_topic_holdings_block_only_members_subscribed_to_that_name() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2, u=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    b = Member(ctx, "g", topics=["u"])
    b.join()
    settle(a, b)
    assert a.partitions() == {("t", 0), ("t", 1)} and b.partitions() == {("u", 0), ("u", 1)}
    # u is deleted and made again; a, subscribed to t only, never held u.
    create_topic_anew(ctx, "u", 2)
    c = Member(ctx, "g", topics=["t", "u"])
    c.join()
    settle(c)
    # c waits for the u partitions b still holds from the deleted u ...
    assert not any(topic == "u" for topic, _ in c.partitions())
    # ... until b has heard of it.
    b.owned = {}
    settle(a, b, c)
    assert {tp for m in (a, b, c) for tp in m.partitions()} == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    check_single_owner(a, b, c)


def test_a_regex_subscriber_holding_a_deleted_topic_blocks_its_recreation() -> None:
    """The holder subscribes by regex, and what its regex last resolved to no longer has
    the name (the deletion was resolved while it was silent): its regex still matches the
    recreated topic's name, so the partitions wait for it too."""
    ctx = GroupContext()
    set_topics(ctx, t=2, x=1)
    a = Member(ctx, "g", regex="t")
    a.join()
    a.beat()
    assert a.partitions() == {("t", 0), ("t", 1)}
    c = Member(ctx, "g", topics=["x"])
    c.join()
    settle(c)
    set_topics(ctx, x=1)  # t deleted; c's heartbeat resolves the regex to nothing
    c.beat()
    assert group_of(ctx).resolved_regexes["t"] == frozenset()
    create_topic_anew(ctx, "t", 2)
    b = Member(ctx, "g", topics=["t"])
    b.join()
    settle(b, c)
    assert b.partitions() == set()  # a, silent, still holds t-0 and t-1 of the deleted t
    a.owned = {}
    settle(a, b, c)
    assert {tp for m in (a, b) for tp in m.partitions()} == {("t", 0), ("t", 1)}
    check_single_owner(a, b, c)


def test_regex_subscription_follows_topics_it_matches() -> None:
    ctx = GroupContext()
    set_topics(ctx, **{"orders-eu": 1, "orders-us": 1, "payments": 1, "__consumer_offsets": 4})
    a = Member(ctx, "g", regex="orders-.*|__.*")
    a.join()
    assert a.partitions() == {("orders-eu", 0), ("orders-us", 0)}
    set_topics(ctx, **{"orders-eu": 1, "orders-us": 1, "orders-asia": 2, "payments": 1, "__consumer_offsets": 4})
    a.beat()
    assert a.partitions() == {("orders-eu", 0), ("orders-us", 0), ("orders-asia", 0), ("orders-asia", 1)}
    assert group_of(ctx).resolved_regexes["orders-.*|__.*"] == {"orders-eu", "orders-us", "orders-asia"}
    assert describe(ctx, "g").groups[0].members[0].subscribed_topic_regex == "orders-.*|__.*"
    # The regex goes away with its last member.
    a.leave()
    assert group_of(ctx).resolved_regexes == {}


def test_resubscribing_revokes_before_it_assigns() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2, u=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    response = heartbeat(ctx, "g", a.member_id, a.epoch, topics=["u"], owned={"t": [0, 1]})
    # t must be released first: nothing of u yet.
    assert response.member_epoch == 1
    assert response.assignment is not None and response.assignment.topic_partitions == []
    a.owned = {}
    a.beat()
    assert a.partitions() == {("u", 0), ("u", 1)}
    assert a.epoch == 2


def test_a_group_with_its_own_session_timeout() -> None:
    from slipstream.coordinator.config import ConsumerGroupTimeouts

    def timeouts(group_id: str) -> ConsumerGroupTimeouts:
        return ConsumerGroupTimeouts(10_000, 1_000) if group_id == "short" else ConsumerGroupTimeouts(45_000, 5_000)

    ctx = GroupContext(consumer_group_timeouts=timeouts)
    set_topics(ctx, t=1)
    short, default = Member(ctx, "short", topics=["t"]), Member(ctx, "default", topics=["t"])
    short.join()
    default.join()
    ctx.advance(10_000)
    assert not group_of(ctx, "short").members
    assert group_of(ctx, "default").has_member(default.member_id)
    ctx.advance(5_000)
    assert default.beat().heartbeat_interval_ms == 5_000


def test_a_member_rejoining_under_its_own_id_starts_over_at_once() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a, b = Member(ctx, "g", topics=["t"]), Member(ctx, "g", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    epoch = group_of(ctx).group_epoch
    # b was fenced on its side (say, a lost response): it drops its partitions and rejoins.
    b.owned = {}
    response = b.join()
    assert response.error_code == ErrorCode.NONE
    assert group_of(ctx).group_epoch == epoch + 1
    settle(a, b)
    assert len(a.partitions()) == len(b.partitions()) == 2
    check_single_owner(a, b)
    # What the records say is what the coordinator holds.
    fresh = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now), topics=lambda: ctx.topics)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    replayed = fresh.consumer_group("g")
    assert replayed is not None
    assert dict(replayed.members) == dict(group_of(ctx).members)
    assert dict(replayed.target_assignment) == dict(group_of(ctx).target_assignment)


def test_a_heartbeat_whose_write_fails_answers_the_error_and_changes_nothing() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    epoch = group_of(ctx).group_epoch
    ctx.fail_appends_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    b = Member(ctx, "g", topics=["t"])
    assert b.join().error_code == ErrorCode.NOT_COORDINATOR
    assert not group_of(ctx).has_member(b.member_id)
    assert group_of(ctx).group_epoch == epoch
    # a is not told about an epoch the group never wrote.
    ctx.fail_appends_with = None
    assert a.beat().member_epoch == epoch


def test_a_fence_whose_write_fails_is_retried() -> None:
    from slipstream.coordinator.consumer_sessions import FENCE_RETRY_MS

    ctx = GroupContext()
    set_topics(ctx, t=2)
    a, b = Member(ctx, "g", topics=["t"]), Member(ctx, "g", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    ctx.fail_appends_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    ctx.advance(45_000)  # both sessions expire while the log refuses writes
    assert group_of(ctx).has_member(a.member_id) and group_of(ctx).has_member(b.member_id)
    ctx.fail_appends_with = None
    ctx.advance(FENCE_RETRY_MS)
    assert not group_of(ctx).members


def test_a_leave_whose_write_fails_keeps_the_member_until_its_session_ends() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    ctx.fail_appends_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert a.leave().error_code == ErrorCode.NOT_COORDINATOR
    assert group_of(ctx).has_member(a.member_id)
    ctx.fail_appends_with = None
    ctx.advance(45_000)
    assert not group_of(ctx).has_member(a.member_id)



def test_settled_interval_follows_the_heartbeat_budget() -> None:
    """With a budget, settled members of a small broker get the floor; more members stretch it."""
    config = CoordinatorConfig(consumer_group_heartbeat_budget_per_s=10, consumer_group_idle_heartbeat_floor_ms=500)
    ctx = GroupContext(config)
    set_topics(ctx, t=4)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    settle(a)
    ctx.advance(5_000)
    assert a.beat().heartbeat_interval_ms == 500  # 1 member: 100 ms within the budget -> the floor
    others = [Member(ctx, f"h{i}", topics=["t"]) for i in range(29)]
    for m in others:
        m.join()
        settle(m)
    ctx.advance(5_000)
    # 30 members at 10 heartbeats/s: each every 3 s (recounted at most once a second).
    assert a.beat().heartbeat_interval_ms == 3_000
    for i in range(30):
        m = Member(ctx, f"k{i}", topics=["t"])
        m.join()
        settle(m)
    assert a.beat().heartbeat_interval_ms == 3_000  # the count is at most a second old
    ctx.advance(5_000)
    assert a.beat().heartbeat_interval_ms == 5_000  # 60 members would need 6 s: the regular interval


def test_without_a_budget_settled_members_get_the_regular_interval() -> None:
    ctx = GroupContext(CoordinatorConfig(consumer_group_heartbeat_budget_per_s=0))
    set_topics(ctx, t=1)
    a = Member(ctx, "g", topics=["t"])
    a.join()
    settle(a)
    ctx.advance(5_000)
    assert a.beat().heartbeat_interval_ms == 5_000


def test_a_groups_own_interval_is_not_shortened_by_the_budget() -> None:
    from slipstream.coordinator.config import ConsumerGroupTimeouts

    def timeouts(group_id: str) -> ConsumerGroupTimeouts:
        if group_id == "own":
            return ConsumerGroupTimeouts(45_000, 6_000, interval_is_group_config=True)
        return ConsumerGroupTimeouts(45_000, 5_000)

    ctx = GroupContext(CoordinatorConfig(consumer_group_heartbeat_budget_per_s=1_000), consumer_group_timeouts=timeouts)
    set_topics(ctx, t=2)
    own, default = Member(ctx, "own", topics=["t"]), Member(ctx, "default", topics=["t"])
    for m in (own, default):
        m.join()
        settle(m)
    ctx.advance(5_000)
    assert own.beat().heartbeat_interval_ms == 6_000
    assert default.beat().heartbeat_interval_ms == 500
