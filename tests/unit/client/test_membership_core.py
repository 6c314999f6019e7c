"""MemberCore without sockets: the member's decisions, driven by hand-made responses and a manual clock."""

from __future__ import annotations

import pytest

from slipstream.client.assignors import get_assignor
from slipstream.client.classic_member_core import MemberCore
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.group_errors import classify_group_error
from slipstream.client.membership_types import Action, MemberState
from slipstream.client.retry import Backoff
from slipstream.protocol.apis.heartbeat import HeartbeatResponse
from slipstream.protocol.apis.join_group import JoinGroupResponse, JoinGroupResponseMember
from slipstream.protocol.apis.sync_group import SyncGroupResponse
from slipstream.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ConsumerProtocolTopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from slipstream.protocol.errors import ErrorCode

E = ErrorCode


def core(*assignors: str, instance: str | None = None, topics: tuple[str, ...] = ("t",)) -> MemberCore:
    cfg = ConsumerConfig(
        group_id="g",
        group_instance_id=instance,
        partition_assignment_strategy=list(assignors or ("range", "cooperative-sticky")),
        heartbeat_interval_ms=1000,
        session_timeout_ms=10000,
        retry_backoff_ms=100,
    )
    c = MemberCore(cfg)
    c.subscribe(topics)
    return c


def assignment_bytes(*tps: tuple[str, int], version: int = 3) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return encode_assignment(
        ConsumerProtocolAssignment(
            assigned_partitions=[ConsumerProtocolTopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()]
        ),
        version,
    )


def join_ok(c: MemberCore, member: str = "m1", generation: int = 1, leader: str = "m1",
            protocol: str = "range", members: list[JoinGroupResponseMember] | None = None) -> None:
    c.join_request()
    out = c.on_join_response(JoinGroupResponse(
        error_code=0, generation_id=generation, protocol_type="consumer", protocol_name=protocol,
        leader=leader, member_id=member, members=members or [],
    ))
    assert out.action is Action.OK


def stable(c: MemberCore, *tps: tuple[str, int], generation: int = 1, protocol: str = "range",
           now: float = 0.0) -> None:
    join_ok(c, generation=generation, protocol=protocol, leader="other")
    out, assigned = c.on_sync_response(
        SyncGroupResponse(error_code=0, assignment=assignment_bytes(*tps)), c.generation_key
    )
    assert out.ok and assigned is not None
    c.complete_assignment(assigned, now)


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (E.NONE, Action.OK),
        (E.COORDINATOR_NOT_AVAILABLE, Action.REDISCOVER),
        (E.NOT_COORDINATOR, Action.REDISCOVER),
        (E.COORDINATOR_LOAD_IN_PROGRESS, Action.BACKOFF),
        (E.UNKNOWN_MEMBER_ID, Action.REJOIN),
        (E.ILLEGAL_GENERATION, Action.REJOIN),
        (E.MEMBER_ID_REQUIRED, Action.REJOIN),
        (E.REBALANCE_IN_PROGRESS, Action.REJOIN),
        (E.FENCED_INSTANCE_ID, Action.FATAL),
        (E.INCONSISTENT_GROUP_PROTOCOL, Action.FATAL),
        (E.INVALID_SESSION_TIMEOUT, Action.FATAL),
        (E.GROUP_MAX_SIZE_REACHED, Action.FATAL),
        (30, Action.FATAL),  # GROUP_AUTHORIZATION_FAILED
        (E.REQUEST_TIMED_OUT, Action.BACKOFF),
        (E.UNKNOWN_SERVER_ERROR, Action.FATAL),
    ],
)
def test_join_and_sync_error_table(code: int, action: Action) -> None:
    assert classify_group_error(code) is action


def test_member_id_required_keeps_the_given_id_and_rejoins() -> None:
    c = core()
    req = c.join_request()
    assert req.member_id == "" and [p.name for p in req.protocols] == ["range", "cooperative-sticky"]
    out = c.on_join_response(JoinGroupResponse(error_code=E.MEMBER_ID_REQUIRED, member_id="given-1"))
    assert out.action is Action.REJOIN
    assert c.member_id == "given-1" and c.rejoin_needed
    assert c.join_request().member_id == "given-1"


def test_unknown_member_id_resets_member_id_but_illegal_generation_keeps_it() -> None:
    c = core()
    stable(c, ("t", 0))
    c.join_request()
    out = c.on_join_response(JoinGroupResponse(error_code=E.ILLEGAL_GENERATION, member_id="m1"), "m1")
    assert out.action is Action.REJOIN
    assert c.member_id == "m1" and c.generation_id == -1 and c.state is MemberState.UNJOINED
    c.join_request()
    out = c.on_join_response(JoinGroupResponse(error_code=E.UNKNOWN_MEMBER_ID, member_id="m1"), "m1")
    assert out.action is Action.REJOIN
    assert c.member_id == "" and c.generation_id == -1
    # the generation is gone, so what it owned is lost, not revoked
    result = c.prepare_join()
    assert result.kind == "lost" and result.partitions == (("t", 0),)


def test_eager_revokes_everything_before_join_and_assigns_all_after() -> None:
    c = core("range")
    assert c.protocol == "EAGER"
    stable(c, ("t", 0), ("t", 1))
    assert c.prepare_join().partitions == (("t", 0), ("t", 1))
    assert c.owned == set()
    join_ok(c, generation=2, leader="other")
    out, assigned = c.on_sync_response(
        SyncGroupResponse(error_code=0, assignment=assignment_bytes(("t", 1))), c.generation_key
    )
    assert out.ok and assigned == [("t", 1)]
    change = c.complete_assignment(assigned)
    assert change.added == (("t", 1),) and change.revoked == () and not change.rejoin
    assert not c.rejoin_needed


def test_cooperative_keeps_partitions_and_revokes_only_moved_ones_then_rejoins() -> None:
    c = core("cooperative-sticky")
    assert c.protocol == "COOPERATIVE"
    stable(c, ("t", 0), ("t", 1), ("t", 2), protocol="cooperative-sticky")
    assert c.prepare_join().kind == ""  # nothing revoked before joining
    req = c.join_request()
    _v, sub = decode_subscription(req.protocols[0].metadata)
    assert [(g.topic, g.partitions) for g in sub.owned_partitions] == [("t", [0, 1, 2])]
    assert sub.generation_id == 1
    c.on_join_response(JoinGroupResponse(error_code=0, generation_id=2, protocol_type="consumer",
                                         protocol_name="cooperative-sticky", leader="x", member_id="m1"))
    _out, assigned = c.on_sync_response(
        SyncGroupResponse(error_code=0, assignment=assignment_bytes(("t", 0), ("t", 2))), c.generation_key
    )
    assert assigned is not None
    change = c.complete_assignment(assigned)
    assert change.revoked == (("t", 1),) and change.added == () and change.rejoin
    assert c.rejoin_needed


def test_cooperative_revokes_unsubscribed_topics_before_join() -> None:
    c = core("cooperative-sticky", topics=("a", "b"))
    stable(c, ("a", 0), ("b", 0), protocol="cooperative-sticky")
    c.subscribe(["a"])
    result = c.prepare_join()
    assert result.kind == "revoked" and result.partitions == (("b", 0),)
    assert c.owned == {("a", 0)}


def test_leader_runs_the_selected_assignor_and_encodes_each_members_version() -> None:
    c = core("range", "cooperative-sticky")
    sub_v0 = encode_subscription(ConsumerProtocolSubscription(topics=["t"]), 0)
    sub_v3 = encode_subscription(ConsumerProtocolSubscription(topics=["t"], generation_id=-1), 3)
    members = [
        JoinGroupResponseMember(member_id="m1", metadata=sub_v3),
        JoinGroupResponseMember(member_id="m2", metadata=sub_v0),
    ]
    join_ok(c, members=members, protocol="range")
    subs = c.leader.subscriptions()
    assignment = c.assign({"t": 4}, subs)
    assert assignment == {"m1": [("t", 0), ("t", 1)], "m2": [("t", 2), ("t", 3)]}
    request = c.sync_request(assignment)
    versions = {a.member_id: decode_assignment(a.assignment)[0] for a in request.assignments}
    assert versions == {"m1": 3, "m2": 0}
    assert c.leader.partition_counts == {"t": 4}
    assert c.leader.changed_topics({"t": 4}) == []
    assert c.leader.changed_topics({"t": 6}) == ["t"]


def test_static_member_sends_its_instance_id() -> None:
    c = core(instance="host-1")
    assert c.join_request().group_instance_id == "host-1"
    stable(c, ("t", 0))
    req, _ = c.heartbeat_request(0.0)
    assert req.group_instance_id == "host-1"
    assert c.leave_request("bye").members[0].group_instance_id == "host-1"


def test_sync_answer_after_a_reset_is_void() -> None:
    c = core()
    join_ok(c, leader="x")
    sent = c.generation_key
    c.reset("heartbeat said UNKNOWN_MEMBER_ID", reset_member_id=True)
    out, assigned = c.on_sync_response(SyncGroupResponse(error_code=0, assignment=assignment_bytes(("t", 0))), sent)
    assert out.action is Action.REJOIN and assigned is None


def test_heartbeat_schedule_and_answers() -> None:
    c = core()
    assert c.time_to_next_heartbeat(0.0) is None  # not joined
    stable(c, ("t", 0), now=100.0)
    assert c.time_to_next_heartbeat(100.0) == pytest.approx(1.0)
    assert c.time_to_next_heartbeat(101.5) == 0.0
    req, sent = c.heartbeat_request(101.5)
    assert req.generation_id == 1 and req.member_id == "m1"
    assert c.time_to_next_heartbeat(101.6) is None  # one in flight
    assert c.on_heartbeat_response(HeartbeatResponse(error_code=0), sent, 101.6).ok
    # rebalance announced: rejoin
    _req, sent = c.heartbeat_request(103.0)
    out = c.on_heartbeat_response(HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS), sent, 103.0)
    assert out.action is Action.REJOIN and c.rejoin_needed
    # an answer for an older generation is ignored
    c.rejoin_needed = False
    out = c.on_heartbeat_response(HeartbeatResponse(error_code=E.UNKNOWN_MEMBER_ID), (0, "m1"), 103.1)
    assert out.action is Action.IGNORE and c.member_id == "m1"
    # a current one resets
    _req, sent = c.heartbeat_request(104.0)
    out = c.on_heartbeat_response(HeartbeatResponse(error_code=E.ILLEGAL_GENERATION), sent, 104.0)
    assert out.action is Action.REJOIN and c.member_id == "m1" and c.generation_id == -1


def test_heartbeat_fenced_is_fatal_and_coordinator_errors_rediscover() -> None:
    c = core(instance="i")
    stable(c, ("t", 0), now=0.0)
    _req, sent = c.heartbeat_request(1.0)
    out = c.on_heartbeat_response(HeartbeatResponse(error_code=E.NOT_COORDINATOR), sent, 1.0)
    assert out.action is Action.REDISCOVER
    assert c.time_to_next_heartbeat(1.0) == pytest.approx(0.1)  # retry after the backoff
    _req, sent = c.heartbeat_request(1.2)
    out = c.on_heartbeat_response(HeartbeatResponse(error_code=E.FENCED_INSTANCE_ID), sent, 1.2)
    assert out.action is Action.FATAL


def test_session_expiry_is_measured_from_the_last_answer() -> None:
    c = core()
    stable(c, ("t", 0), now=0.0)
    assert not c.session_expired(9.0)
    c.heartbeat_request(9.0)
    c.heartbeat_failed(9.5)
    assert c.session_expired(10.5)


def test_prepare_leave_revokes_when_stable_and_loses_otherwise() -> None:
    c = core()
    stable(c, ("t", 0))
    assert c.prepare_leave().kind == "revoked"
    c = core()
    stable(c, ("t", 0))
    c.reset("expired", reset_member_id=True)
    assert c.prepare_leave().kind == "lost"


def test_sticky_user_data_keeps_the_last_assignment_after_an_eager_revoke() -> None:
    c = core("sticky")
    stable(c, ("t", 0), ("t", 1), protocol="sticky")
    c.prepare_join()
    req = c.join_request()
    _v, sub = decode_subscription(req.protocols[0].metadata)
    assert sub.owned_partitions == []  # eager: revoked before joining
    assert sub.user_data == get_assignor("sticky").subscription_user_data(["t"], [("t", 0), ("t", 1)], 1)


def test_backoff_grows_and_is_capped() -> None:
    assert Backoff(100, 1000, rand=lambda: 0.5).delay_s(0) == pytest.approx(0.1)
    assert Backoff(100, 1000, rand=lambda: 0.5).delay_s(3) == pytest.approx(0.8)
    assert Backoff(100, 1000, rand=lambda: 1.0).delay_s(10) == pytest.approx(1.2)
    assert Backoff(0, 1000).delay_s(5) == 0.0


def test_a_long_join_does_not_count_against_the_session() -> None:
    c = core()
    stable(c, ("t", 0), now=0.0)
    c.request_rejoin("test")
    c.join_request()
    # The JoinGroup blocked for 30 s (longer than the 10 s session): its answer restarts the clock.
    c.on_join_response(JoinGroupResponse(error_code=0, generation_id=2, protocol_type="consumer",
                                         protocol_name="range", leader="x", member_id="m1"), "m1", 30.0)
    assert not c.session_expired(31.0)
    assert c.time_to_next_heartbeat(30.0) == pytest.approx(1.0)


def test_a_subscription_change_during_the_join_rejoins_after_the_assignment() -> None:
    # Found by the group simulator (classic seed 32): the join carried the old subscription.
    c = core("range")
    join_ok(c, leader="other")
    c.subscribe(["t", "u"])  # while JoinGroup/SyncGroup are in flight
    out, assigned = c.on_sync_response(
        SyncGroupResponse(error_code=0, assignment=assignment_bytes(("t", 0))), c.generation_key
    )
    assert out.ok and assigned == [("t", 0)]
    assert c.rejoin_needed
    request = c.join_request()
    _, sub = decode_subscription(request.protocols[0].metadata)
    assert sub.topics == ["t", "u"]
    # Without a change in between, the assignment settles the member.
    join_ok(c, generation=2, leader="other")
    out, _ = c.on_sync_response(
        SyncGroupResponse(error_code=0, assignment=assignment_bytes(("t", 0), ("u", 0))), c.generation_key
    )
    assert out.ok and not c.rejoin_needed


# ---------------------------------------------------------------- decisions the adapters share
# (GroupMembership and the simulator's classic member call these; nothing is decided twice)


def _members(*ids: str, topics: tuple[str, ...] = ("t",)) -> list[JoinGroupResponseMember]:
    sub = encode_subscription(ConsumerProtocolSubscription(topics=list(topics), generation_id=-1), 3)
    return [JoinGroupResponseMember(member_id=m, metadata=sub) for m in ids]


def test_leader_assignment_assigns_for_a_leader_and_nothing_for_a_follower() -> None:
    follower = core()
    join_ok(follower, member="m2", leader="m1")
    assert follower.leader_topics() == []
    assert follower.leader_assignment({"t": 4}) is None

    leader = core()
    join_ok(leader, members=_members("m1", "m2", topics=("t", "u")))
    assert leader.leader_topics() == ["t", "u"]
    assignment = leader.leader_assignment({"t": 2, "u": 2})
    assert assignment == {"m1": [("t", 0), ("u", 0)], "m2": [("t", 1), ("u", 1)]}
    assert leader.leader.partition_counts == {"t": 2, "u": 2}


def test_a_static_leader_skipping_the_assignment_keeps_the_counts_as_its_watch_baseline() -> None:
    c = core(instance="host-1")
    c.join_request()
    out = c.on_join_response(JoinGroupResponse(
        error_code=0, generation_id=3, protocol_type="consumer", protocol_name="range",
        leader="m1", member_id="m1", members=_members("m1", "m2"), skip_assignment=True,
    ))
    assert out.ok and c.is_leader and c.leader.skip_assignment
    assert c.leader_assignment({"t": 3}) is None
    assert c.leader.topics == ("t",)
    assert c.leader.partition_counts == {"t": 3}


def test_the_leaders_metadata_watch_is_armed_checked_once_and_rejoins_on_a_change() -> None:
    c = core()
    join_ok(c, members=_members("m1"))
    c.leader_assignment({"t": 2})
    out, assigned = c.on_sync_response(
        SyncGroupResponse(error_code=0, assignment=assignment_bytes(("t", 0), ("t", 1))), c.generation_key
    )
    assert out.ok and assigned is not None
    c.complete_assignment(assigned, 0.0)
    assert c.needs_join_prepare
    max_age = c.leader.metadata_max_age_s
    assert c.time_to_metadata_check(10.0) == max_age  # armed on first ask
    assert c.time_to_metadata_check(11.0) == max_age - 1.0
    assert not c.metadata_check_due(11.0)
    assert c.metadata_check_due(10.0 + max_age)
    assert not c.metadata_check_due(10.0 + max_age)  # once
    assert c.on_metadata({"t": 2}) == [] and not c.rejoin_needed
    assert c.on_metadata({"t": 3}) == ["t"] and c.rejoin_needed
    assert c.time_to_metadata_check(20.0) is None  # a rejoin is due: nothing to watch
    follower = core()
    stable(follower, ("t", 0))
    assert follower.time_to_metadata_check(0.0) is None


def test_a_failed_join_and_a_fatal_error_leave_the_member_unjoined() -> None:
    c = core()
    c.join_request()
    assert c.state is MemberState.PREPARING_REBALANCE
    c.join_failed("connection lost")
    assert c.state is MemberState.UNJOINED and c.rejoin_needed
    stable(c, ("t", 0), ("t", 1))
    assert c.fail() == (("t", 0), ("t", 1))
    assert c.owned == set() and c.state is MemberState.UNJOINED


def test_only_dynamic_members_with_an_id_send_leave_group() -> None:
    assert not core().sends_leave_group  # no member id yet
    dynamic = core()
    stable(dynamic, ("t", 0))
    assert dynamic.sends_leave_group
    static = core(instance="host-1")
    stable(static, ("t", 0))
    assert not static.sends_leave_group
    static.left()
    assert static.state is MemberState.UNJOINED
