"""A member of the *other* group protocol trying the same group id (``foreign_join``).

The broker refuses a non-empty group of the other type: a classic JoinGroup to a
consumer group with members gets INCONSISTENT_GROUP_PROTOCOL, a ConsumerGroupHeartbeat
to a classic group with members GROUP_ID_NOT_FOUND. An *empty* group changes type and
keeps its offsets. A probe sends one join; when it gets in, it leaves at once.

With online migration (``group.consumer.migration.policy`` upgrade or bidirectional) a
ConsumerGroupHeartbeat converts a classic group *with* members: the probe gets in beside
them, and its leaving converts the group back (downgrade or bidirectional).

What the world checks (``Watcher.request_started`` / ``answered``): a probe served while
the world's group had members must be refused with exactly that error, unless the policy
lets it convert the group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...coordinator import GroupCoordinator, GroupState
from ...coordinator.config import MigrationPolicy
from ...protocol.apis.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from ...protocol.apis.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from ...protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    SUBSCRIPTION_MAX_VERSION,
    ConsumerProtocolSubscription,
    encode_subscription,
)
from ...protocol.errors import ErrorCode
from .network import Connection
from .state import WorldState

PROBE_PREFIX = "foreign-"
# The refusal each protocol's join must get from a non-empty group of the other type.
# Answers of a coordinator that is not serving the group (yet): the request did not reach it.
NOT_SERVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE})
REFUSAL = {"join_group": ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "consumer_group_heartbeat": ErrorCode.GROUP_ID_NOT_FOUND}


def converts_with_members(policy: MigrationPolicy, api: str) -> bool:
    """Whether a join by ``api`` may convert a group of the other type that has members.

    Only the upgrade counts: a classic JoinGroup into a consumer group with members
    joins it as a classic member under every policy (as in Kafka), and a probe told
    MEMBER_ID_REQUIRED goes away before that."""
    return api == "consumer_group_heartbeat" and policy in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)


def group_has_members(coordinator: GroupCoordinator, group_id: str, protocol: str) -> bool:
    """Whether the world's own group (of ``protocol``) has members right now."""
    if protocol == "classic":
        classic = coordinator.group(group_id)
        return classic is not None and classic.state is not GroupState.DEAD and bool(classic.members)
    group = coordinator.consumer_group(group_id)
    return group is not None and bool(group.members)


def send_probe(
    world: WorldState, number: int, topics: tuple[str, ...], done: Callable[[], None] | None = None
) -> None:
    """One member of the other protocol tries the group; ``done`` runs once it went away."""
    owner = f"{PROBE_PREFIX}{number}"

    def finished(_why: object = None) -> None:
        if done is not None:
            done()

    rng = world.network.rng_for(owner)
    api = "consumer_group_heartbeat" if world.protocol == "classic" else "join_group"

    def connected(conn: Connection) -> None:
        request: Any
        if api == "join_group":
            metadata = encode_subscription(ConsumerProtocolSubscription(topics=list(topics)), SUBSCRIPTION_MAX_VERSION)
            request = JoinGroupRequest(
                group_id=world.group_id,
                session_timeout_ms=world.timing.session_ms,
                rebalance_timeout_ms=world.timing.rebalance_ms,
                member_id="",
                group_instance_id=None,
                protocol_type=PROTOCOL_TYPE,
                protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)],
                reason="a classic member tries the group",
            )
            version = 9
        else:
            request = ConsumerGroupHeartbeatRequest(
                group_id=world.group_id,
                member_id=owner,
                member_epoch=0,
                rebalance_timeout_ms=world.timing.rebalance_ms,
                subscribed_topic_names=list(topics),
                topic_partitions=[],
            )
            version = 1

        def answered(response: Any) -> None:
            code = response.error_code
            world.coverage.error(f"probe:{'JoinGroup' if api == 'join_group' else 'ConsumerGroupHeartbeat'}", code)
            if api == "consumer_group_heartbeat" and code == ErrorCode.NONE:
                # In (the group was empty and changed type): leave at once.
                leave = ConsumerGroupHeartbeatRequest(group_id=world.group_id, member_id=owner, member_epoch=-1)

                def left(_r: object) -> None:
                    world.network.close(conn, "probe done")
                    finished()

                world.network.request(conn, api, 1, leave, left, finished, 5_000)
                return
            # A classic probe told MEMBER_ID_REQUIRED goes away: its pending id expires.
            world.network.close(conn, "probe done")
            finished()

        world.network.request(conn, api, version, request, answered, finished, 30_000)

    world.network.connect(owner, rng, connected, finished)


# How often a conversion waits for the group to empty, and for how long at most.
EMPTY_POLL_MS = 100
EMPTY_WAIT_MS = 60_000


def convert_when_empty(world: WorldState, number: int, rejoin_after_ms: int) -> None:
    """The ``convert`` action: every member leaves; once the coordinator's group is empty a
    member of the other protocol joins it (the empty group changes type, its offsets stay)
    and leaves; once the group is empty again the members come back, and it changes type
    back.

    Kafka converts an *empty* group either way (a classic JoinGroup to an empty consumer
    group, a ConsumerGroupHeartbeat to an empty classic group). Invariants meanwhile:
    committed offsets survive both conversions; old generations and epochs stay fenced."""
    leavers = world.leave_all()
    world.extend_faults(world.queue.now_ms + 2 * EMPTY_WAIT_MS + 40_000)
    topics = tuple(sorted({t for _slot, sub in leavers for t in sub})) or ("t0",)

    def rejoin() -> None:
        world.note(f"   convert #{number}: members come back")
        for slot, sub in leavers:
            world.rejoin(slot, sub)

    def back_later() -> None:
        world.queue.after(rejoin_after_ms, "rejoin after convert", rejoin)

    def probe() -> None:
        world.note(f"   convert #{number}: the group is empty; a member of the other protocol joins")
        world.coverage.action("convert:probe")
        # Back once the probe is gone and the group is empty again (a classic probe's
        # pending member id lingers until it expires).
        send_probe(world, number, topics, lambda: when_empty(back_later))

    def when_empty(then: Callable[[], None]) -> None:
        started = world.queue.now_ms

        def poll() -> None:
            coordinator = world.broker.coordinator
            ready = world.broker.up and not coordinator.is_group_loading(world.group_id)
            if ready and group_is_empty(coordinator, world.group_id):
                then()
            elif world.queue.now_ms - started > EMPTY_WAIT_MS:
                world.note(f"   convert #{number}: the group did not empty; members come back")
                rejoin()
            else:
                world.queue.after(EMPTY_POLL_MS, "convert waits for an empty group", poll)

        world.queue.after(EMPTY_POLL_MS, "convert waits for an empty group", poll)

    when_empty(probe)


def group_is_empty(coordinator: GroupCoordinator, group_id: str) -> bool:
    """Empty as a conversion needs it: no members, and (classic) nobody half-joined."""
    classic = coordinator.group(group_id)
    if classic is not None and classic.state is not GroupState.DEAD:
        return classic.state is GroupState.EMPTY and not classic.pending_join_members
    group = coordinator.consumer_group(group_id)
    return group is None or not group.members


def check_answer(api: str, had_members: bool, response: Any) -> str | None:
    """A violation message when a probe that found members was not refused as it must be."""
    if not had_members:
        return None
    wanted = REFUSAL[api]
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED and api == "join_group":
        # With KIP-848 online migration the coordinator first hands a classic joiner an id
        # (the probe then goes away): not a member yet.
        return None
    if response.error_code in NOT_SERVED:
        # The coordinator was not ready (restarting, loading): not let in, nor refused as a
        # group of the other type; the probe goes away.
        return None
    if response.error_code != wanted:
        return f"{api} of another protocol's member answered {response.error_code}, not {int(wanted)}, by a group with members"
    return None
