"""Reconcile one member towards its target assignment (Kafka's CurrentAssignmentBuilder).

``reconcile`` is called on every heartbeat of a member. It never hands a member a
partition that another member still owns (the owner epoch function says -1 only
for free partitions) and never moves a member to a new epoch while it may still
consume a partition it must give up:

- revoke first: partitions the member holds and the target no longer has go to
  ``partitions_pending_revocation``; the member keeps its epoch and waits in
  UNREVOKED_PARTITIONS until a heartbeat's owned partitions no longer list them;
- then it moves to the target epoch with (kept + free newly assigned) partitions,
  in UNRELEASED_PARTITIONS while some target partition is still owned by another
  member, STABLE once it has all of them.

``validate_member_epoch`` is the check done before, on the epoch a heartbeat carries.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import FencedMemberEpochError
from .member import ConsumerGroupMember, MemberState
from .partitions import PartitionMap, TopicId, is_subset, normalize, overlaps

# (topic id, partition) -> epoch of its current owner, or -1 when it is free.
PartitionEpochLookup = Callable[[TopicId, int], int]


def validate_member_epoch(
    member: ConsumerGroupMember, received_epoch: int, owned: PartitionMap | None
) -> None:
    """Raise ``FencedMemberEpochError`` unless a heartbeat at ``received_epoch`` is acceptable.

    Accepted: the member's epoch; or its previous epoch when the heartbeat lists its owned
    partitions and they are all assigned to it (the response that bumped its epoch was
    lost). A higher epoch, or any other lower one, fences the member. Call it for epochs
    > 0 only: 0 is a join and -1/-2 are leaves.
    """
    if received_epoch > member.member_epoch:
        raise FencedMemberEpochError(
            f"member {member.member_id} has epoch {received_epoch}, greater than the "
            f"coordinator's {member.member_epoch}; it must abandon its partitions and rejoin"
        )
    if received_epoch < member.member_epoch and (
        received_epoch != member.previous_member_epoch
        or owned is None
        or not is_subset(owned, member.assigned_partitions)
    ):
        raise FencedMemberEpochError(
            f"member {member.member_id} has epoch {received_epoch}, smaller than the "
            f"coordinator's {member.member_epoch}; it must abandon its partitions and rejoin"
        )


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: PartitionMap,
    current_partition_epoch: PartitionEpochLookup,
    owned: PartitionMap | None,
) -> ConsumerGroupMember:
    """The member's next state (possibly ``member`` itself when it cannot progress).

    ``owned`` is what the heartbeat reported as owned, or None when it did not say.
    Raises ``FencedMemberEpochError`` for a member in the UNKNOWN state that still
    owns (or may own) partitions.
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.partitions_pending_revocation):
            return member
        # Revocation acknowledged: the member may move past its epoch.
        return _next(member, member.member_epoch + 1, target_epoch, target, current_partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    # UNKNOWN: written by a newer coordinator; start over from nothing.
    if owned is None or owned:
        raise FencedMemberEpochError(
            f"member {member.member_id} is in an unknown state; "
            "it must abandon its partitions and rejoin"
        )
    return _next(member, target_epoch, target_epoch, target, current_partition_epoch, owned)


def _still_owns(owned: PartitionMap | None, revoking: PartitionMap) -> bool:
    # Not reporting owned partitions means nothing is confirmed released.
    return owned is None or overlaps(normalize(owned), revoking)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: PartitionMap,
    current_partition_epoch: PartitionEpochLookup,
    owned: PartitionMap | None,
) -> ConsumerGroupMember:
    assigned: dict[TopicId, frozenset[int]] = {}
    revoking: dict[TopicId, frozenset[int]] = {}
    newly_assigned: dict[TopicId, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned_partitions):
        wanted = target.get(topic_id, frozenset())
        held = member.assigned_partitions.get(topic_id, frozenset())
        keep = held & wanted
        free = frozenset(
            p for p in wanted - keep if current_partition_epoch(topic_id, p) == -1
        )
        unreleased = unreleased or len(free) < len(wanted - keep)
        assigned[topic_id] = keep
        revoking[topic_id] = held - keep
        newly_assigned[topic_id] = free
    assigned, revoking, newly_assigned = normalize(assigned), normalize(revoking), normalize(newly_assigned)

    if revoking and _still_owns(owned, revoking):
        # Stay at the current epoch until the member confirms it released these.
        return member.with_epoch(member_epoch).replace(
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=assigned,
            partitions_pending_revocation=revoking,
        )
    for topic_id, parts in newly_assigned.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    return member.with_epoch(target_epoch).replace(
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned_partitions=assigned,
        partitions_pending_revocation={},
    )
