"""The history timeline: a scripted history formatted line by line."""

from __future__ import annotations

from consumer_group_client import Member as ConsumerMember
from consumer_group_client import set_topics, settle
from coord_context import REBALANCE_MS, GroupContext, assignment

from slipstream.coordinator import history as ev
from slipstream.coordinator.history_timeline import (
    TimelineFormatter,
    duration,
    format_timeline,
    short_member_id,
)

T0 = 1_764_061_200_000  # 2025-11-25 09:00:00.000 UTC


def at(seconds: float) -> int:
    return T0 + round(seconds * 1000)


def scripted() -> list[ev.GroupEvent]:
    g = "orders"
    return [
        ev.GenerationStarted(group_id=g, at_ms=at(-60), replayed=True, generation=6, member_ids=("c-1", "c-2", "c-3")),
        ev.MemberJoined(group_id=g, at_ms=at(0), member_id="c-4", client_id="app", client_host="/10.0.0.4"),
        ev.RebalanceStarted(group_id=g, at_ms=at(0), generation=6, cause=ev.RebalanceCause.MEMBER_JOINED),
        ev.MemberJoined(group_id=g, at_ms=at(0.1), member_id="c-1", how=ev.JOINED_REJOIN),
        ev.RequestFenced(
            group_id=g, at_ms=at(0.2), member_id="c-2", api="Heartbeat", error="ILLEGAL_GENERATION",
            request_generation=5, current_generation=6,
        ),
        ev.RemovedAtRebalanceTimeout(group_id=g, at_ms=at(3), member_ids=("c-3",), waited_ms=3000),
        ev.ProtocolSelected(group_id=g, at_ms=at(3), protocol="range", votes={"range": 2, "roundrobin": 1}),
        ev.LeaderElected(group_id=g, at_ms=at(3), member_id="c-1", previous="c-2"),
        ev.GenerationStarted(group_id=g, at_ms=at(3), generation=7, member_ids=("c-1", "c-2", "c-4")),
        ev.AssignmentSent(
            group_id=g, at_ms=at(3.2), generation=7, decoded=True,
            moves=(
                ev.PartitionMove(partition="t-2", from_member="c-3", to_member="c-4"),
                ev.PartitionMove(partition="t-3", from_member=None, to_member="c-4"),
            ),
        ),
        ev.GenerationCompleted(group_id=g, at_ms=at(3.2), generation=7, duration_ms=3200),
        ev.MemberLeft(group_id=g, at_ms=at(10), member_id="c-4", reason="the consumer is being closed"),
        ev.RebalanceStarted(group_id=g, at_ms=at(10), generation=7, cause=ev.RebalanceCause.MEMBER_LEFT),
        ev.SessionExpired(group_id=g, at_ms=at(10.05), member_id="c-2", session_timeout_ms=10_000, last_heartbeat_ms=at(0.05)),
        ev.GenerationStarted(group_id=g, at_ms=at(10.05), generation=8, member_ids=("c-1",)),
        ev.AssignmentSent(group_id=g, at_ms=at(10.1), generation=8, decoded=False),
        ev.GenerationCompleted(group_id=g, at_ms=at(10.1), generation=8, duration_ms=100),
    ]


def test_a_scripted_history_reads_as_a_timeline() -> None:
    assert format_timeline(scripted()) == [
        "2025-11-25 (UTC)",
        "08:59:00.000    generation 6 started with 3 members: c-1, c-2, c-3  [rebuilt from __consumer_offsets]",
        "09:00:00.000  member c-4 joined (client app, host /10.0.0.4)",
        "09:00:00.000  rebalance started (leaving generation 6): member c-4 joined",
        "09:00:00.100  member c-1 rejoined",
        "09:00:00.200  Heartbeat from member c-2 fenced: ILLEGAL_GENERATION (it sent 5, the group is at 6)",
        "09:00:03.000  member c-3 never rejoined within 3.0 s: removed at the rebalance timeout",
        "09:00:03.000    protocol range chosen (range 2 votes, roundrobin 1 vote)",
        "09:00:03.000    leader: c-1 (was c-2)",
        "09:00:03.000    generation 7 started with 3 members: c-1, c-2, c-4",
        "09:00:03.200    assignment sent for generation 7: c-4 gets t-3; t-2 c-3 -> c-4",
        "09:00:03.200    generation 7 complete",
        "09:00:03.200  generation 7: 3.2 s, after member c-4 joined; waited 3.0 s for member c-3 which never "
        "rejoined; removed at rebalance timeout",
        '09:00:10.000  member c-4 left (reason: "the consumer is being closed")',
        '09:00:10.000  rebalance started (leaving generation 7): member c-4 left (reason: "the consumer is being closed")',
        "09:00:10.050  member c-2's session expired (last heartbeat 10.0 s before; session timeout 10.0 s)",
        "09:00:10.050    generation 8 started with 1 member: c-1",
        "09:00:10.100    assignment sent for generation 8: (not the consumer protocol: partitions unknown)",
        "09:00:10.100    generation 8 complete",
        '09:00:10.100  generation 8: 100 ms, after member c-4 left (reason: "the consumer is being closed")',
    ]


def test_feeding_in_pieces_gives_the_same_lines() -> None:
    events = scripted()
    formatter = TimelineFormatter()
    lines = formatter.feed(events[:5]) + formatter.feed(events[5:11]) + formatter.feed(events[11:])
    assert lines == format_timeline(events)


def test_durations() -> None:
    assert (duration(40), duration(999), duration(1000), duration(3249)) == ("40 ms", "999 ms", "1.0 s", "3.2 s")


def test_a_real_coordinator_history_formats_with_the_wait() -> None:
    ctx = GroupContext()
    a, b, c = ctx.form_group("g", 3)
    leader = next(m for m in (a, b, c) if m.member_id == m.leader)
    rest = [m for m in (a, b, c) if m is not leader]
    first = ctx.join("g", leader.member_id)
    ctx.join("g", rest[0].member_id)
    for _ in range(REBALANCE_MS // 5_000):
        ctx.advance(5_000)
        ctx.heartbeat("g", rest[1].generation, rest[1].member_id)
    ctx.advance(100)
    gen = first.response.generation_id
    ctx.sync("g", gen, rest[0].member_id)
    ctx.sync("g", gen, leader.member_id, {leader.member_id: assignment(t=[0, 2]), rest[0].member_id: assignment(t=[1])})
    lines = format_timeline(e for _s, e in ctx.coordinator.history.events("g"))
    assert lines[-1].endswith(
        f"generation {gen}: 30.1 s, after member {leader.member_id} rejoined; waited 30.0 s for member "
        f"{rest[1].member_id} which never rejoined; removed at rebalance timeout"
    )
    assert any(f"t-2 {rest[1].member_id} -> {leader.member_id}" in line for line in lines)


def test_client_member_ids_shorten_to_eight_uuid_digits() -> None:
    long_id = "billing-1-8a8f2537-8ebe-4da1-a7fd-fa4cd3c032db"
    assert short_member_id(long_id) == "billing-1-8a8f2537"
    assert short_member_id("c-1") == "c-1" and short_member_id("8a8f2537-8ebe-4da1-a7fd-fa4cd3c032db") == (
        "8a8f2537-8ebe-4da1-a7fd-fa4cd3c032db"
    )
    events = [
        ev.GenerationStarted(group_id="g", at_ms=T0, generation=1, member_ids=(long_id,), leader=long_id),
        ev.AssignmentSent(
            group_id="g", at_ms=T0, generation=1, decoded=True,
            moves=(ev.PartitionMove(partition="t-0", from_member=None, to_member=long_id),),
            partitions={long_id: 1},
        ),
    ]
    assert format_timeline(events, short_ids=True)[1:] == [
        "09:00:00.000    generation 1 started with 1 member: billing-1-8a8f2537",
        "09:00:00.000    assignment sent for generation 1: billing-1-8a8f2537 gets t-0",
    ]


def test_consumer_group_reconciliations_are_summarised_with_their_duration() -> None:
    ctx = GroupContext()
    set_topics(ctx, t=4)
    a = ConsumerMember(ctx, "cg", topics=["t"])
    a.join()
    lines = format_timeline(e for _s, e in ctx.coordinator.history.events("cg"))
    assert lines[-1].endswith("epoch 1: reconciled in 0 ms, after group created")
    b = ConsumerMember(ctx, "cg", topics=["t"])
    b.join()  # b waits for two of a's partitions
    ctx.advance(400)
    a.beat()  # a learns it must revoke them
    ctx.advance(800)
    a.beat()  # a has revoked: it is stable at epoch 2
    lines = format_timeline(e for _s, e in ctx.coordinator.history.events("cg"))
    assert not any("epoch 2: reconciled" in line for line in lines)  # b has not got its partitions yet
    ctx.advance(300)
    b.beat()
    lines = format_timeline(e for _s, e in ctx.coordinator.history.events("cg"))
    assert lines[-1].endswith(f"epoch 2: reconciled in 1.5 s, after member {b.member_id} joined; last to settle: {b.member_id}")
    # A member leaving: the one left is reconciled when it reaches the new epoch.
    ctx.advance(1000)
    b.leave()
    ctx.advance(200)
    settle(a)
    lines = format_timeline(e for _s, e in ctx.coordinator.history.events("cg"))
    assert lines[-1].endswith(f"epoch 3: reconciled in 200 ms, after member {b.member_id} left")
    assert sum("reconciled in" in line for line in lines) == 3


def test_an_emptied_consumer_group_has_nothing_to_reconcile() -> None:
    g = "cg"
    events = [
        ev.MemberJoined(group_id=g, at_ms=at(0), member_id="m-1"),
        ev.GroupEpochBumped(group_id=g, at_ms=at(0), epoch=1, cause="group created"),
        ev.MemberEpochAdvanced(group_id=g, at_ms=at(0), member_id="m-1", from_epoch=0, to_epoch=1, state="stable"),
        ev.MemberLeft(group_id=g, at_ms=at(5), member_id="m-1"),
        ev.MemberFenced(group_id=g, at_ms=at(5), member_id="m-1", epoch=1, cause="left"),
        ev.GroupEpochBumped(group_id=g, at_ms=at(5), epoch=2, cause="member m-1 left"),
        ev.MemberJoined(group_id=g, at_ms=at(9), member_id="m-2"),
        ev.GroupEpochBumped(group_id=g, at_ms=at(9), epoch=3, cause="member m-2 joined"),
        ev.MemberEpochAdvanced(group_id=g, at_ms=at(9.25), member_id="m-2", from_epoch=0, to_epoch=3, state="stable"),
    ]
    summaries = [line for line in format_timeline(events) if "reconciled" in line]
    assert summaries == [
        "09:00:00.000  epoch 1: reconciled in 0 ms, after group created",
        "09:00:09.250  epoch 3: reconciled in 250 ms, after member m-2 joined",
    ]
