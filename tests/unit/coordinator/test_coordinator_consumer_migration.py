"""Online migration between the classic and the consumer (KIP-848) protocols, on the manual clock.

Kafka 4's behaviour (group.consumer.migration.policy=bidirectional by default): a classic
group of consumers upgrades when a ConsumerGroupHeartbeat member joins it; its members go on
with JoinGroup/SyncGroup/Heartbeat inside the consumer group (told REBALANCE_IN_PROGRESS when
they must rejoin); the group downgrades when its last consumer-protocol member leaves.
Every step is checked for single ownership of each partition, and replayed from the log.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from consumer_group_client import Member, describe, is_kafka_uuid_string, set_topics
from coord_context import SESSION_MS, GroupContext, assignment

from slipstream.coordinator import CoordinatorConfig, GroupCoordinator, GroupState, ManualTimer
from slipstream.coordinator.config import MigrationPolicy
from slipstream.coordinator.consumer import ConsumerGroupState, MemberState
from slipstream.protocol import consumer_protocol as cp
from slipstream.protocol.errors import ErrorCode


def reload(ctx: GroupContext) -> GroupCoordinator:
    fresh = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now), topics=lambda: ctx.topics)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    return fresh


def subscription(topics: list[str], owned: dict[str, set[int]] | None = None) -> bytes:
    owned_list = [cp.ConsumerProtocolTopicPartition(topic=t, partitions=sorted(ps)) for t, ps in (owned or {}).items()]
    return cp.encode_subscription(cp.ConsumerProtocolSubscription(topics=topics, owned_partitions=owned_list), 1)


@dataclass
class Classic:
    """A classic consumer as the Java client drives it: eager members give everything up
    before they rejoin; cooperative ones rejoin listing what they own and revoke what
    their new assignment no longer has."""

    ctx: GroupContext
    group: str
    member_id: str
    generation: int
    protocol: str = "range"
    cooperative: bool = False
    owned: set[int] = field(default_factory=set)

    def heartbeat(self) -> int:
        return self.ctx.heartbeat(self.group, self.generation, self.member_id).error

    def rejoin(self) -> Any:
        if not self.cooperative:
            self.owned = set()
        meta = subscription(["t"], {"t": self.owned} if self.owned else None)
        join = self.ctx.join(self.group, self.member_id, protos=[(self.protocol, meta)])
        response = join.response
        if response.error_code:
            return response
        assert response.leader == "" and response.members == []  # nobody assigns: the broker does
        self.generation = response.generation_id
        sync = self.ctx.sync(self.group, self.generation, self.member_id, protocol_name=self.protocol)
        if sync.error:
            return sync.response
        _v, assigned = cp.decode_assignment(sync.response.assignment)
        self.owned = {p for tp in assigned.assigned_partitions for p in tp.partitions}
        return sync.response

    def step(self) -> None:
        """Heartbeat; rejoin when told to (REBALANCE_IN_PROGRESS)."""
        if self.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin()


def c_topic(ctx: GroupContext) -> Any:
    return ctx.topics.by_name["t"].topic_id


def partitions_of(member: Member) -> set[int]:
    return {p for _t, p in member.partitions()}


def check_single_owner(classics: list[Classic], members: list[Member]) -> None:
    seen: dict[int, str] = {}
    for name, owned in [(c.member_id, c.owned) for c in classics] + [(m.member_id, partitions_of(m)) for m in members]:
        for p in owned:
            assert p not in seen, f"partition {p} owned by {seen[p]} and {name}"
            seen[p] = name


def settle(classics: list[Classic], members: list[Member], rounds: int = 12) -> None:
    for _ in range(rounds):
        before = [(c.generation, set(c.owned)) for c in classics] + [(m.epoch, partitions_of(m)) for m in members]
        for c in classics:
            c.step()
            check_single_owner(classics, members)
        for m in members:
            m.beat()
            check_single_owner(classics, members)
        after = [(c.generation, set(c.owned)) for c in classics] + [(m.epoch, partitions_of(m)) for m in members]
        if before == after:
            return
    raise AssertionError("the group did not settle")


def classic_group(ctx: GroupContext, group: str = "g", *, cooperative: bool = False) -> list[Classic]:
    """Two classic members, Stable, owning t-0,1 and t-2,3."""
    protocol = "cooperative-sticky" if cooperative else "range"
    calls = [ctx.join_new(group, protos=[(protocol, subscription(["t"]))], client_id=f"c{i}") for i in range(2)]
    ctx.advance_until_done(*calls)
    joined = [call.response for call in calls]
    plan = {joined[0].member_id: assignment(t=[0, 1]), joined[1].member_id: assignment(t=[2, 3])}
    syncs = [
        ctx.sync(group, j.generation_id, j.member_id, plan if j.leader == j.member_id else None, protocol_name=protocol)
        for j in sorted(joined, key=lambda j: j.leader == j.member_id)  # the leader last
    ]
    assert all(sync.error == 0 for sync in syncs)
    assert ctx.state(group) is GroupState.STABLE
    return [
        Classic(ctx, group, j.member_id, j.generation_id, protocol, cooperative, owned)
        for j, owned in zip(joined, ({0, 1}, {2, 3}), strict=True)
    ]


def new_context(policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> GroupContext:
    config = dataclasses.replace(GroupContext().config, consumer_group_migration_policy=policy)
    ctx = GroupContext(config=config)
    set_topics(ctx, t=4)
    return ctx


def test_a_consumer_member_upgrades_a_classic_group_and_classic_members_rejoin_it() -> None:
    ctx = new_context()
    a, b = classic_group(ctx)
    generation = a.generation
    c = Member(ctx, "g", topics=["t"])
    assert c.join().error_code == ErrorCode.NONE
    # The group is a consumer group now, its classic members converted at their generation.
    assert ctx.coordinator.group("g") is None
    group = ctx.coordinator.consumer_group("g")
    assert group is not None and group.group_epoch == generation + 1
    converted = group.member(a.member_id)
    assert converted is not None and converted.classic is not None
    assert (converted.member_epoch, converted.classic.protocol_name) == (generation, "range")
    assert partitions_of(c) == set()  # everything is still owned by the classic members
    check_single_owner([a, b], [c])
    # The classic members learn of the new epoch through their heartbeat, rejoin, and give
    # the new member its share; nobody ever owns a partition another one holds.
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    settle([a, b], [c])
    assert sorted(len(x) for x in (a.owned, b.owned, partitions_of(c))) == [1, 1, 2]
    assert a.owned | b.owned | partitions_of(c) == {0, 1, 2, 3}
    assert a.generation == b.generation == c.epoch == group.group_epoch
    assert group.state is ConsumerGroupState.STABLE
    # ConsumerGroupDescribe tells classic members (type 0) from consumer ones (1).
    types = {m.member_id: m.member_type for m in describe(ctx, "g").groups[0].members}
    assert types == {a.member_id: 0, b.member_id: 0, c.member_id: 1}
    # Classic members commit with their generation (= member epoch) on the classic versions.
    assert ctx.commit("g", {("t", 0): 5}, generation=a.generation, member_id=a.member_id).response.topics[0].partitions[0].error_code == 0
    stale = ctx.commit("g", {("t", 0): 5}, generation=a.generation - 1, member_id=a.member_id)
    assert stale.response.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION


def test_members_waiting_in_a_classic_rebalance_are_told_to_rejoin_the_consumer_group() -> None:
    ctx = new_context()
    a, b = classic_group(ctx)
    parked = ctx.join("g", a.member_id, protos=[("range", subscription(["t"]))])  # waits for b
    assert not parked.done and ctx.state("g") is GroupState.PREPARING_REBALANCE
    c = Member(ctx, "g", topics=["t"])
    assert c.join().error_code == ErrorCode.NONE
    assert parked.error == ErrorCode.REBALANCE_IN_PROGRESS
    a.owned = set()  # it had revoked everything before it rejoined (eager)
    settle([a, b], [c])
    assert a.owned | b.owned | partitions_of(c) == {0, 1, 2, 3}


def test_cooperative_classic_members_revoke_before_anyone_gets_their_partitions() -> None:
    ctx = new_context()
    a, b = classic_group(ctx, cooperative=True)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    group = ctx.coordinator.consumer_group("g")
    # The uniform assignor takes one partition from one of them: that one (x) revokes.
    (x,) = [m for m in (a, b) if len(group.target_assignment_of(m.member_id)[c_topic(ctx)]) == 1]
    before = x.generation
    assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    # x rejoins still owning both: it must give one up first; its epoch stays until it has.
    x.rejoin()
    member = group.member(x.member_id)
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    assert len(x.owned) == 1 and x.generation == member.member_epoch == before
    assert partitions_of(c) == set() and c.beat().error_code == 0 and partitions_of(c) == set()
    assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS  # rejoin once revoked
    x.rejoin()
    assert group.member(x.member_id).state is MemberState.STABLE and x.generation == group.group_epoch
    settle([a, b], [c])
    assert a.owned | b.owned | partitions_of(c) == {0, 1, 2, 3}
    assert partitions_of(c) == set(group.target_assignment_of(c.member_id)[c_topic(ctx)]) != set()


def test_an_upgrade_mid_rebalance_keeps_the_partitions_cooperative_members_still_hold() -> None:
    """A classic group sent back from CompletingRebalance to PreparingRebalance has emptied
    its recorded assignments, yet its cooperative members still hold their partitions: the
    upgrade converts what they hold (their JoinGroup's owned partitions), so the new member
    gets none of them before they are revoked (seeds 239 and 691 of the migrate simulation)."""
    ctx = new_context()
    a, b = classic_group(ctx, cooperative=True)
    protocol = a.protocol
    d = ctx.join_new("g", protos=[(protocol, subscription(["t"]))])
    rejoins = [ctx.join("g", x.member_id, protos=[(protocol, subscription(["t"], {"t": x.owned}))]) for x in (a, b)]
    ctx.advance_until_done(d, *rejoins)
    assert ctx.state("g") is GroupState.COMPLETING_REBALANCE
    # d leaves before the leader syncs: back to PreparingRebalance, assignments emptied.
    assert ctx.leave("g", (d.response.member_id, None)).error == ErrorCode.NONE
    assert ctx.state("g") is GroupState.PREPARING_REBALANCE
    assert {m.assignment for m in ctx.coordinator.group("g").members.values()} == {b""}
    for x in (a, b):
        x.generation = rejoins[0].response.generation_id
    c = Member(ctx, "g", topics=["t"])
    assert c.join().error_code == ErrorCode.NONE
    check_single_owner([a, b], [c])
    group = ctx.coordinator.consumer_group("g")
    assert {m: set(group.member(m).assigned_partitions.get(c_topic(ctx), ())) for m in (a.member_id, b.member_id)} == {
        a.member_id: a.owned,
        b.member_id: b.owned,
    }
    settle([a, b], [c])
    assert a.owned | b.owned | partitions_of(c) == {0, 1, 2, 3} and partitions_of(c)


def test_an_upgrade_right_after_a_downgrade_keeps_the_partitions_members_still_revoke() -> None:
    """The last consumer member leaves while classic members still hold partitions the target
    moved away from them; the classic group they become records what they hold, so another
    consumer member upgrading it again gets none of those before they are revoked."""
    ctx = new_context()
    a, b = classic_group(ctx, cooperative=True)
    c = Member(ctx, "g", topics=["t"])
    assert c.join().error_code == ErrorCode.NONE  # the target moves some of a's and b's partitions to c
    assert c.leave().error_code == ErrorCode.NONE  # before a and b revoked them: downgraded
    assert ctx.state("g") is GroupState.PREPARING_REBALANCE
    e = Member(ctx, "g", topics=["t"])
    assert e.join().error_code == ErrorCode.NONE  # upgraded again
    check_single_owner([a, b], [e])
    for x in (a, b):
        # Still at the first generation, in a group now at the epoch c made: like the Java
        # client, each loses its partitions and rejoins.
        assert x.heartbeat() == ErrorCode.ILLEGAL_GENERATION
        x.owned = set()
        x.rejoin()
        check_single_owner([a, b], [e])
    settle([a, b], [e])
    assert a.owned | b.owned | partitions_of(e) == {0, 1, 2, 3} and partitions_of(e)


def test_the_group_downgrades_when_its_last_consumer_member_leaves() -> None:
    ctx = new_context()
    a, b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    settle([a, b], [c])
    epoch = c.epoch
    ctx.commit("g", {("t", 2): 7}, generation=a.generation, member_id=a.member_id)
    assert c.leave().error_code == ErrorCode.NONE
    # A classic group again, at the consumer group's epoch, rebalancing so its members rejoin.
    assert ctx.coordinator.consumer_group("g") is None
    classic = ctx.coordinator.group("g")
    assert classic is not None and classic.state is GroupState.PREPARING_REBALANCE
    assert classic.generation_id == epoch and set(classic.members) == {a.member_id, b.member_id}
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    joins = [ctx.join("g", m.member_id, protos=[("range", subscription(["t"]))]) for m in (a, b)]
    ctx.advance_until_done(*joins)
    leader = next(j.response for j in joins if j.response.leader == j.response.member_id)
    assert {j.response.generation_id for j in joins} == {epoch + 1}
    syncs = [ctx.sync("g", epoch + 1, j.response.member_id) for j in joins if j.response is not leader]
    syncs.append(ctx.sync("g", epoch + 1, leader.member_id, {a.member_id: assignment(t=[0, 1]), b.member_id: assignment(t=[2, 3])}))
    assert all(s.error == 0 for s in syncs)
    assert classic.state is GroupState.STABLE
    assert ctx.fetched("g") == {("t", 2): 7}
    # The log says the same after a restart.
    fresh = reload(ctx)
    assert fresh.consumer_group("g") is None and set(fresh.group("g").members) == {a.member_id, b.member_id}


def test_the_group_downgrades_when_its_last_consumer_member_is_fenced() -> None:
    ctx = new_context()
    a, b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    settle([a, b], [c])
    # c stops heartbeating; the classic members go on until c's session (45 s) runs out.
    session = ctx.config.consumer_group_session_timeout_ms
    for _ in range(session // 1_000 + 1):
        ctx.advance(1_000)
        for m in (a, b):
            if ctx.coordinator.consumer_group("g") is not None:
                assert m.heartbeat() in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
    assert ctx.coordinator.consumer_group("g") is None
    assert ctx.state("g") is GroupState.PREPARING_REBALANCE
    assert a.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_downgrade_that_fails_to_write_is_tried_again() -> None:
    """The last consumer member's session expires while appends fail: the downgrade is not
    written, the group stays a consumer group with its timers running, and the fence is
    tried again until it is written (simulation seeds 1191, 1305 and 1307 of migrate)."""
    ctx = new_context()
    a, b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    settle([a, b], [c])
    ctx.fail_appends_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    # c stops heartbeating; its session expires while nothing can be written.
    for _ in range(ctx.config.consumer_group_session_timeout_ms // 1_000 + 2):
        ctx.advance(1_000)
        for m in (a, b):
            assert m.heartbeat() in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
    group = ctx.coordinator.consumer_group("g")
    assert group is not None and group.has_member(c.member_id)
    ctx.fail_appends_with = None
    ctx.advance(1_000)
    assert ctx.coordinator.consumer_group("g") is None
    assert ctx.state("g") is GroupState.PREPARING_REBALANCE
    # The classic members' sessions run in the classic group: one that stops is removed.
    joins = [ctx.join("g", a.member_id, protos=[("range", subscription(["t"]))])]
    ctx.advance_until_done(*joins)
    assert set(ctx.coordinator.group("g").members) == {a.member_id}


def test_static_classic_members_keep_their_instance_across_the_upgrade() -> None:
    ctx = new_context()
    calls = [ctx.join("g", protos=[("range", subscription(["t"]))], instance_id=f"i{i}", client_id=f"c{i}")
             for i in range(2)]
    ctx.advance_until_done(*calls)
    joined = [call.response for call in calls]
    plan = {joined[0].member_id: assignment(t=[0, 1]), joined[1].member_id: assignment(t=[2, 3])}
    syncs = [ctx.sync("g", j.generation_id, j.member_id, plan if j.leader == j.member_id else None, instance_id=f"i{i}")
             for i, j in sorted(enumerate(joined), key=lambda ij: ij[1].leader == ij[1].member_id)]
    assert all(s.error == 0 for s in syncs)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    group = ctx.coordinator.consumer_group("g")
    assert group.static_member_id("i0") == joined[0].member_id
    # A restarted static classic member (new member id, same instance) takes over its place.
    again = ctx.join("g", protos=[("range", subscription(["t"]))], instance_id="i0")
    assert again.error == 0 and again.response.member_id != joined[0].member_id
    assert group.static_member_id("i0") == again.response.member_id and group.member(joined[0].member_id) is None
    # A known member id under an instance id the group does not have is unknown; a
    # fenced incarnation of an instance is told so.
    assert ctx.join("g", "someone", protos=[("range", subscription(["t"]))], instance_id="i9").error == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert ctx.heartbeat("g", joined[0].generation_id, joined[0].member_id, instance_id="i0").error == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    # A consumer-protocol member restarted under a classic member's instance id takes it at once.
    d = Member(ctx, "g", topics=["t"], instance_id="i1")
    assert d.join().error_code == ErrorCode.NONE
    assert group.static_member_id("i1") == d.member_id and not group.member(d.member_id).uses_classic_protocol


def test_a_restart_mid_migration_replays_the_mixed_group() -> None:
    ctx = new_context()
    a, b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    a.step()  # a rejoined at the new epoch; b has not yet
    live = ctx.coordinator.consumer_group("g")
    fresh = reload(ctx)
    replayed = fresh.consumer_group("g")
    assert fresh.group("g") is None and replayed is not None
    assert (replayed.group_epoch, replayed.target_assignment_epoch) == (live.group_epoch, live.target_assignment_epoch)
    assert dict(replayed.members) == dict(live.members)  # epochs, assignments, classic metadata
    assert dict(replayed.target_assignment) == dict(live.target_assignment)
    # The restarted coordinator goes on with the classic members where they were.
    ctx.coordinator = fresh
    ctx.coordinator.finish_loading(ctx.now)
    assert b.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    settle([a, b], [c])
    assert a.owned | b.owned | partitions_of(c) == {0, 1, 2, 3}


def test_a_classic_consumer_joins_a_consumer_group_with_members() -> None:
    ctx = new_context()
    c = Member(ctx, "g", topics=["t"])
    c.join()
    first = ctx.join("g", protos=[("range", subscription(["t"]))])
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    x = Classic(ctx, "g", first.response.member_id, -1)
    x.rejoin()
    settle([x], [c])
    assert len(x.owned) == 2 and x.owned | partitions_of(c) == {0, 1, 2, 3}
    # Another protocol type, or protocols the classic members do not share, are refused.
    other = ctx.join("g", protos=[("range", subscription(["t"]))], protocol_type="connect")
    assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    unshared = ctx.join("g", protos=[("roundrobin", subscription(["t"]))])
    assert unshared.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # A classic member that leaves: removed, and the group epoch moves on.
    epoch = ctx.coordinator.consumer_group("g").group_epoch
    assert ctx.leave("g", (x.member_id, None)).error == 0
    group = ctx.coordinator.consumer_group("g")
    assert group.member(x.member_id) is None and group.group_epoch == epoch + 1


def test_a_classic_member_id_made_in_a_consumer_group_is_a_kafka_uuid_string() -> None:
    config = dataclasses.replace(GroupContext().config, consumer_group_migration_policy=MigrationPolicy.BIDIRECTIONAL)
    ctx = GroupContext(config=config, random_member_ids=True)
    set_topics(ctx, t=4)
    Member(ctx, "g", topics=["t"]).join()
    first = ctx.join("g", protos=[("range", subscription(["t"]))])
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert is_kafka_uuid_string(first.response.member_id)


def test_a_classic_member_that_stops_heartbeating_is_fenced_after_its_session() -> None:
    ctx = new_context()
    a, b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    for _ in range(SESSION_MS // 1000):
        ctx.advance(1_000)
        b.step()
        c.beat()
    group = ctx.coordinator.consumer_group("g")
    assert group.member(a.member_id) is None and group.member(b.member_id) is not None
    settle([b], [c])
    assert b.owned | partitions_of(c) == {0, 1, 2, 3}


def test_with_the_policy_disabled_a_classic_group_with_members_is_not_a_consumer_group() -> None:
    ctx = new_context(MigrationPolicy.DISABLED)
    a, _b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    refused = c.join()
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group."
    )
    assert ctx.coordinator.group("g").state is GroupState.STABLE and a.heartbeat() == 0


def test_with_upgrade_only_the_group_stays_a_consumer_group_of_classic_members() -> None:
    ctx = new_context(MigrationPolicy.UPGRADE)
    a, b = classic_group(ctx)
    c = Member(ctx, "g", topics=["t"])
    c.join()
    settle([a, b], [c])
    c.leave()
    group = ctx.coordinator.consumer_group("g")
    assert group is not None and set(group.members) == {a.member_id, b.member_id}
    settle([a, b], [])
    assert a.owned | b.owned == {0, 1, 2, 3}


def test_policy_parsing_follows_kafka() -> None:
    assert MigrationPolicy.parse("BiDirectional") is MigrationPolicy.BIDIRECTIONAL
    assert MigrationPolicy.UPGRADE.upgrade_enabled and not MigrationPolicy.UPGRADE.downgrade_enabled
    assert not MigrationPolicy.DISABLED.upgrade_enabled
    assert CoordinatorConfig().consumer_group_migration_policy is MigrationPolicy.BIDIRECTIONAL
    try:
        MigrationPolicy.parse("sideways")
    except ValueError as exc:
        assert "disabled, upgrade, downgrade, bidirectional" in str(exc)
    else:
        raise AssertionError("an unknown policy must be refused")
