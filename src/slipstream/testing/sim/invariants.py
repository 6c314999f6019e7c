"""The properties checked after every step, and the ones checked at the end.

Safety (every step):
- exclusive ownership. Classic: members that are Stable in the same generation hold
  disjoint partitions (the classic protocol cannot stop a zombie of an older
  generation from consuming; it only fences its commits). Consumer protocol: at any
  instant, the partitions live members actually hold (within their lease) are disjoint.
- committed offsets never move backwards (nor vanish).
- a fenced member never gets a commit accepted under its old generation/epoch
  (checked as the coordinator serves each OffsetCommit: see ``CommitFencing``).
- a restarted coordinator replays to the state it had (``durable_view``).

Liveness (after the faults stop): the group becomes quiet within a bound, every
subscribed partition owned (``quiet_problems`` says what is still missing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...client.membership_types import MemberState
from ...coordinator import GroupCoordinator, GroupState
from ...coordinator.consumer import ConsumerGroup, ConsumerGroupState
from ...coordinator.consumer.member import MemberState as CgMemberState
from ...coordinator.group import ClassicGroup
from ...protocol.consumer_protocol import decode_assignment
from .members import SimMember, TopicPartition
from .topics import Topics


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    message: str
    at_ms: int


# ---------------------------------------------------------------- ownership


def classic_ownership(members: list[Any], ordered: bool = False) -> tuple[str | None, int]:
    """(a violation message or None, zombie overlaps seen) for classic members.

    The fast pass iterates sets; a conflict is re-derived in sorted order so the
    message does not depend on string hashing (which differs between processes)."""
    by_generation: dict[int, dict[TopicPartition, str]] = {}
    everyone: dict[TopicPartition, tuple[str, int]] = {}
    zombies = 0
    for m in members:
        core = m.core
        owned = m.held()
        if not owned:
            continue
        gen = core.generation_id
        stable = core.state is MemberState.STABLE and gen >= 0
        for tp in sorted(owned) if ordered else owned:
            other = everyone.get(tp)
            if other is not None and other[1] != gen:
                zombies += 1
            everyone[tp] = (m.label, gen)
            if not stable:
                continue
            seen = by_generation.setdefault(gen, {})
            if tp in seen:
                if not ordered:
                    return classic_ownership(members, ordered=True)
                return f"{tp} owned by {seen[tp]} and {m.label}, both Stable in generation {gen}", zombies
            seen[tp] = m.label
    return None, zombies


def consumer_ownership(
    members: list[Any], coordinator: GroupCoordinator, group_id: str, ordered: bool = False
) -> tuple[str | None, int]:
    """(a violation message or None, zombie overlaps seen) for consumer-protocol members.

    Only members the coordinator still has count: one it fenced (session or rebalance
    timeout) keeps its partitions until an answer tells it (as Kafka's clients do), and
    only its commits are refused. Among the others, a partition never has two holders."""
    group = coordinator.consumer_group(group_id)
    known = group.members if group is not None else {}
    seen: dict[TopicPartition, str] = {}
    zombie_held: set[TopicPartition] = set()
    for m in members:
        held = m.held()
        if not held:
            continue
        if m.member_id not in known:
            zombie_held |= held
            continue
        for tp in sorted(held) if ordered else held:
            if tp in seen:
                if not ordered:
                    return consumer_ownership(members, coordinator, group_id, ordered=True)
                return f"{tp} held by {seen[tp]} and {m.label} at the same time", 0
            seen[tp] = m.label
    return None, len(zombie_held & seen.keys())


# ---------------------------------------------------------------- offsets


class OffsetWatch:
    """Committed offsets per partition never go down (nor disappear)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.high: dict[tuple[str, int], int] = {}

    def check(self, coordinator: GroupCoordinator) -> str | None:
        if coordinator.is_group_loading(self.group_id):
            return None
        now = {tp: om.offset for tp, om in coordinator.committed_offsets(self.group_id).items()}
        for tp, was in self.high.items():
            offset = now.get(tp)
            if offset is None or offset < was:
                break
        else:
            self.high.update(now)
            return None
        # Something went back: name the first such partition in sorted order (the message
        # must not depend on hashing).
        for tp, was in sorted(self.high.items()):
            offset = now.get(tp)
            if offset is None:
                return f"committed offset of {tp} vanished (was {was})"
            if offset < was:
                return f"committed offset of {tp} went back from {was} to {offset}"
        raise AssertionError("unreachable: a partition went back")


# ---------------------------------------------------------------- fencing of commits


def valid_credentials(coordinator: GroupCoordinator, group_id: str) -> set[tuple[str, int]]:
    """The (member id, generation/epoch) pairs the coordinator would take a commit from now."""
    return credentials_of(coordinator.group(group_id), coordinator.consumer_group(group_id))


def credentials_of(classic: ClassicGroup | None, group: ConsumerGroup | None) -> set[tuple[str, int]]:
    """``valid_credentials`` of a group id whose classic and consumer groups are these."""
    if classic is not None and classic.state is not GroupState.DEAD:
        generation = classic.generation_id
        return {(member_id, generation) for member_id in classic.members}
    if group is not None:
        return {(m.member_id, m.member_epoch) for m in group.members.values()}
    return set()


class CommitFencing:
    """Credentials that were valid once and are not any more: commits with them must fail."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.valid: set[tuple[str, int]] = set()
        self.fenced: set[tuple[str, int]] = set()

    def observe(self, coordinator: GroupCoordinator) -> None:
        if coordinator.is_group_loading(self.group_id):
            return
        self.observe_credentials(valid_credentials(coordinator, self.group_id))

    def observe_credentials(self, now: set[tuple[str, int]]) -> None:
        """``observe`` with the group's ``valid_credentials`` (its group not loading)."""
        if now != self.valid:
            self.fenced |= self.valid - now
            self.fenced -= now
            self.valid = now

    def after_restart(self, coordinator: GroupCoordinator) -> None:
        # A classic group replays to its last *written* generation: a generation that
        # never completed is forgotten and the one before is valid again (as in Kafka).
        now = valid_credentials(coordinator, self.group_id)
        self.fenced -= now
        self.valid = now

    def is_fenced(self, member_id: str, generation: int) -> bool:
        return (member_id, generation) in self.fenced


# ---------------------------------------------------------------- restarts


def durable_view(coordinator: GroupCoordinator, group_id: str) -> dict[str, Any]:
    """What must survive a restart: offsets; a settled classic group; a whole consumer group."""
    view: dict[str, Any] = {
        "offsets": {tp: (om.offset, om.metadata) for tp, om in sorted(coordinator.committed_offsets(group_id).items())}
    }
    classic = coordinator.group(group_id)
    if classic is not None and classic.state is GroupState.EMPTY and classic.generation_id == 0 and not classic.members:
        # Made by a JoinGroup that never completed a generation (a classic member's first
        # join of an empty, possibly just converted, group): never written, as in Kafka;
        # after a restart the group does not exist, which is the same thing.
        classic = None
    if classic is not None and classic.state in (GroupState.STABLE, GroupState.EMPTY):
        view["classic"] = (
            classic.state.value,
            classic.generation_id,
            classic.protocol_type,
            classic.protocol_name,
            classic.leader_id,
            sorted(
                (m.member_id, m.group_instance_id, bytes(m.assignment), m.session_timeout_ms, m.rebalance_timeout_ms)
                for m in classic.members.values()
            ),
        )
    elif classic is not None and classic.state is not GroupState.DEAD:
        view["classic"] = "unsettled"  # not comparable: the log holds the generation before
    group = coordinator.consumer_group(group_id)
    if group is not None and group.state is not ConsumerGroupState.DEAD:
        view["consumer"] = (
            group.state.value,
            group.group_epoch,
            group.target_assignment_epoch,
            group.metadata_hash,
            sorted(group.members.items()),
            sorted(group.target_assignment.items()),
            sorted(group.resolved_regexes.items()),
        )
    return view


def compare_views(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    if before.get("classic") == "unsettled":
        before = {k: v for k, v in before.items() if k != "classic"}
        after = {k: v for k, v in after.items() if k != "classic"}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            return f"replayed {key} differs: before {before.get(key)!r} after {after.get(key)!r}"
    return None


# ---------------------------------------------------------------- liveness


def classic_quiet_problems(
    coordinator: GroupCoordinator, group_id: str, members: list[Any], topics: Topics
) -> list[str]:
    group = coordinator.group(group_id)
    if not members:
        if group is not None and group.state not in (GroupState.EMPTY, GroupState.DEAD):
            return [f"no live members but the group is {group.state.value}"]
        return []
    if group is None:
        converted = coordinator.consumer_group(group_id)
        if converted is not None:
            return _classic_members_of_consumer_group_problems(converted, members, topics)
    if group is None or group.state is not GroupState.STABLE:
        return [f"group is {None if group is None else group.state.value}"]
    stable = group

    def settled(m: Any, problems: list[str]) -> bool:
        core = m.core
        if core.generation is None or core.generation_id != stable.generation_id or core.rejoin_needed:
            problems.append(f"{m.label} is {core.state.value} in generation {core.generation_id}")
            return False
        member = stable.members.get(core.member_id)
        if member is not None:
            _v, assignment = decode_assignment(member.assignment)
            assigned = {(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions}
            _check_held(m, assigned, problems)
        return True

    return _quiet_members_problems(
        group.members, members, {m.core.member_id for m in members}, _core_wanted(topics), settled
    )


def _classic_members_of_consumer_group_problems(group: Any, members: list[Any], topics: Topics) -> list[str]:
    """Classic members that joined a consumer group (converted while a consumer-protocol member
    was in it, and not downgraded since: the policy allows no downgrade, as in Kafka): quiet
    when the group is Stable and each member is at the group epoch with its assignment."""
    if group.state is not ConsumerGroupState.STABLE:
        return [f"consumer group (classic members) is {group.state.value}"]

    def settled(m: Any, problems: list[str]) -> bool:
        core = m.core
        member = group.member(core.member_id)
        if member is None:
            return False
        if (
            core.generation is None or core.rejoin_needed or core.generation_id != group.group_epoch
            or member.member_epoch != group.group_epoch or member.state is not CgMemberState.STABLE
        ):
            problems.append(
                f"{m.label} is {core.state.value} in generation {core.generation_id} (member epoch "
                f"{member.member_epoch}, {member.state.name}), group epoch {group.group_epoch}"
            )
            return False
        _check_held(m, _named_partitions(member, topics), problems)
        return True

    return _quiet_members_problems(
        group.members, members, {m.core.member_id for m in members}, _core_wanted(topics), settled
    )


def consumer_quiet_problems(
    coordinator: GroupCoordinator, group_id: str, members: list[Any], topics: Topics
) -> list[str]:
    group = coordinator.consumer_group(group_id)
    if not members:
        if group is not None and group.members:
            return [f"no live members but the group has {sorted(group.members)}"]
        return []
    if group is None or group.state is not ConsumerGroupState.STABLE:
        return [f"group is {None if group is None else group.state.value}"]
    stable = group

    def settled(m: Any, problems: list[str]) -> bool:
        member = stable.member(m.member_id)
        if member is None:
            return False
        if m.epoch != stable.group_epoch or member.state is not CgMemberState.STABLE:
            problems.append(f"{m.label} at epoch {m.epoch} ({member.state.name}), group epoch {stable.group_epoch}")
            return False
        _check_held(m, _named_partitions(member, topics), problems)
        foreign = {tp for tp in m.held() if tp[0] not in m.subscription}
        if foreign:
            problems.append(f"{m.label} holds partitions of topics it does not subscribe to: {sorted(foreign)}")
        return True

    return _quiet_members_problems(
        group.members,
        members,
        {m.member_id for m in members},
        lambda m: set(topics.partitions_of(m.subscription)),
        settled,
    )


def _quiet_members_problems(
    group_member_ids: Iterable[str],
    members: list[Any],
    live_ids: set[str],
    wanted_by: Callable[[Any], set[TopicPartition]],
    settled: Callable[[Any, list[str]], bool],
) -> list[str]:
    """What keeps a Stable group's live members from quiet, either protocol: members the group
    does not have (or has and are not live), members not settled (``settled`` appends why,
    and says whether the member counts as holding what it holds), subscribed partitions
    that no settled member holds."""
    problems = []
    group_ids = set(group_member_ids)
    if live_ids != group_ids:
        problems.append(f"group members {sorted(group_ids)} != live members {sorted(live_ids)}")
    wanted: set[TopicPartition] = set()
    owned: set[TopicPartition] = set()
    for m in members:
        wanted |= wanted_by(m)
        if settled(m, problems):
            owned |= m.held()
    if wanted - owned:
        problems.append(f"subscribed partitions without an owner: {sorted(wanted - owned)}")
    return problems


def _core_wanted(topics: Topics) -> Callable[[Any], set[TopicPartition]]:
    """The partitions a classic member (its core's subscription) wants."""
    return lambda m: set(topics.partitions_of(m.core.subscription))


def _named_partitions(member: Any, topics: Topics) -> set[TopicPartition]:
    """A consumer-group member's assigned partitions, by topic name."""
    return {(topics.names_by_id[t], p) for t, ps in member.assigned_partitions.items() for p in ps}


def _check_held(m: Any, assigned: set[TopicPartition], problems: list[str]) -> None:
    if assigned != m.held():
        problems.append(f"{m.label} holds {sorted(m.held())}, assigned {sorted(assigned)}")


def live(members: Iterable[SimMember]) -> list[SimMember]:
    return [m for m in members if not m.gone and not m.closing]
