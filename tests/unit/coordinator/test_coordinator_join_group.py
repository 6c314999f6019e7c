"""JoinGroup: member ids, the join phase, generations, leaders, protocol vote, delays, limits."""

from __future__ import annotations

import pytest
from coord_context import REBALANCE_MS, GroupContext, protocols, subscription

from slipstream.coordinator import CoordinatorConfig, GroupState
from slipstream.protocol import group_records as gr
from slipstream.protocol.errors import ErrorCode

S = GroupState


def test_v4_joiner_without_id_gets_member_id_required_then_joins(ctx: GroupContext) -> None:
    first = ctx.join("g", client_id="app")
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.response.member_id
    assert member_id.startswith("app-")
    group = ctx.coordinator.group("g")
    assert group is not None and group.is_pending_member(member_id) and group.state is S.EMPTY

    second = ctx.join("g", member_id)
    # Parked: the group left Empty, so the first wait (a quarter of
    # group.initial.rebalance.delay.ms, 25 of 100 ms) runs before the first generation.
    assert not second.done
    assert ctx.state("g") is S.PREPARING_REBALANCE
    ctx.advance(24)
    assert not second.done
    ctx.advance(1)
    r = second.response
    assert (r.error_code, r.member_id, r.leader, r.generation_id) == (0, member_id, member_id, 1)
    assert r.protocol_type == "consumer" and r.protocol_name == "range"
    assert [m.member_id for m in r.members] == [member_id]
    assert r.members[0].metadata == subscription("t")
    assert ctx.state("g") is S.COMPLETING_REBALANCE


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_before_v4_a_joiner_is_added_at_once(ctx: GroupContext, version: int) -> None:
    call = ctx.join("g", version=version)
    assert not call.done
    ctx.advance(100)
    r = call.response
    assert r.error_code == 0 and r.member_id.startswith("client-") and r.generation_id == 1
    assert r.protocol_name == "range"  # not nullable before v7


def test_v0_rebalance_timeout_is_the_session_timeout(ctx: GroupContext) -> None:
    call = ctx.join("g", version=0, session_ms=7000)
    ctx.advance(100)
    member = ctx.coordinator.group("g").member(call.response.member_id)  # type: ignore[union-attr]
    assert member.rebalance_timeout_ms == member.session_timeout_ms == 7000


def test_pending_member_that_never_rejoins_expires_after_its_session(ctx: GroupContext) -> None:
    first = ctx.join("g", session_ms=6000)
    member_id = first.response.member_id
    ctx.advance(5999)
    assert ctx.coordinator.group("g").is_pending_member(member_id)  # type: ignore[union-attr]
    ctx.advance(1)
    assert not ctx.coordinator.group("g").is_pending_member(member_id)  # type: ignore[union-attr]
    late = ctx.join("g", member_id)
    # The group still exists (Empty); the id is simply unknown now.
    assert late.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_completes_as_soon_as_every_known_member_rejoined(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    assert a.leader == a.member_id and a.generation == 1
    newcomer = ctx.join_new("g", client_id="c3")
    assert ctx.state("g") is S.PREPARING_REBALANCE
    assert ctx.heartbeat("g", 1, b.member_id).error == ErrorCode.REBALANCE_IN_PROGRESS
    ra = ctx.join("g", a.member_id)
    assert not ra.done
    rb = ctx.join("g", b.member_id)  # the last one: completes at once, no timer needed
    for call in (ra, rb, newcomer):
        assert call.response.error_code == 0 and call.response.generation_id == 2
    assert ra.response.leader == a.member_id  # the leader rejoined: it stays leader
    assert len(ra.response.members) == 3
    assert rb.response.members == [] and newcomer.response.members == []
    assert ctx.state("g") is S.COMPLETING_REBALANCE


def test_rebalance_timeout_removes_dynamic_members_that_did_not_rejoin(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, session_ms=60_000, rebalance_ms=20_000)
    ra = ctx.join("g", a.member_id, session_ms=60_000, rebalance_ms=20_000)  # the leader forces a rebalance
    assert ctx.state("g") is S.PREPARING_REBALANCE and not ra.done
    ctx.advance(19_999)
    assert not ra.done
    ctx.advance(1)
    r = ra.response
    assert r.generation_id == 2 and [m.member_id for m in r.members] == [a.member_id]
    group = ctx.coordinator.group("g")
    assert group is not None and not group.has_member(b.member_id)
    assert ctx.heartbeat("g", 2, b.member_id).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_new_leader_is_elected_when_the_leader_does_not_rejoin(ctx: GroupContext) -> None:
    _a, b = ctx.form_group("g", 2)
    rb = ctx.join("g", b.member_id, protos=protocols("range", topics=["t", "u"]))  # changed metadata
    ctx.advance(REBALANCE_MS)
    assert rb.response.leader == b.member_id and rb.response.generation_id == 2
    assert [m.member_id for m in rb.response.members] == [b.member_id]


def test_rebalance_timeout_keeps_static_members(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, instance_ids=["i-a", "i-b"], session_ms=60_000)
    ra = ctx.join("g", a.member_id, instance_id="i-a", session_ms=60_000)
    ctx.advance(REBALANCE_MS)
    r = ra.response
    assert r.generation_id == 2
    # b did not rejoin but is static: still a member, and the leader assigns it too.
    assert sorted(m.member_id for m in r.members) == sorted([a.member_id, b.member_id])
    assert {m.group_instance_id for m in r.members} == {"i-a", "i-b"}
    # It stays a member until it misses something it must do: here, sending SyncGroup.
    ctx.sync("g", 2, a.member_id, {a.member_id: b"x", b.member_id: b"y"}, instance_id="i-a")
    assert ctx.state("g") is S.STABLE
    group = ctx.coordinator.group("g")
    assert group is not None
    # Like every member of the new generation, b must send SyncGroup within the rebalance timeout.
    ctx.advance(REBALANCE_MS - 1)
    assert ctx.heartbeat("g", 2, a.member_id, instance_id="i-a").error == 0
    assert group.has_member(b.member_id)
    ctx.advance(1)
    assert not group.has_member(b.member_id)
    assert ctx.state("g") is S.PREPARING_REBALANCE
    assert ctx.heartbeat("g", 2, a.member_id, instance_id="i-a").error == ErrorCode.REBALANCE_IN_PROGRESS


def test_no_member_rejoined_postpones_completion(ctx: GroupContext) -> None:
    """Only static members that have not rejoined remain: wait another rebalance timeout."""
    a, b = ctx.form_group("g", 2, instance_ids=["i-a", "i-b"], session_ms=120_000)
    c = ctx.join_new("g", client_id="c")  # a dynamic newcomer starts a rebalance...
    assert ctx.state("g") is S.PREPARING_REBALANCE
    group = ctx.coordinator.group("g")
    assert group is not None
    newcomer_id = next(m for m in group.members if m not in (a.member_id, b.member_id))
    ctx.leave("g", (newcomer_id, None))  # ...and leaves again
    assert c.error == ErrorCode.UNKNOWN_MEMBER_ID
    ctx.advance(REBALANCE_MS)  # nobody rejoined: no generation can be formed
    assert ctx.state("g") is S.PREPARING_REBALANCE and group.generation_id == 1
    assert ctx.timer.is_scheduled("join-g")
    ra = ctx.join("g", a.member_id, instance_id="i-a", session_ms=120_000)
    assert not ra.done  # b (static) has not rejoined
    ctx.advance(REBALANCE_MS)
    r = ra.response
    assert r.generation_id == 2 and r.leader == a.member_id
    assert sorted(m.member_id for m in r.members) == sorted([a.member_id, b.member_id])


def test_initial_delay_is_extended_while_members_keep_arriving() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    first = ctx.join_new("g", rebalance_ms=1_000)  # t=0: first wait 25 ms
    ctx.advance(20)
    second = ctx.join_new("g", rebalance_ms=1_000)  # t=20
    ctx.advance(5)  # t=25: a member arrived during the wait -> wait another full 100
    assert not first.done
    ctx.advance(99)
    assert not first.done
    ctx.advance(1)  # t=125: nobody new -> complete
    assert first.response.generation_id == second.response.generation_id == 1
    assert len(first.response.members) == 2


def test_a_lone_member_waits_only_the_first_quarter_of_the_delay() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    call = ctx.join_new("g", rebalance_ms=1_000)
    ctx.advance(24)
    assert not call.done
    ctx.advance(1)
    assert call.response.generation_id == 1 and len(call.response.members) == 1


def test_a_coordinator_lookup_during_the_first_wait_extends_it() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    first = ctx.join_new("g", rebalance_ms=1_000)  # t=0: first wait 25 ms
    ctx.advance(10)
    ctx.coordinator.note_coordinator_lookup(["other", "g"], "c2", ctx.now)  # t=10: a second consumer
    ctx.advance(15)  # t=25: extended by a full delay
    assert not first.done
    ctx.advance(40)
    second = ctx.join_new("g", rebalance_ms=1_000)  # t=65: it joins 65 ms after the first
    ctx.advance(60)  # t=125: it arrived during the extension -> one more delay
    assert not first.done
    ctx.advance(100)  # t=225
    assert first.response.generation_id == second.response.generation_id == 1
    assert len(first.response.members) == 2


@pytest.mark.parametrize("lookups", [1, 2])
def test_a_lone_consumers_own_lookups_do_not_extend_the_first_wait(lookups: int) -> None:
    # librdkafka looks up on its bootstrap connection and again on its broker connection.
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    for i in range(lookups):
        ctx.coordinator.note_coordinator_lookup(["g"], f"conn-{i}", ctx.now)
        ctx.advance(20)
    assert ctx.coordinator.group("g") is None  # a lookup creates no group
    call = ctx.join_new("g", rebalance_ms=1_000)
    ctx.advance(24)
    assert not call.done
    ctx.advance(1)  # the lone member waits only the first quarter
    assert call.response.generation_id == 1


def test_lookups_just_before_the_first_join_extend_the_first_wait() -> None:
    # Ten consumers start together; all look up the coordinator, one joins at once and the
    # others only 65 ms later (their coordinator connections came up later).
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    for i in range(10):
        ctx.coordinator.note_coordinator_lookup(["g"], f"conn-{i}", ctx.now)
        ctx.advance(1)
    first = ctx.join_new("g", rebalance_ms=1_000)  # t=0
    ctx.advance(25)  # 10 lookups > 2 per member present: wait a full delay more
    assert not first.done
    ctx.advance(40)
    rest = [ctx.join_new("g", rebalance_ms=1_000) for _ in range(9)]  # t=65
    ctx.advance(60)  # t=125: they arrived during the extension
    assert not first.done
    ctx.advance(100)  # t=225: a quiet delay, and the lookups are older than the delay
    assert {c.response.generation_id for c in [first, *rest]} == {1}
    assert len(first.response.members) == 10


def test_old_lookups_do_not_extend_the_first_wait() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    for i in range(10):
        ctx.coordinator.note_coordinator_lookup(["g"], f"conn-{i}", ctx.now)
    ctx.advance(200)  # looked up long before anyone joined
    call = ctx.join_new("g", rebalance_ms=1_000)
    ctx.advance(25)
    assert call.response.generation_id == 1 and len(call.response.members) == 1


def test_a_coordinator_lookup_for_a_stable_group_does_not_start_a_rebalance() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    ctx.form_group("g", 2)
    ctx.coordinator.note_coordinator_lookup(["g"], "c1", ctx.now)
    group = ctx.coordinator.group("g")
    assert group is not None and group.state is S.STABLE and not group.new_member_added


def test_a_member_id_handed_out_during_the_wait_extends_it() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    first = ctx.join_new("g", rebalance_ms=1_000)  # t=0
    ctx.advance(10)
    probe = ctx.join("g", rebalance_ms=1_000)  # t=10: MEMBER_ID_REQUIRED, not a member yet
    assert probe.error == ErrorCode.MEMBER_ID_REQUIRED
    ctx.advance(15)  # t=25: the wait is extended for it
    assert not first.done
    ctx.advance(30)
    second = ctx.join("g", probe.response.member_id, rebalance_ms=1_000)  # t=55: it comes back
    ctx.advance(69)  # t=124: the extension still runs
    assert not first.done and not second.done
    ctx.advance(1)  # t=125: a member was added during the extension -> one more delay
    assert not first.done
    ctx.advance(100)  # t=225
    assert first.response.generation_id == second.response.generation_id == 1
    assert len(first.response.members) == 2


def test_a_member_id_handed_out_keeps_the_wait_going_until_the_rebalance_timeout() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    first = ctx.join_new("g", rebalance_ms=1_000)
    ctx.advance(10)
    probe = ctx.join("g", rebalance_ms=1_000)  # handed an id at t=10, never comes back
    assert probe.error == ErrorCode.MEMBER_ID_REQUIRED
    ctx.advance(989)  # t=999: still expected, so the waits go on
    assert not first.done
    ctx.advance(1)  # t=1000: the rebalance timeout bounds them
    assert first.response.generation_id == 1 and len(first.response.members) == 1


def test_members_handed_ids_before_the_group_left_empty_are_waited_for() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    # Five members send their first JoinGroup together; all are handed ids while Empty.
    ids = [ctx.join("g", rebalance_ms=1_000).response.member_id for _ in range(5)]
    first = ctx.join("g", ids[0], rebalance_ms=1_000)  # t=0: leaves Empty, first wait 25 ms
    ctx.advance(40)  # the others are slow to come back
    assert not first.done
    rest = [ctx.join("g", member_id, rebalance_ms=1_000) for member_id in ids[1:]]  # t=40
    ctx.advance(85)  # t=125: the extension that started at t=25 ends; they all joined during it
    assert not first.done
    ctx.advance(100)  # t=225: a quiet full delay -> complete
    assert {c.response.generation_id for c in [first, *rest]} == {1}
    assert len(first.response.members) == 5


def test_initial_delay_extension_is_bounded_by_the_rebalance_timeout() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=100, offsets_topic_num_partitions=4))
    calls = [ctx.join_new("g", rebalance_ms=300)]
    for _ in range(40):  # a new member every 20 ms, forever
        ctx.advance(20)
        if calls[0].done:
            break
        calls.append(ctx.join_new("g", rebalance_ms=300))
    assert calls[0].done
    # waits of 25, 100, 100, then the last 75 up to the rebalance timeout -> done at t=300
    assert ctx.now == 1_000_300
    assert ctx.coordinator.group("g").generation_id == 1  # type: ignore[union-attr]
    assert len(calls) == 15


def test_zero_initial_delay_completes_on_the_next_timer_tick() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=4))
    call = ctx.join_new("g")
    assert not call.done
    assert ctx.advance(0) == ["join-g"]
    assert call.response.generation_id == 1


def test_zero_initial_delay_is_not_extended_by_arrivals() -> None:
    ctx = GroupContext(CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=4))
    call = ctx.join_new("g")
    assert ctx.join("g").error == ErrorCode.MEMBER_ID_REQUIRED  # would extend a nonzero delay
    assert ctx.advance(0) == ["join-g"]
    assert call.response.generation_id == 1


@pytest.mark.parametrize(("delay", "first"), [(0, 0), (1, 1), (3, 1), (4, 1), (5, 2), (100, 25), (3000, 750)])
def test_initial_wait_is_a_quarter_of_the_delay_rounded_up(delay: int, first: int) -> None:
    from slipstream.coordinator.classic_rebalance import initial_wait_ms

    assert initial_wait_ms(delay) == first


PROTOCOL_VOTES = [
    # (each member's protocols in preference order, expected protocol or the failing member index)
    ([["range"], ["range"]], "range"),
    ([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin", "range"]], "roundrobin"),
    ([["range", "roundrobin"], ["roundrobin", "range"]], "range"),  # tie: the first vote cast wins
    ([["cooperative-sticky", "range"], ["range", "cooperative-sticky"], ["cooperative-sticky"]], "cooperative-sticky"),
    ([["range", "cooperative-sticky"], ["cooperative-sticky", "range"], ["cooperative-sticky", "range"]], "cooperative-sticky"),
    # The seed's case: two StickyAssignor consumers and one CooperativeStickyAssignor consumer.
    ([["sticky"], ["sticky"], ["cooperative-sticky"]], 2),
    ([["sticky", "cooperative-sticky"], ["sticky"], ["cooperative-sticky"]], 2),
    ([["cooperative-sticky", "sticky"], ["sticky", "cooperative-sticky"], ["cooperative-sticky"]], "cooperative-sticky"),
    ([["sticky"], ["cooperative-sticky"]], 1),
]


@pytest.mark.parametrize(("prefs", "expected"), PROTOCOL_VOTES)
def test_protocol_vote(ctx: GroupContext, prefs: list[list[str]], expected: str | int) -> None:
    calls = [ctx.join_new("g", protos=protocols(*p), client_id=f"c{i}") for i, p in enumerate(prefs)]
    if isinstance(expected, int):
        assert calls[expected].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert calls[expected].response.member_id == ""
        calls.pop(expected)
    ctx.advance_until_done(*calls)
    names = {c.response.protocol_name for c in calls}
    if isinstance(expected, str):
        assert names == {expected}
    for c in calls:
        assert c.response.error_code == 0


def test_protocol_vote_is_redone_each_generation(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, protos=protocols("range", "roundrobin"))
    ra = ctx.join("g", a.member_id, protos=protocols("roundrobin", "range"))
    rb = ctx.join("g", b.member_id, protos=protocols("roundrobin", "range"))
    assert ra.response.protocol_name == rb.response.protocol_name == "roundrobin"


@pytest.mark.parametrize(
    ("protocol_type", "protos"),
    [("", protocols("range")), ("consumer", [])],
)
def test_first_member_with_empty_protocol_type_or_list_is_inconsistent(
    ctx: GroupContext, protocol_type: str, protos: list[tuple[str, bytes]]
) -> None:
    call = ctx.join("g", protocol_type=protocol_type, protos=protos)
    assert call.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.coordinator.group("g") is None  # no empty shell left behind


def test_joiner_with_another_protocol_type_is_inconsistent(ctx: GroupContext) -> None:
    ctx.form_group("g", 1)
    assert ctx.join("g", protocol_type="connect").error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_unchanged_rejoin_while_completing_rebalance_returns_current_generation(ctx: GroupContext) -> None:
    a_call = ctx.join_new("g", client_id="a")
    b_call = ctx.join_new("g", client_id="b")
    ctx.advance_until_done(a_call, b_call)
    a, b = a_call.response, b_call.response
    assert ctx.state("g") is S.COMPLETING_REBALANCE
    # The leader lost its JoinGroup response and asks again with the same metadata.
    again = ctx.join("g", a.member_id)
    r = again.response
    assert (r.generation_id, r.leader, r.member_id) == (1, a.member_id, a.member_id)
    assert len(r.members) == 2  # still the leader: it gets the members again
    follower_again = ctx.join("g", b.member_id).response
    assert follower_again.generation_id == 1 and follower_again.members == []
    assert ctx.state("g") is S.COMPLETING_REBALANCE


def test_changed_rejoin_while_completing_rebalance_starts_a_new_rebalance(ctx: GroupContext) -> None:
    a_call = ctx.join_new("g", client_id="a")
    b_call = ctx.join_new("g", client_id="b")
    ctx.advance_until_done(a_call, b_call)
    a, b = a_call.response, b_call.response
    follower_sync = ctx.sync("g", 1, b.member_id)
    assert not follower_sync.done
    changed = ctx.join("g", b.member_id, protos=protocols("range", topics=["t", "other"]))
    assert ctx.state("g") is S.PREPARING_REBALANCE
    assert follower_sync.error == ErrorCode.REBALANCE_IN_PROGRESS  # parked SyncGroup told to rejoin
    ra = ctx.join("g", a.member_id)
    assert ra.response.generation_id == changed.response.generation_id == 2


def test_stable_follower_rejoin_with_same_metadata_needs_no_rebalance(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    r = ctx.join("g", b.member_id).response
    assert (r.error_code, r.generation_id, r.leader, r.members) == (0, 1, a.member_id, [])
    assert ctx.state("g") is S.STABLE


def test_stable_leader_rejoin_forces_a_rebalance(ctx: GroupContext) -> None:
    a, _b = ctx.form_group("g", 2)
    ra = ctx.join("g", a.member_id)
    assert not ra.done and ctx.state("g") is S.PREPARING_REBALANCE


def test_group_max_size() -> None:
    ctx = GroupContext(CoordinatorConfig(group_max_size=2, offsets_topic_num_partitions=4))
    ctx.form_group("g", 2)
    third = ctx.join("g")  # Stable and full
    assert third.error == ErrorCode.GROUP_MAX_SIZE_REACHED and third.response.member_id == ""
    assert ctx.state("g") is S.STABLE
    # In PreparingRebalance the number of members awaiting a join counts.
    fresh = GroupContext(CoordinatorConfig(group_max_size=2, offsets_topic_num_partitions=4))
    calls = [fresh.join_new("h", client_id=f"c{i}") for i in range(3)]
    assert [c.done and c.error for c in calls] == [False, False, ErrorCode.GROUP_MAX_SIZE_REACHED]
    fresh.advance_until_done(calls[0], calls[1])
    assert calls[0].response.generation_id == 1 and len(calls[0].response.members) == 2


@pytest.mark.parametrize("session_ms", [5_999, 1_800_001])
def test_session_timeout_outside_broker_bounds(ctx: GroupContext, session_ms: int) -> None:
    call = ctx.join("g", session_ms=session_ms)
    assert call.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert ctx.coordinator.group("g") is None


def test_empty_group_id_is_invalid(ctx: GroupContext) -> None:
    assert ctx.join("").error == ErrorCode.INVALID_GROUP_ID


def test_unknown_member_of_unknown_group(ctx: GroupContext) -> None:
    call = ctx.join("nope", "someone-1")
    assert call.error == ErrorCode.UNKNOWN_MEMBER_ID and call.response.member_id == "someone-1"


def test_protocol_name_nullability_follows_version(ctx: GroupContext) -> None:
    assert ctx.join("", version=6).response.protocol_name == ""
    assert ctx.join("", version=7).response.protocol_name is None


def test_new_member_join_timeout_drops_a_parked_newcomer() -> None:
    ctx = GroupContext(CoordinatorConfig(group_new_member_join_timeout_ms=1_000, offsets_topic_num_partitions=4))
    (a,) = ctx.form_group("g", 1, session_ms=60_000, rebalance_ms=600_000)
    newcomer = ctx.join_new("g", session_ms=60_000, rebalance_ms=600_000)
    assert ctx.state("g") is S.PREPARING_REBALANCE and not newcomer.done
    ctx.advance(1_000)  # a never rejoins; the newcomer's join times out first
    assert newcomer.error == ErrorCode.UNKNOWN_MEMBER_ID
    group = ctx.coordinator.group("g")
    assert group is not None and list(group.members) == [a.member_id]


def test_a_second_join_from_the_same_member_answers_the_first(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    first = ctx.join("g", a.member_id)
    second = ctx.join("g", a.member_id)
    assert first.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert not second.done
    ctx.join("g", b.member_id)
    assert second.response.generation_id == 2


def test_last_member_leaving_empties_the_group_and_persists_it(ctx: GroupContext) -> None:
    (a,) = ctx.form_group("g", 1)
    assert ctx.leave("g", (a.member_id, None)).response.members[0].error_code == 0
    assert ctx.state("g") is S.EMPTY
    group = ctx.coordinator.group("g")
    assert group is not None and group.generation_id == 2 and group.protocol_name is None
    key, value = ctx.log[-1].key, ctx.log[-1].value
    assert gr.decode_key(key) == gr.GroupMetadataKey(group="g")
    assert value is not None
    v = gr.decode_group_metadata_value(value)
    assert (v.generation, v.protocol, v.leader, v.members, v.protocol_type) == (2, None, None, [], "consumer")
