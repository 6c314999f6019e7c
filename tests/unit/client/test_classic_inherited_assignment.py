"""A static classic leader back in a Stable group skips the assignment (JoinGroup v9,
KIP-814) and checks the one it inherited: DescribeGroups, then the partition counts;
anything subscribed left unowned rejoins. Hand-made responses, a manual clock."""

from __future__ import annotations

from slipstream.client.classic_leader import (
    DescribedAssignment,
    assignment_gaps,
    read_described_group,
)
from slipstream.client.classic_member_core import MemberCore
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.membership_types import MemberState
from slipstream.protocol.apis.describe_groups import (
    DescribeGroupsResponse,
    DescribeGroupsResponseDescribedGroup,
    DescribeGroupsResponseDescribedGroupMember,
)
from slipstream.protocol.apis.heartbeat import HeartbeatResponse
from slipstream.protocol.apis.join_group import JoinGroupResponse, JoinGroupResponseMember
from slipstream.protocol.apis.sync_group import SyncGroupResponse
from slipstream.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ConsumerProtocolTopicPartition,
    encode_assignment,
    encode_subscription,
)
from slipstream.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


def subscription(*topics: str) -> bytes:
    return encode_subscription(ConsumerProtocolSubscription(topics=list(topics)), 3)


def assignment(*tps: TopicPartition) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    groups = [ConsumerProtocolTopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()]
    return encode_assignment(ConsumerProtocolAssignment(assigned_partitions=groups), 3)


def described(
    owned: dict[str, tuple[TopicPartition, ...]],
    topics: tuple[str, ...] = ("t",),
    state: str = "Stable",
    error: int = ErrorCode.NONE,
) -> DescribeGroupsResponse:
    members = [
        DescribeGroupsResponseDescribedGroupMember(
            member_id=m, client_id=m, client_host="/h", member_metadata=subscription(*topics),
            member_assignment=assignment(*tps),
        )
        for m, tps in owned.items()
    ]
    group = DescribeGroupsResponseDescribedGroup(
        error_code=error, group_id="g", group_state=state, protocol_type="consumer",
        protocol_data="range", members=members,
    )
    return DescribeGroupsResponse(groups=[group])


def static_leader(topics: tuple[str, ...] = ("t",), *, skip: bool = True, counts: dict[str, int] | None = None) -> MemberCore:
    """A static member that rejoined as leader, synced (skipping the assignment or not) and owns t-0."""
    c = MemberCore(ConsumerConfig(
        group_id="g", group_instance_id="host-1", partition_assignment_strategy=["range"],
        heartbeat_interval_ms=1000, session_timeout_ms=10000, metadata_max_age_ms=30000,
    ))
    c.subscribe(topics)
    c.join_request()
    members = [JoinGroupResponseMember(member_id=m, metadata=subscription(*topics)) for m in ("m1", "m2")]
    out = c.on_join_response(JoinGroupResponse(
        error_code=0, generation_id=3, protocol_type="consumer", protocol_name="range",
        leader="m1", member_id="m1", members=members, skip_assignment=skip,
    ), now=0.0)
    assert out.ok
    c.leader_assignment(counts or {t: 2 for t in topics})
    out, assigned = c.on_sync_response(SyncGroupResponse(error_code=0, assignment=assignment(("t", 0))), c.generation_key)
    assert out.ok and assigned is not None
    c.complete_assignment(assigned, 0.0)
    return c


# ---------------------------------------------------------------- the pure decisions


def test_gaps_are_the_topics_whose_partitions_the_assignment_does_not_cover_exactly() -> None:
    covered = DescribedAssignment({"m1": ("t",), "m2": ("t",)}, {"m1": [("t", 0)], "m2": [("t", 1)]})
    assert assignment_gaps(covered, {"t": 2}) == []
    assert assignment_gaps(covered, {"t": 3}) == ["t"]  # a partition added
    assert assignment_gaps(covered, {}) == ["t"]  # the topic is gone: its partitions too
    new_topic = DescribedAssignment({"m1": ("t", "u"), "m2": ("t",)}, covered.assignment)
    assert assignment_gaps(new_topic, {"t": 2}) == []  # "u" does not exist (yet)
    assert assignment_gaps(new_topic, {"t": 2, "u": 1}) == ["u"]
    twice = DescribedAssignment(covered.subscriptions, {"m1": [("t", 0), ("t", 1)], "m2": [("t", 1)]})
    assert assignment_gaps(twice, {"t": 2}) == ["t"]
    unsubscribed = DescribedAssignment(covered.subscriptions, {"m1": [("t", 0), ("x", 0)], "m2": [("t", 1)]})
    assert assignment_gaps(unsubscribed, {"t": 2, "x": 1}) == ["x"]


def test_a_described_group_is_read_only_when_stable_and_listing_the_member() -> None:
    ok = read_described_group(described({"m1": (("t", 0),), "m2": (("t", 1),)}), "g", "consumer", "m1")
    assert ok == DescribedAssignment({"m1": ("t",), "m2": ("t",)}, {"m1": [("t", 0)], "m2": [("t", 1)]})
    assert isinstance(ok, DescribedAssignment) and ok.topics == ["t"]
    owned = {"m1": (("t", 0),)}
    assert read_described_group(described(owned, state="PreparingRebalance"), "g", "consumer", "m1") == (
        "the group is PreparingRebalance"
    )
    assert isinstance(read_described_group(described(owned), "g", "consumer", "m9"), str)
    assert isinstance(read_described_group(described(owned), "other", "consumer", "m1"), str)
    not_coordinator = described(owned, error=ErrorCode.NOT_COORDINATOR)
    assert read_described_group(not_coordinator, "g", "consumer", "m1") == "DescribeGroups: NOT_COORDINATOR"
    unreadable = described(owned)
    unreadable.groups[0].members[0].member_assignment = b"\x00"
    assert isinstance(read_described_group(unreadable, "g", "consumer", "m1"), str)


# ---------------------------------------------------------------- the member core


def test_only_a_leader_that_skipped_the_assignment_checks_it() -> None:
    assert not static_leader(skip=False).assignment_check_due
    c = static_leader()
    assert c.assignment_check_due and c.state is MemberState.STABLE and not c.rejoin_needed
    request, _sent = c.describe_request()
    assert request.groups == ["g"]
    assert not c.assignment_check_due  # once


def test_an_inherited_assignment_that_covers_everything_becomes_the_watch_baseline() -> None:
    c = static_leader()
    _request, sent = c.describe_request()
    group = c.on_describe_response(described({"m1": (("t", 0), ("t", 1)), "m2": (("t", 2),)}), sent)
    assert group is not None and group.topics == ["t"]
    # The JoinGroup-time counts (2) were stale; the group's assignment already covers 3.
    assert c.check_assignment(group, {"t": 3}, sent) == []
    assert not c.rejoin_needed
    assert c.leader.partition_counts == {"t": 3}
    # The metadata watch goes on from there (manual clock).
    max_age = c.leader.metadata_max_age_s
    assert c.time_to_metadata_check(1.0) == max_age
    assert c.metadata_check_due(1.0 + max_age)
    assert c.on_metadata({"t": 3}) == [] and not c.rejoin_needed
    assert c.on_metadata({"t": 4}) == ["t"] and c.rejoin_needed


def test_partitions_added_while_the_leader_was_away_rejoin() -> None:
    c = static_leader()
    _request, sent = c.describe_request()
    group = c.on_describe_response(described({"m1": (("t", 0),), "m2": (("t", 1),)}), sent)
    assert group is not None
    assert c.check_assignment(group, {"t": 4}, sent) == ["t"]
    assert c.rejoin_needed and "does not cover" in c.rejoin_reason
    assert c.time_to_metadata_check(1.0) is None  # the rebalance replaces the watch


def test_a_topic_subscribed_while_the_leader_was_away_rejoins() -> None:
    c = static_leader(("t", "u"))
    _request, sent = c.describe_request()
    group = c.on_describe_response(described({"m1": (("t", 0),), "m2": (("t", 1),)}, topics=("t", "u")), sent)
    assert group is not None and group.topics == ["t", "u"]
    assert c.check_assignment(group, {"t": 2, "u": 1}, sent) == ["u"]
    assert c.rejoin_needed


def test_an_unchecked_assignment_rebalances() -> None:
    c = static_leader()
    _request, sent = c.describe_request()
    assert c.on_describe_response(described({"m1": (("t", 0),)}, state="CompletingRebalance"), sent) is None
    assert c.rejoin_needed and "CompletingRebalance" in c.rejoin_reason

    lost = static_leader()
    _request, sent = lost.describe_request()
    lost.assignment_check_failed("connection closed", sent)
    assert lost.rejoin_needed and "connection closed" in lost.rejoin_reason


def test_a_check_for_a_generation_the_member_left_is_dropped() -> None:
    c = static_leader()
    _request, sent = c.describe_request()
    hb_sent = c.generation_key
    c.on_heartbeat_response(HeartbeatResponse(error_code=ErrorCode.ILLEGAL_GENERATION), hb_sent, 1.0)
    assert c.rejoin_needed and c.state is MemberState.UNJOINED
    reason = c.rejoin_reason
    assert c.on_describe_response(described({"m1": (("t", 0),)}), sent) is None
    group = DescribedAssignment({"m1": ("t",)}, {"m1": []})
    assert c.check_assignment(group, {"t": 2}, sent) == []
    c.assignment_check_failed("late", sent)
    assert c.rejoin_reason == reason  # the heartbeat's reset stands
    assert c.leader.partition_counts == {"t": 2}


def test_a_new_join_forgets_an_unchecked_assignment() -> None:
    c = static_leader()
    c.request_rejoin("subscription changed")
    assert not c.assignment_check_due
    c.join_request()
    assert not c.assignment_unchecked


# ---------------------------------------------------------------- a static follower


def static_follower(topics: tuple[str, ...] = ("t",), instance_id: str | None = "host-2") -> MemberCore:
    """A member that rejoined as a follower and synced, owning t-1."""
    c = MemberCore(ConsumerConfig(
        group_id="g", group_instance_id=instance_id, partition_assignment_strategy=["range"],
        heartbeat_interval_ms=1000, session_timeout_ms=10000, metadata_max_age_ms=30000,
    ))
    c.subscribe(topics)
    c.join_request()
    out = c.on_join_response(JoinGroupResponse(
        error_code=0, generation_id=3, protocol_type="consumer", protocol_name="range",
        leader="m1", member_id="m2", members=[],
    ), now=0.0)
    assert out.ok
    assert c.leader_assignment({t: 2 for t in topics}) is None
    out, assigned = c.on_sync_response(SyncGroupResponse(error_code=0, assignment=assignment(("t", 1))), c.generation_key)
    assert out.ok and assigned is not None
    c.complete_assignment(assigned, 0.0)
    return c


def test_a_static_follower_checks_its_first_assignment_once() -> None:
    assert not static_follower(instance_id=None).assignment_check_due  # dynamic: always a fresh one
    c = static_follower()
    assert c.assignment_check_due
    _request, sent = c.describe_request()
    group = c.on_describe_response(described({"m1": (("t", 0),), "m2": (("t", 1),)}), sent)
    assert group is not None and c.check_assignment(group, {"t": 2}, sent) == []
    assert not c.rejoin_needed and c.leader.partition_counts == {}  # a follower keeps no watch
    # Its next assignment (a later rebalance) is not checked again.
    c.request_rejoin("a later rebalance")
    c.join_request()
    c.on_join_response(JoinGroupResponse(
        error_code=0, generation_id=4, protocol_type="consumer", protocol_name="range",
        leader="m1", member_id="m2", members=[],
    ), now=1.0)
    out, _assigned = c.on_sync_response(SyncGroupResponse(error_code=0, assignment=assignment(("t", 1))), c.generation_key)
    assert out.ok and not c.assignment_check_due


def test_a_static_follower_back_with_a_new_topic_rejoins() -> None:
    """Kafka answers a static member rejoining a Stable group with its old assignment when
    only its subscription changed (the selected protocol did not): the new topic would stay
    unowned. The group's metadata already has the new subscription."""
    c = static_follower(("t", "u"))
    _request, sent = c.describe_request()
    group = c.on_describe_response(described({"m1": (("t", 0),), "m2": (("t", 1),)}, topics=("t", "u")), sent)
    assert group is not None
    assert c.check_assignment(group, {"t": 2, "u": 3}, sent) == ["u"]
    assert c.rejoin_needed and "does not cover" in c.rejoin_reason
