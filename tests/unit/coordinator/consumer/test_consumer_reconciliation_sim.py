"""Random join/leave/resubscribe/heartbeat sequences through target assignment and
reconciliation: a partition never has two owners, and the group converges."""

from __future__ import annotations

from dataclasses import dataclass, field

from consumer_helpers import topics
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.coordinator.consumer import (
    ASSIGNORS,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    FencedMemberEpochError,
    MemberState,
    PartitionMap,
    TargetAssignmentBuilder,
    reconcile,
    validate_member_epoch,
)
from slipstream.coordinator.consumer.partitions import overlaps

TOPICS = topics(a=4, b=3, c=5)
TOPICS_BY_NAME = {t.name: t.topic_id for t in TOPICS.values()}
NAMES = ["a", "b", "c"]
MEMBERS = ["m0", "m1", "m2", "m3", "m4"]


@dataclass
class Client:
    """What a consumer does: it consumes ``applied`` and learns ``latest`` (and its epoch)
    from responses."""

    epoch: int = 0
    applied: PartitionMap = field(default_factory=dict)
    latest: PartitionMap = field(default_factory=dict)


class MiniCoordinator:
    """The heartbeat path reduced to the model: every change goes through ``ConsumerGroup``'s
    replay methods, as records would."""

    def __init__(self, assignor_name: str) -> None:
        self.group = ConsumerGroup("g")
        self.assignor = ASSIGNORS[assignor_name]
        self.clients: dict[str, Client] = {}
        self.fenced = 0
        self.states_seen: set[MemberState] = set()

    def _new_target(self, change: ConsumerGroupMember | str) -> None:
        epoch = self.group.group_epoch + 1
        builder = TargetAssignmentBuilder.for_group(self.group, epoch, self.assignor, TOPICS)
        if isinstance(change, str):
            builder.remove_member(change)
        else:
            builder.add_or_update_member(change)
        result = builder.build()
        self.group.set_group_epoch(epoch)
        for member_id, parts in result.changed.items():
            self.group.update_target_assignment(member_id, parts)
        for member_id in result.removed:
            self.group.remove_target_assignment(member_id)
        self.group.set_target_assignment_epoch(epoch)

    def join(self, member_id: str, names: frozenset[str]) -> None:
        member = ConsumerGroupMember(member_id, subscribed_topic_names=names)
        self._new_target(member)
        self.group.update_member(member)
        self.clients[member_id] = Client()
        self.heartbeat(member_id, apply=True, report=True)

    def resubscribe(self, member_id: str, names: frozenset[str]) -> None:
        member = self.group.members[member_id].with_subscription(topic_names=names)
        self._new_target(member)
        self.group.update_member(member)

    def leave(self, member_id: str) -> None:
        # The consumer stops consuming before it sends its leave heartbeat.
        del self.clients[member_id]
        self.group.remove_member(member_id)
        self._new_target(member_id)

    def heartbeat(self, member_id: str, apply: bool, report: bool, lose_response: bool = False) -> None:
        client = self.clients[member_id]
        if apply:
            client.applied = client.latest
        owned = client.applied if report else None
        member = self.group.members[member_id]
        if client.epoch > 0:
            try:
                validate_member_epoch(member, client.epoch, owned)
            except FencedMemberEpochError:
                self.fenced += 1
                # The consumer drops everything and rejoins; the coordinator forgets it.
                names = member.subscribed_topic_names
                self.leave(member_id)
                self.join(member_id, names)
                return
        new = reconcile(
            member,
            self.group.target_assignment_epoch,
            self.group.target_assignment_of(member_id),
            self.group.current_partition_epoch,
            owned,
        )
        if new != member:
            self.group.update_member(new)  # raises if a partition would get two owners
        self.states_seen.add(new.state)
        if not lose_response:
            client.latest = new.assigned_partitions
            client.epoch = new.member_epoch

    def check_invariants(self) -> None:
        members = list(self.group.members.values())
        for i, m in enumerate(members):
            assert not overlaps(m.assigned_partitions, m.partitions_pending_revocation)
            for other in members[i + 1 :]:
                assert not overlaps(m.owned_partitions(), other.owned_partitions())
        clients = list(self.clients.values())
        for i, c in enumerate(clients):
            for other in clients[i + 1 :]:
                assert not overlaps(c.applied, other.applied), "two consumers own a partition"


subscriptions = st.sets(st.sampled_from(NAMES), min_size=1).map(frozenset)
heartbeats = st.tuples(
    st.just("heartbeat"),
    st.sampled_from(MEMBERS),
    st.booleans(),  # apply the latest assignment first
    st.booleans(),  # report owned partitions
    st.sampled_from([False, False, False, True]),  # the response is lost
)
actions = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from(MEMBERS), subscriptions),
        st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("resubscribe"), st.sampled_from(MEMBERS), subscriptions),
        heartbeats,
        heartbeats,
        heartbeats,
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(assignor_name=st.sampled_from(["uniform", "range"]), steps=actions)
def test_no_partition_ever_has_two_owners_and_the_group_converges(
    assignor_name: str, steps: list[tuple]
) -> None:
    coordinator = MiniCoordinator(assignor_name)
    for step in steps:
        kind, member_id = step[0], step[1]
        present = member_id in coordinator.clients
        if kind == "join" and not present:
            coordinator.join(member_id, step[2])
        elif kind == "leave" and present:
            coordinator.leave(member_id)
        elif kind == "resubscribe" and present:
            coordinator.resubscribe(member_id, step[2])
        elif kind == "heartbeat" and present:
            coordinator.heartbeat(member_id, apply=step[2], report=step[3], lose_response=step[4])
        coordinator.check_invariants()

    # Well-behaved heartbeats from everyone settle the group on its target.
    for _ in range(4):
        for member_id in list(coordinator.clients):
            coordinator.heartbeat(member_id, apply=True, report=True)
            coordinator.check_invariants()
    group = coordinator.group
    assert group.state in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY)
    for member_id, member in group.members.items():
        assert member.state is MemberState.STABLE
        assert member.member_epoch == group.target_assignment_epoch
        assert member.assigned_partitions == group.target_assignment_of(member_id)


def test_a_moved_partition_waits_for_its_previous_owner() -> None:
    coordinator = MiniCoordinator("uniform")
    group = coordinator.group
    coordinator.join("m0", frozenset({"a"}))
    coordinator.heartbeat("m0", apply=True, report=True)  # m0 consumes a-0..3
    coordinator.join("m1", frozenset({"a"}))
    m1 = group.members["m1"]
    assert m1.state is MemberState.UNRELEASED_PARTITIONS
    assert group.waiting_on_unreleased_partition(m1, {t: n for n, t in TOPICS_BY_NAME.items()}.get)
    assert group.target_assignment_of("m1") == {TOPICS_BY_NAME["a"]: frozenset({2, 3})}

    coordinator.heartbeat("m0", apply=True, report=True)  # told to revoke a-2, a-3
    m0 = group.members["m0"]
    assert (m0.state, m0.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    coordinator.heartbeat("m1", apply=True, report=True)
    assert group.members["m1"].assigned_partitions == {}  # still owned by m0

    coordinator.heartbeat("m0", apply=True, report=True)  # revoked: reports a-0, a-1
    assert group.members["m0"].state is MemberState.STABLE
    assert group.members["m0"].member_epoch == 2
    coordinator.heartbeat("m1", apply=True, report=True)
    assert group.members["m1"].state is MemberState.STABLE
    assert group.members["m1"].assigned_partitions == {TOPICS_BY_NAME["a"]: frozenset({2, 3})}
    assert group.state is ConsumerGroupState.STABLE


def test_lost_response_is_tolerated_or_fences_as_kafka_does() -> None:
    coordinator = MiniCoordinator("uniform")
    group = coordinator.group
    coordinator.join("m0", frozenset({"a"}))
    coordinator.heartbeat("m0", apply=True, report=True)
    coordinator.join("m1", frozenset({"a"}))
    coordinator.heartbeat("m0", apply=True, report=True)  # revoke a-2, a-3
    # Revocation acknowledged, m0 moves to epoch 2, but the response is lost.
    coordinator.heartbeat("m0", apply=True, report=True, lose_response=True)
    m0_client = coordinator.clients["m0"]
    assert (group.members["m0"].member_epoch, m0_client.epoch) == (2, 1)
    # Previous epoch with owned partitions inside its assignment: accepted.
    coordinator.heartbeat("m0", apply=False, report=True)
    assert (coordinator.fenced, m0_client.epoch) == (0, 2)

    coordinator.join("m2", frozenset({"a"}))
    coordinator.heartbeat("m0", apply=True, report=True, lose_response=True)
    assert (group.members["m0"].member_epoch, m0_client.epoch) == (3, 2)
    # Previous epoch without the owned partitions: fenced; the consumer rejoins.
    coordinator.heartbeat("m0", apply=False, report=False)
    assert coordinator.fenced == 1
    assert coordinator.clients["m0"] is not m0_client
    assert group.members["m0"].previous_member_epoch == 0
