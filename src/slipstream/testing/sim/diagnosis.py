"""Signatures of real bugs the simulator found, read off a failing world.

A violation says *what* broke; these say which known bug most likely made it break,
so a report can group failing seeds and a fix can be checked against them. A
signature is a fact about the world at the end of the run, not a proof.
"""

from __future__ import annotations

from ...client.membership_types import MemberState
from ...coordinator.consumer_sessions import session_key
from .classic import ClassicMember
from .state import WorldState

LOST_SUBSCRIPTION_CHANGE = "classic: subscription change made during a JoinGroup lost (MemberCore.on_sync_response)"
STATIC_LEADER_BASELINE = (
    "classic: a static leader back in a Stable group (skip_assignment) never checks that the "
    "assignment covers the group's subscriptions and partition counts (GroupMembership._join_once)"
)
FENCE_NOT_RETRIED = "consumer: a member fenced by a timer while appends fail is never fenced again (no timer retry)"
ACK_WITHOUT_APPEND = "consumer: ConsumerGroupHeartbeat answered OK though its records failed to append"
ORPHANED_COMMIT = (
    "both: a member's older OffsetCommit, sent on a connection it has since closed, is read by the broker "
    "after the member's newer commit on its new connection (same member and generation: Kafka accepts it; "
    "OffsetManager.commit_connections refuses it)"
)


def diagnose(world: WorldState) -> list[str]:
    found: list[str] = []
    members = [m for m in world.members if not m.gone]
    for m in members:
        if not isinstance(m, ClassicMember):
            continue
        core = m.core
        if core.state is MemberState.STABLE and not core.rejoin_needed and m.joined_subscription != core.subscription:
            found.append(LOST_SUBSCRIPTION_CHANGE)
        if m.skipped_assignment and core.is_leader:
            peers = [x for x in members if x.group_id == m.group_id]  # several groups may share topics
            wanted = {tp for x in peers if isinstance(x, ClassicMember) for tp in world.topics.partitions_of(x.subscription)}
            owned = {tp for x in peers for tp in x.held()}
            if wanted - owned:
                found.append(STATIC_LEADER_BASELINE)
    coordinator = world.broker.coordinator
    group = coordinator.consumer_group(world.group_id)
    if group is not None and world.broker.up and not coordinator.is_group_loading(world.group_id):
        timer = coordinator.timer
        if any(not timer.is_scheduled(session_key(world.group_id, mid)) for mid in group.members):
            found.append(FENCE_NOT_RETRIED)
    if world.acked_unwritten and world.violations and world.violations[0].kind == "ownership":
        found.append(ACK_WITHOUT_APPEND)
    if world.violations and world.violations[0].kind == "offsets" and world.broker.last_commit_was_orphaned:
        found.append(ORPHANED_COMMIT)
    return sorted(set(found))
