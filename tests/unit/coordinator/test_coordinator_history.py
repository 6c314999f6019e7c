"""Rebalance history: every decision's event and cause, on the manual clock."""

from __future__ import annotations

import json
from typing import Any

import pytest
from consumer_group_client import Member as ConsumerMember
from consumer_group_client import heartbeat as consumer_heartbeat
from consumer_group_client import set_topics, settle
from coord_context import REBALANCE_MS, SESSION_MS, GroupContext, assignment, protocols

from slipstream.coordinator import CoordinatorConfig, GroupCoordinator, GroupState, ManualTimer
from slipstream.coordinator import history as ev
from slipstream.protocol import consumer_protocol as cp
from slipstream.protocol.errors import ErrorCode


def events(ctx: GroupContext | GroupCoordinator, group: str, kind: type[ev.GroupEvent] | None = None) -> list[Any]:
    coordinator = ctx.coordinator if isinstance(ctx, GroupContext) else ctx
    found = [e for _seq, e in coordinator.history.events(group)]
    return found if kind is None else [e for e in found if isinstance(e, kind)]


def kinds(ctx: GroupContext, group: str, since: int = 0) -> list[str]:
    return [e.kind for _seq, e in ctx.coordinator.history.events(group, since)]


def last_seq(ctx: GroupContext) -> int:
    return ctx.coordinator.history.last_seq


# ---------------------------------------------------------------- classic groups


def test_a_group_forming_tells_joins_vote_leader_generation_and_assignment() -> None:
    ctx = GroupContext()
    start = ctx.now
    members = ctx.form_group("g", 2, protos=[("range", protocols("range")[0][1]), ("rr", b"x")])
    a, b = members
    assert kinds(ctx, "g") == [
        "member-joined", "rebalance-started", "member-joined",
        "protocol-selected", "leader-elected", "generation-started",
        "assignment-sent", "generation-completed",
    ]
    joined = events(ctx, "g", ev.MemberJoined)
    assert [(e.member_id, e.how, e.client_id) for e in joined] == [(a.member_id, "new", "c0"), (b.member_id, "new", "c1")]
    (started,) = events(ctx, "g", ev.RebalanceStarted)
    assert (started.cause, started.generation, started.at_ms) == (ev.RebalanceCause.MEMBER_JOINED, 0, start)
    (vote,) = events(ctx, "g", ev.ProtocolSelected)
    assert vote.protocol == "range" and vote.votes == {"range": 2}
    (leader,) = events(ctx, "g", ev.LeaderElected)
    assert leader.member_id == a.leader and leader.previous is None
    (gen,) = events(ctx, "g", ev.GenerationStarted)
    assert gen.generation == 1 and set(gen.member_ids) == {a.member_id, b.member_id}
    (sent,) = events(ctx, "g", ev.AssignmentSent)
    # form_group gives member i partition t-i.
    assert sent.decoded and [(m.partition, m.from_member, m.to_member) for m in sent.moves] == [
        ("t-0", None, a.member_id),
        ("t-1", None, b.member_id),
    ]
    (done,) = events(ctx, "g", ev.GenerationCompleted)
    assert done.generation == 1 and done.at_ms == ctx.now and done.duration_ms == ctx.now - start > 0


def test_leave_with_reason_starts_a_rebalance_and_the_assignment_shows_what_moved() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    seen = last_seq(ctx)
    ctx.leave("g", (b.member_id, None))  # reason "test" (KIP-800)
    (left,) = [e for _s, e in ctx.coordinator.history.events("g", seen) if isinstance(e, ev.MemberLeft)]
    assert (left.member_id, left.reason, left.at_ms) == (b.member_id, "test", ctx.now)
    (started,) = [e for _s, e in ctx.coordinator.history.events("g", seen) if isinstance(e, ev.RebalanceStarted)]
    assert started.cause == ev.RebalanceCause.MEMBER_LEFT and started.generation == 1
    rejoin = ctx.join("g", a.member_id)
    ctx.advance_until_done(rejoin)
    generation = rejoin.response.generation_id
    ctx.sync("g", generation, a.member_id, {a.member_id: assignment(t=[0, 1])})
    sent = events(ctx, "g", ev.AssignmentSent)[-1]
    assert [(m.partition, m.from_member, m.to_member) for m in sent.moves] == [("t-1", b.member_id, a.member_id)]
    assert sent.partitions == {a.member_id: 2}


def test_session_expiry_names_the_last_heartbeat() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    ctx.advance(1_000)
    beat_at = ctx.now
    assert ctx.heartbeat("g", b.generation, b.member_id).error == 0
    assert ctx.heartbeat("g", a.generation, a.member_id).error == 0
    seen = last_seq(ctx)
    # Only a keeps heartbeating.
    for _ in range(3):
        ctx.advance(SESSION_MS // 3)
        ctx.heartbeat("g", a.generation, a.member_id)
    ctx.advance(SESSION_MS // 3)
    expired = [e for _s, e in ctx.coordinator.history.events("g", seen) if isinstance(e, ev.SessionExpired)]
    assert [(e.member_id, e.last_heartbeat_ms, e.session_timeout_ms) for e in expired] == [
        (b.member_id, beat_at, SESSION_MS)
    ]
    assert expired[0].at_ms == beat_at + SESSION_MS
    started = events(ctx, "g", ev.RebalanceStarted)[-1]
    assert started.cause == ev.RebalanceCause.SESSION_EXPIRED and b.member_id in started.reason


def test_a_zombie_past_its_session_is_fenced_and_noted() -> None:
    """A member paused past its session wakes up: its heartbeat, commit, SyncGroup and leave
    name a member the group no longer has. A member id the group never gave out (empty, as a
    new member's) is no fence."""
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    for _ in range(4):
        ctx.advance(SESSION_MS // 3)
        ctx.heartbeat("g", a.generation, a.member_id)
    assert events(ctx, "g", ev.SessionExpired)[-1].member_id == b.member_id
    seen = last_seq(ctx)
    assert ctx.heartbeat("g", b.generation, b.member_id).error == ErrorCode.UNKNOWN_MEMBER_ID
    commit = ctx.commit("g", {("t", 0): 5}, generation=b.generation, member_id=b.member_id)
    assert commit.response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert ctx.sync("g", b.generation, b.member_id).error == ErrorCode.UNKNOWN_MEMBER_ID
    ctx.leave("g", (b.member_id, None))
    assert ctx.heartbeat("g", b.generation, "").error == ErrorCode.UNKNOWN_MEMBER_ID
    fenced = [e for _s, e in ctx.coordinator.history.events("g", seen) if isinstance(e, ev.RequestFenced)]
    assert [(e.member_id, e.api, e.error, e.request_generation) for e in fenced] == [
        (b.member_id, "Heartbeat", "UNKNOWN_MEMBER_ID", b.generation),
        (b.member_id, "OffsetCommit", "UNKNOWN_MEMBER_ID", b.generation),
        (b.member_id, "SyncGroup", "UNKNOWN_MEMBER_ID", b.generation),
        (b.member_id, "LeaveGroup", "UNKNOWN_MEMBER_ID", None),
    ]


def test_members_that_never_rejoin_are_named_with_how_long_the_group_waited() -> None:
    ctx = GroupContext()
    a, b, c = ctx.form_group("g", 3)
    leader = next(m for m in (a, b, c) if m.member_id == m.leader)
    others = [m for m in (a, b, c) if m is not leader]
    began = ctx.now
    first = ctx.join("g", leader.member_id)  # the leader's JoinGroup starts a rebalance
    second = ctx.join("g", others[0].member_id)
    # The third keeps heartbeating (told a rebalance is on) but never rejoins.
    for _ in range(REBALANCE_MS // 5_000):
        ctx.advance(5_000)
        ctx.heartbeat("g", others[1].generation, others[1].member_id)
    assert first.done and second.done
    started = events(ctx, "g", ev.RebalanceStarted)[-1]
    assert started.cause == ev.RebalanceCause.MEMBER_REJOINED
    rejoined = [e for e in events(ctx, "g", ev.MemberJoined) if e.how == "rejoin"]
    assert [e.member_id for e in rejoined] == [leader.member_id, others[0].member_id]
    (removed,) = events(ctx, "g", ev.RemovedAtRebalanceTimeout)
    assert removed.member_ids == (others[1].member_id,)
    assert removed.waited_ms == REBALANCE_MS and removed.at_ms == began + REBALANCE_MS
    ctx.advance(200)
    gen = first.response.generation_id
    ctx.sync("g", gen, others[0].member_id)
    ctx.sync("g", gen, leader.member_id, {leader.member_id: assignment(t=[0, 1]), others[0].member_id: assignment(t=[2])})
    done = events(ctx, "g", ev.GenerationCompleted)[-1]
    assert done.generation == gen and done.duration_ms == REBALANCE_MS + 200


def test_members_that_never_sync_are_removed_at_the_sync_deadline() -> None:
    ctx = GroupContext()
    # Sessions longer than the rebalance timeout: the silent follower outlives the sync deadline.
    calls = [ctx.join_new("g", client_id=f"c{i}", session_ms=2 * REBALANCE_MS) for i in range(2)]
    ctx.advance_until_done(*calls)
    generation_at = ctx.now
    leader_id = calls[0].response.leader
    follower = next(c.response.member_id for c in calls if c.response.member_id != leader_id)
    gen = calls[0].response.generation_id
    ctx.sync("g", gen, leader_id, {leader_id: assignment(t=[0]), follower: assignment(t=[1])})
    # The leader's sync completes the assignment; the follower never asks for its share:
    # it stays pending until the deadline.
    ctx.advance(REBALANCE_MS)
    (removed,) = events(ctx, "g", ev.RemovedAtSyncDeadline)
    assert removed.member_ids == (follower,) and removed.generation == gen
    assert removed.waited_ms == REBALANCE_MS and removed.at_ms == generation_at + REBALANCE_MS
    assert events(ctx, "g", ev.RebalanceStarted)[-1].cause == ev.RebalanceCause.SYNC_DEADLINE


def test_a_subscription_change_is_a_metadata_change() -> None:
    ctx = GroupContext()
    _a, b = ctx.form_group("g", 2)
    seen = last_seq(ctx)
    ctx.join("g", b.member_id, protos=protocols("range", topics=("t", "u")))
    new = [e for _s, e in ctx.coordinator.history.events("g", seen)]
    assert [e.kind for e in new][:2] == ["metadata-changed", "rebalance-started"]
    assert new[0].member_id == b.member_id and new[0].topics == ("t", "u")
    assert new[1].cause == ev.RebalanceCause.METADATA_CHANGED


def test_a_rejoin_carrying_only_what_the_member_owned_is_not_a_metadata_change() -> None:
    """A Java consumer's enforceRebalance: its subscription names the same topics, but its
    owned partitions, generation and sticky user data differ from its last JoinGroup."""
    ctx = GroupContext()
    _a, b = ctx.form_group("g", 2)

    def owning(generation: int) -> list[tuple[str, bytes]]:
        sub = cp.ConsumerProtocolSubscription(
            topics=["t"], user_data=generation.to_bytes(4, "big"), generation_id=generation,
            owned_partitions=[cp.ConsumerProtocolTopicPartition(topic="t", partitions=[1])],
        )
        return [("range", cp.encode_subscription(sub, 3))]

    seen = last_seq(ctx)
    ctx.join("g", b.member_id, protos=owning(b.generation), reason="the app asked")
    new = [e for _s, e in ctx.coordinator.history.events("g", seen)]
    assert [e.kind for e in new][:2] == ["member-joined", "rebalance-started"]
    assert (new[0].member_id, new[0].how) == (b.member_id, ev.JOINED_REJOIN)
    assert new[1].cause == ev.RebalanceCause.MEMBER_REJOINED and "the app asked" in new[1].reason
    # The same topics from another rack are a metadata change.
    moved = cp.ConsumerProtocolSubscription(topics=["t"], rack_id="rack-2")
    seen = last_seq(ctx)
    ctx.join("g", b.member_id, protos=[("range", cp.encode_subscription(moved, 3))])
    assert [e.kind for _s, e in ctx.coordinator.history.events("g", seen)][:1] == ["metadata-changed"]


def test_a_static_member_coming_back_replaces_its_old_self() -> None:
    ctx = GroupContext()
    _s1, s2 = ctx.form_group("g", 2, instance_ids=["i-1", "i-2"])
    seen = last_seq(ctx)
    call = ctx.join("g", "", instance_id="i-2", client_id="new-process")
    ctx.advance_until_done(call)
    (joined,) = [e for _s, e in ctx.coordinator.history.events("g", seen) if isinstance(e, ev.MemberJoined)]
    assert joined.how == ev.JOINED_STATIC_REPLACEMENT and joined.instance_id == "i-2"
    assert joined.replaced_member_id == s2.member_id and joined.member_id == call.response.member_id
    assert joined.client_id == "new-process"
    # The old incarnation's requests are now fenced, and the history says by whom.
    assert ctx.heartbeat("g", s2.generation, s2.member_id, instance_id="i-2").error == ErrorCode.FENCED_INSTANCE_ID
    fenced = events(ctx, "g", ev.RequestFenced)[-1]
    assert (fenced.member_id, fenced.instance_id, fenced.api, fenced.error) == (
        s2.member_id, "i-2", "Heartbeat", "FENCED_INSTANCE_ID"
    )


def test_requests_of_an_old_generation_are_fenced_and_noted() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    assert ctx.heartbeat("g", a.generation - 1, a.member_id).error == ErrorCode.ILLEGAL_GENERATION
    assert ctx.sync("g", a.generation + 5, b.member_id).error == ErrorCode.ILLEGAL_GENERATION
    commit = ctx.commit("g", {("t", 0): 5}, generation=a.generation - 1, member_id=a.member_id)
    assert commit.response.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
    fenced = events(ctx, "g", ev.RequestFenced)
    assert [(e.member_id, e.api, e.error, e.request_generation, e.current_generation) for e in fenced] == [
        (a.member_id, "Heartbeat", "ILLEGAL_GENERATION", a.generation - 1, a.generation),
        (b.member_id, "SyncGroup", "ILLEGAL_GENERATION", a.generation + 5, a.generation),
        (a.member_id, "OffsetCommit", "ILLEGAL_GENERATION", a.generation - 1, a.generation),
    ]
    assert all(e.at_ms == ctx.now for e in fenced)


def test_steady_heartbeats_and_commits_record_nothing() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    seen = last_seq(ctx)
    for _ in range(5):
        ctx.advance(1_000)
        assert ctx.heartbeat("g", a.generation, a.member_id).error == 0
        assert ctx.heartbeat("g", b.generation, b.member_id).error == 0
        ctx.commit("g", {("t", 0): 5}, generation=a.generation, member_id=a.member_id)
        ctx.sync("g", a.generation, a.member_id)  # a repeated SyncGroup in Stable
    assert ctx.coordinator.history.events("g", seen) == []


def test_the_history_keeps_the_last_events_per_group_in_order() -> None:
    ctx = GroupContext(config=CoordinatorConfig(offsets_topic_num_partitions=4, group_history_max_events=3))
    ctx.form_group("g", 2)
    ctx.form_group("h", 1)
    kept = ctx.coordinator.history.events("g")
    assert [e.kind for _s, e in kept] == ["generation-started", "assignment-sent", "generation-completed"]
    assert [s for s, _e in kept] == sorted(s for s, _e in kept)
    assert len(ctx.coordinator.history.events("h")) == 3
    with pytest.raises(ValueError):
        CoordinatorConfig(group_history_max_events=0)


def test_each_kept_event_keeps_its_number_across_groups_and_eviction() -> None:
    history = ev.GroupHistory(max_events=2)
    history.record(ev.MemberLeft(group_id=g, at_ms=t, member_id=f"m{t}") for t, g in enumerate("abab"))
    history.record([ev.MemberLeft(group_id="a", at_ms=4, member_id="m4")])
    assert [(seq, e.at_ms) for seq, e in history.events("a")] == [(3, 2), (5, 4)]
    assert [(seq, e.at_ms) for seq, e in history.events("b")] == [(2, 1), (4, 3)]
    assert [(seq, e.at_ms) for seq, e in history.events("a", since=3)] == [(5, 4)]
    assert history.events("a", since=5) == [] and history.events("c") == []
    history.forget("a")
    assert history.events("a") == [] and history.group_ids() == ["b"] and history.last_seq == 5


def test_json_history_round_trips_every_event() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    ctx.leave("g", (b.member_id, None))
    ctx.heartbeat("g", 99, a.member_id)
    dicts = ctx.coordinator.history_of("g")
    assert all(isinstance(d["seq"], int) and d["kind"] for d in dicts)
    again = [ev.event_from_dict(json.loads(json.dumps(d))) for d in dicts]
    assert again == [e for _s, e in ctx.coordinator.history.events("g")]
    assert ctx.coordinator.history_of("g", since=dicts[-2]["seq"]) == dicts[-1:]
    with pytest.raises(ValueError):
        ev.event_from_dict({"kind": "no-such-thing"})
    with pytest.raises(ValueError):
        ev.event_from_dict({"kind": "member-left", "group_id": "g"})


def test_replayed_history_tells_generations_and_assignments_from_the_records() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    first_stable = ctx.now
    ctx.leave("g", (b.member_id, None))
    rejoin = ctx.join("g", a.member_id)
    ctx.advance_until_done(rejoin)
    ctx.advance(50)
    gen = rejoin.response.generation_id
    ctx.sync("g", gen, a.member_id, {a.member_id: assignment(t=[0, 1])})
    fresh = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now + 60_000))
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now + 60_000)
    replayed = events(fresh, "g")
    assert all(e.replayed for e in replayed)
    assert [(e.kind, getattr(e, "generation", None)) for e in replayed] == [
        ("generation-started", 1), ("assignment-sent", 1), ("generation-started", 2), ("assignment-sent", 2),
    ]
    # Times come from the records (the group's state timestamp), not the load time.
    assert replayed[1].at_ms == first_stable
    assert [(m.partition, m.from_member, m.to_member) for m in replayed[3].moves] == [
        ("t-1", b.member_id, a.member_id)
    ]
    assert replayed[2].member_ids == (a.member_id,)
    # Live events follow the replayed ones, and know who owned what before the restart.
    assert fresh.group("g").state is GroupState.STABLE
    assert fresh.group("g").partition_owners == {"t-0": a.member_id, "t-1": a.member_id}
    assert fresh.group("g").generation_leader == a.member_id


# ---------------------------------------------------------------- consumer (KIP-848) groups


def test_consumer_group_join_bumps_the_epoch_computes_a_target_and_reconciles() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a = ConsumerMember(ctx, "cg", topics=["t"])
    a.join()
    assert kinds(ctx, "cg") == ["member-joined", "group-epoch-bumped", "target-assignment-computed", "member-epoch-advanced"]
    joined, bumped, target, step = events(ctx, "cg")
    assert joined.member_id == a.member_id and joined.how == "new"
    assert (bumped.epoch, bumped.cause) == (1, "group created")
    assert target.epoch == 1 and target.changed_member_ids == (a.member_id,) and target.assignor == "uniform"
    assert (step.from_epoch, step.to_epoch, step.state) == (0, 1, "stable")
    assert step.assigning == ("t-0", "t-1", "t-2", "t-3")
    seen = last_seq(ctx)
    b = ConsumerMember(ctx, "cg", topics=["t"])
    b.join()
    a.beat()  # a learns it must give two partitions up
    new = [e for _s, e in ctx.coordinator.history.events("cg", seen)]
    assert [e.kind for e in new] == [
        "member-joined", "group-epoch-bumped", "target-assignment-computed",
        "member-epoch-advanced", "member-epoch-advanced",
    ]
    assert new[1].cause == f"member {b.member_id} joined"
    # b waits for partitions a still owns; a must revoke them first.
    assert (new[3].member_id, new[3].state, new[3].assigning) == (b.member_id, "unreleased-partitions", ())
    revoking = new[4]
    assert revoking.member_id == a.member_id and revoking.state == "unrevoked-partitions"
    assert len(revoking.revoking) == 2 and revoking.assigning == ()
    settle(a, b)
    steps = [e for e in events(ctx, "cg", ev.MemberEpochAdvanced) if e.member_id == b.member_id]
    assert steps[-1].to_epoch == 2 and len(steps[-1].assigning) == 2
    # Settled members heartbeat without a trace.
    seen = last_seq(ctx)
    a.beat()
    b.beat()
    assert ctx.coordinator.history.events("cg", seen) == []


def test_consumer_group_leave_and_fencing() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = ConsumerMember(ctx, "cg", topics=["t"])
    b = ConsumerMember(ctx, "cg", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    # A stale epoch is fenced.
    assert consumer_heartbeat(ctx, "cg", a.member_id, a.epoch + 3).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    fenced = events(ctx, "cg", ev.RequestFenced)[-1]
    assert (fenced.member_id, fenced.api, fenced.error, fenced.request_generation, fenced.current_generation) == (
        a.member_id, "ConsumerGroupHeartbeat", "FENCED_MEMBER_EPOCH", a.epoch + 3, a.epoch
    )
    epoch = ctx.coordinator.consumer_group("cg").group_epoch
    seen = last_seq(ctx)
    b.leave()
    assert [e.kind for _s, e in ctx.coordinator.history.events("cg", seen)] == [
        "member-left", "member-fenced", "group-epoch-bumped",
    ]
    _left, out, bump = [e for _s, e in ctx.coordinator.history.events("cg", seen)]
    assert out.cause == "left" and bump.epoch == epoch + 1 and bump.cause == f"member {b.member_id} left"
    # a stops heartbeating: its session runs out.
    seen = last_seq(ctx)
    ctx.advance(ctx.config.consumer_group_session_timeout_ms)
    expired = [e for _s, e in ctx.coordinator.history.events("cg", seen) if isinstance(e, ev.MemberFenced)]
    assert [(e.member_id, e.cause, e.at_ms) for e in expired] == [(a.member_id, "session-expired", ctx.now)]


def test_consumer_group_member_that_does_not_revoke_is_fenced_at_the_rebalance_timeout() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = ConsumerMember(ctx, "cg", topics=["t"])
    a.join()
    b = ConsumerMember(ctx, "cg", topics=["t"])
    b.join()
    a.beat()  # a must revoke one partition; it never comes back to say it did
    b.beat()
    for _ in range(REBALANCE_MS // 5_000):
        ctx.advance(5_000)
        b.beat()
    fenced = events(ctx, "cg", ev.MemberFenced)
    assert [(e.member_id, e.cause) for e in fenced] == [(a.member_id, "rebalance-timeout")]
    bump = events(ctx, "cg", ev.GroupEpochBumped)[-1]
    assert bump.cause == f"member {a.member_id} was fenced: it did not revoke its partitions in time"


def test_consumer_group_events_need_their_records_written() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    ctx.fail_appends_with = ErrorCode.NOT_COORDINATOR
    a = ConsumerMember(ctx, "cg", topics=["t"])
    assert a.join().error_code != 0
    assert events(ctx, "cg") == []


def test_consumer_group_history_is_replayed_from_the_records() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=2)
    a = ConsumerMember(ctx, "cg", topics=["t"])
    b = ConsumerMember(ctx, "cg", topics=["t"])
    a.join()
    b.join()
    settle(a, b)
    b.leave()
    fresh = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now), topics=lambda: ctx.topics)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    replayed = events(fresh, "cg")
    assert replayed and all(e.replayed for e in replayed)
    by_kind: dict[str, list[Any]] = {}
    for e in replayed:
        by_kind.setdefault(e.kind, []).append(e)
    assert [e.epoch for e in by_kind["group-epoch-bumped"]] == [1, 2, 3]
    assert [e.member_id for e in by_kind["member-joined"]] == [a.member_id, b.member_id]
    assert [e.member_id for e in by_kind["member-fenced"]] == [b.member_id]
    assert by_kind["target-assignment-computed"][-1].epoch == 2
    assert {e.member_id for e in by_kind["member-epoch-advanced"]} == {a.member_id, b.member_id}


def test_a_deleted_group_takes_its_history_along() -> None:
    ctx = GroupContext()
    a, b = ctx.form_group("g", 2)
    ctx.form_group("h", 1)
    ctx.leave("g", (a.member_id, None), (b.member_id, None))
    assert ctx.state("g") is GroupState.EMPTY and events(ctx, "g")
    assert ctx.delete_groups("g").response.results[0].error_code == 0
    assert events(ctx, "g") == [] and ctx.coordinator.history_of("g") == []
    assert events(ctx, "h")
    set_topics(ctx, t=1)
    m = ConsumerMember(ctx, "cg", topics=["t"])
    m.join()
    m.leave()
    assert events(ctx, "cg")
    assert ctx.delete_groups("cg").response.results[0].error_code == 0
    assert events(ctx, "cg") == []
