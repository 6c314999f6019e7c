"""The heartbeat interval of consumer-group members (consumer_intervals.py), on the manual clock.

The reconciling budget: while many members change at once, the short interval stretches
so their heartbeats stay within the budget, up to the regular interval.
"""

from __future__ import annotations

from consumer_group_client import Member, settle
from consumer_group_client import set_topics as set_topic_partitions
from coord_context import GroupContext

from slipstream.coordinator import CoordinatorConfig
from slipstream.coordinator.config import ConsumerGroupTimeouts
from slipstream.coordinator.consumer_intervals import MAX_STRETCH, RECOUNT_MS, SETTLE_WINDOW_MS

REGULAR_MS = 5_000
SHORT_MS = 200


def context(reconciling_budget: int) -> GroupContext:
    ctx = GroupContext(CoordinatorConfig(consumer_group_reconciling_heartbeat_budget_per_s=reconciling_budget))
    set_topic_partitions(ctx, t=4)
    return ctx


def joined(ctx: GroupContext, group: str) -> tuple[Member, int]:
    member = Member(ctx, group, topics=["t"])
    return member, member.join().heartbeat_interval_ms


def test_without_a_reconciling_budget_every_changing_member_gets_the_short_interval() -> None:
    ctx = context(0)
    intervals = [joined(ctx, f"g{i}")[1] for i in range(50)]
    assert intervals == [SHORT_MS] * 50


def test_the_short_interval_stretches_with_the_members_changing_at_once() -> None:
    # 20 heartbeats/s: four members every 200 ms fit; a fifth needs 250 ms each, a sixth 300.
    ctx = context(20)
    first, interval = joined(ctx, "g0")
    assert interval == SHORT_MS
    assert [joined(ctx, f"g{i}")[1] for i in range(1, 6)] == [SHORT_MS, SHORT_MS, SHORT_MS, 250, 300]
    # A second member of g0: seven change at once. The first must now revoke; it is counted
    # already, so not twice.
    assert Member(ctx, "g0", topics=["t"]).join().heartbeat_interval_ms == 350
    assert first.beat().heartbeat_interval_ms == 350
    assert first.last.assignment is not None  # it gave up partitions


def test_the_stretch_stops_at_max_stretch_times_the_short_interval_and_at_the_regular_one() -> None:
    ctx = context(1)
    assert [joined(ctx, f"g{i}")[1] for i in range(3)] == [MAX_STRETCH * SHORT_MS] * 3

    def timeouts(group_id: str) -> ConsumerGroupTimeouts:
        return ConsumerGroupTimeouts(45_000, 300 if group_id.startswith("quick") else REGULAR_MS)

    config = CoordinatorConfig(consumer_group_reconciling_heartbeat_budget_per_s=1)
    ctx = GroupContext(config, consumer_group_timeouts=timeouts)
    set_topic_partitions(ctx, t=4)
    # Groups whose regular interval is 300 ms: the stretch stops there.
    assert [joined(ctx, f"quick{i}")[1] for i in range(2)] == [300, 300]


def test_settled_members_stop_counting_and_the_short_interval_comes_back() -> None:
    ctx = context(10)
    members = [joined(ctx, f"g{i}")[0] for i in range(4)]
    ctx.advance(SETTLE_WINDOW_MS)
    for m in members:  # each alone in its group
        settle(m)
    assert all(m.last.heartbeat_interval_ms == REGULAR_MS for m in members)
    assert joined(ctx, "late")[1] == SHORT_MS


def test_a_member_that_left_stops_counting_after_two_of_its_intervals() -> None:
    ctx = context(10)
    gone = [joined(ctx, f"g{i}")[0] for i in range(3)]  # the third was given 300 ms
    for m in gone:
        assert m.leave().error_code == 0
    assert joined(ctx, "next")[1] == 400  # the three still count
    ctx.advance(max(RECOUNT_MS, 2 * 300) + 1)
    # Pruned at the recount: the three and "next" (given 400 ms, counted for 800) have lapsed.
    assert joined(ctx, "after")[1] == SHORT_MS


def test_within_the_settle_window_a_reconciled_member_waits_for_latecomers_only_within_budget() -> None:
    # Roomy budget: a member that has its partitions still heartbeats fast for the settle window.
    ctx = context(1_000)
    a, _ = joined(ctx, "g")
    assert a.beat().heartbeat_interval_ms == SHORT_MS
    ctx.advance(SETTLE_WINDOW_MS)
    assert a.beat().heartbeat_interval_ms == REGULAR_MS
    # Stretched budget: it is given its settled interval at once.
    ctx = context(10)
    busy = [joined(ctx, f"busy{i}")[0] for i in range(3)]
    a, _ = joined(ctx, "g")
    assert a.last.heartbeat_interval_ms == 400
    assert a.beat().heartbeat_interval_ms == REGULAR_MS
    assert [m.last.heartbeat_interval_ms for m in busy] == [SHORT_MS, SHORT_MS, 300]
