"""A member of the *other* group protocol trying the same group id (``foreign_join``).

The broker refuses a non-empty group of the other type: a classic JoinGroup to a
consumer group with members gets INCONSISTENT_GROUP_PROTOCOL, a ConsumerGroupHeartbeat
to a classic group with members GROUP_ID_NOT_FOUND. An *empty* group changes type and
keeps its offsets. A probe sends one join; when it gets in, it leaves at once.

What the world checks (``World.request_started`` / ``answered``): a probe served while
the world's group had members must be refused with exactly that error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...coordinator import GroupCoordinator, GroupState
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

if TYPE_CHECKING:
    from .world import World

PROBE_PREFIX = "foreign-"
# The refusal each protocol's join must get from a non-empty group of the other type.
REFUSAL = {"join_group": ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "consumer_group_heartbeat": ErrorCode.GROUP_ID_NOT_FOUND}


def group_has_members(coordinator: GroupCoordinator, group_id: str, protocol: str) -> bool:
    """Whether the world's own group (of ``protocol``) has members right now."""
    if protocol == "classic":
        classic = coordinator.group(group_id)
        return classic is not None and classic.state is not GroupState.DEAD and bool(classic.members)
    group = coordinator.consumer_group(group_id)
    return group is not None and bool(group.members)


def send_probe(world: World, number: int, topics: tuple[str, ...]) -> None:
    owner = f"{PROBE_PREFIX}{number}"
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
                world.network.request(conn, api, 1, leave, lambda _r: world.network.close(conn, "probe done"),
                                      lambda _w: None, 5_000)
                return
            # A classic probe told MEMBER_ID_REQUIRED goes away: its pending id expires.
            world.network.close(conn, "probe done")

        world.network.request(conn, api, version, request, answered, lambda _w: None, 30_000)

    world.network.connect(owner, rng, connected, lambda _w: None)


def check_answer(api: str, had_members: bool, response: Any) -> str | None:
    """A violation message when a probe that found members was not refused as it must be."""
    if not had_members:
        return None
    wanted = REFUSAL[api]
    if response.error_code != wanted:
        return f"{api} of another protocol's member answered {response.error_code}, not {int(wanted)}, by a group with members"
    return None
