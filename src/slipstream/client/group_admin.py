"""Consumer groups over the wire: list, describe (classic and KIP-848 consumer groups), delete."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..protocol.apis.consumer_group_describe import SPEC as CONSUMER_GROUP_DESCRIBE
from ..protocol.apis.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponseAssignment,
)
from ..protocol.apis.delete_groups import SPEC as DELETE_GROUPS
from ..protocol.apis.delete_groups import DeleteGroupsRequest
from ..protocol.apis.describe_groups import SPEC as DESCRIBE_GROUPS
from ..protocol.apis.describe_groups import DescribeGroupsRequest
from ..protocol.apis.list_groups import SPEC as LIST_GROUPS
from ..protocol.apis.list_groups import ListGroupsRequest
from ..protocol.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from ..protocol.primitives import DecodeError
from .cluster import BrokerNode, Cluster
from .connection import BrokerConnection, UnsupportedApi
from .group_coordinators import COORDINATOR_RETRIABLE, GroupAnswers, GroupCoordinators, group_error
from .retry import DeadlineBackoff

STATE_DEAD = "Dead"
STATE_EMPTY = "Empty"


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    # None when the broker answers ListGroups below v4 (no state) / v5 (no type).
    state: str | None = None
    group_type: str | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    # topic -> sorted partitions; decoded only for protocol type "consumer".
    assignment: dict[str, list[int]]
    # Subscribed topics (consumer protocol; the coordinator sends metadata only
    # while the group is Stable), else None.
    subscription: list[str] | None
    metadata: bytes = b""
    raw_assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: BrokerNode | None = None

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == PROTOCOL_TYPE

    def owner(self, topic: str, partition: int) -> MemberDescription | None:
        for member in self.members:
            if partition in member.assignment.get(topic, ()):
                return member
        return None


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    """A member of a consumer (KIP-848) group, from ConsumerGroupDescribe."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    member_epoch: int
    subscribed_topics: list[str]
    subscribed_regex: str | None
    # topic -> sorted partitions: what the member owns now, and what the coordinator targets.
    assignment: dict[str, list[int]]
    target_assignment: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """A consumer (KIP-848) group: its epochs, assignor and members."""

    group_id: str
    state: str
    group_epoch: int
    target_assignment_epoch: int
    assignor: str
    members: list[ConsumerMemberDescription]
    coordinator: BrokerNode | None = None


def _named_assignment(assignment: ConsumerGroupDescribeResponseAssignment) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in assignment.topic_partitions}


def decode_member_assignment(data: bytes) -> dict[str, list[int]]:
    """topic -> sorted partitions of a consumer-protocol assignment; {} when empty or undecodable."""
    if not data:
        return {}
    try:
        _, assignment = decode_assignment(data)
    except (DecodeError, ValueError, IndexError, struct.error):
        return {}
    out: dict[str, list[int]] = {}
    for tp in assignment.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return {t: sorted(set(ps)) for t, ps in sorted(out.items())}


def _decode_subscription(data: bytes) -> list[str] | None:
    if not data:
        return None
    try:
        _, sub = decode_subscription(data)
    except (DecodeError, ValueError, IndexError, struct.error):
        return None
    return sorted(sub.topics)


async def list_groups(
    cluster: Cluster,
    new_backoff: Callable[[], DeadlineBackoff],
    states: Iterable[str] | None = None,
    types: Iterable[str] | None = None,
) -> list[GroupListing]:
    """Every group of every broker (ListGroups to each), sorted by id.

    ``states`` ("Stable", "Empty", ...) needs ListGroups v4 and ``types``
    ("classic", "consumer") v5 on the brokers; a broker without them raises
    UNSUPPORTED_VERSION rather than answering unfiltered.
    """
    states_filter = list(states or [])
    types_filter = list(types or [])
    await cluster.refresh_metadata([])
    node_ids: list[int | None] = [*sorted(cluster.brokers)] or [None]
    found: dict[str, GroupListing] = {}
    for node_id in node_ids:
        backoff = new_backoff()
        while True:
            conn = await (cluster.any_connection() if node_id is None else cluster.connection(node_id))
            version = conn.version_for(LIST_GROUPS)
            if states_filter and version < 4:
                raise UnsupportedApi(f"{conn.address} serves ListGroups v{version}: no state filter before v4")
            if types_filter and version < 5:
                raise UnsupportedApi(f"{conn.address} serves ListGroups v{version}: no type filter before v5")
            response = await conn.request(
                LIST_GROUPS,
                ListGroupsRequest(states_filter=states_filter, types_filter=types_filter),
                version=version,
            )
            if response.error_code in COORDINATOR_RETRIABLE:
                await backoff.wait(KafkaError(response.error_code, f"ListGroups on {conn.address}"))
                continue
            if response.error_code:
                raise KafkaError(response.error_code, f"ListGroups on {conn.address} failed")
            for g in response.groups:
                found[g.group_id] = GroupListing(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    state=g.group_state if version >= 4 else None,
                    group_type=g.group_type if version >= 5 else None,
                )
            break
    return [found[g] for g in sorted(found)]


async def describe_groups(coordinators: GroupCoordinators, group_ids: Iterable[str]) -> list[GroupDescription]:
    """DescribeGroups, in the order asked. A group the coordinator does not know is "Dead"."""
    ids = list(dict.fromkeys(group_ids))

    async def send(conn: BrokerConnection, batch: list[str]) -> GroupAnswers:
        response = await conn.request(DESCRIBE_GROUPS, DescribeGroupsRequest(groups=batch))
        return {g.group_id: (g.error_code, g) for g in response.groups}

    results = await coordinators.per_group(ids, "DescribeGroups", send)
    out = []
    for group_id in ids:
        code, g, node = results[group_id]
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            # DescribeGroups v6+ (KIP-1043) says what v0-5 said with state "Dead".
            out.append(GroupDescription(group_id, STATE_DEAD, "", "", [], coordinator=node))
            continue
        if code:
            raise group_error(group_id, code, "DescribeGroups")
        consumer = g.protocol_type == PROTOCOL_TYPE
        members = [
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                host=m.client_host,
                assignment=decode_member_assignment(bytes(m.member_assignment)) if consumer else {},
                subscription=_decode_subscription(bytes(m.member_metadata)) if consumer else None,
                metadata=bytes(m.member_metadata),
                raw_assignment=bytes(m.member_assignment),
            )
            for m in g.members
        ]
        out.append(
            GroupDescription(
                group_id=group_id,
                state=g.group_state,
                protocol_type=g.protocol_type,
                protocol=g.protocol_data,
                members=members,
                coordinator=node,
            )
        )
    return out


async def describe_consumer_groups(
    coordinators: GroupCoordinators, group_ids: Iterable[str]
) -> list[ConsumerGroupDescription | None]:
    """ConsumerGroupDescribe, in the order asked: consumer (KIP-848) groups with their
    epochs and target assignments; None for a group that is not one (a classic group,
    or none at all). Raises UnsupportedApi when the coordinator does not serve it."""
    ids = list(dict.fromkeys(group_ids))

    async def send(conn: BrokerConnection, batch: list[str]) -> GroupAnswers:
        response = await conn.request(
            CONSUMER_GROUP_DESCRIBE,
            ConsumerGroupDescribeRequest(group_ids=batch, include_authorized_operations=False),
        )
        return {g.group_id: (g.error_code, g) for g in response.groups}

    results = await coordinators.per_group(ids, "ConsumerGroupDescribe", send)
    out: list[ConsumerGroupDescription | None] = []
    for group_id in ids:
        code, g, node = results[group_id]
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            out.append(None)
            continue
        if code:
            raise group_error(group_id, code, "ConsumerGroupDescribe")
        out.append(
            ConsumerGroupDescription(
                group_id=group_id,
                state=g.group_state,
                group_epoch=g.group_epoch,
                target_assignment_epoch=g.assignment_epoch,
                assignor=g.assignor_name,
                members=[
                    ConsumerMemberDescription(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        client_id=m.client_id,
                        host=m.client_host,
                        member_epoch=m.member_epoch,
                        subscribed_topics=list(m.subscribed_topic_names),
                        subscribed_regex=m.subscribed_topic_regex,
                        assignment=_named_assignment(m.assignment),
                        target_assignment=_named_assignment(m.target_assignment),
                    )
                    for m in g.members
                ],
                coordinator=node,
            )
        )
    return out


async def delete_groups(coordinators: GroupCoordinators, group_ids: Iterable[str]) -> None:
    """DeleteGroups: every group is tried; the first failure is then raised.

    Kafka deletes only Empty groups (NON_EMPTY_GROUP otherwise) and answers
    GROUP_ID_NOT_FOUND for a group it does not know.
    """
    ids = list(dict.fromkeys(group_ids))

    async def send(conn: BrokerConnection, batch: list[str]) -> GroupAnswers:
        response = await conn.request(DELETE_GROUPS, DeleteGroupsRequest(groups_names=batch))
        return {r.group_id: (r.error_code, None) for r in response.results}

    results = await coordinators.per_group(ids, "DeleteGroups", send)
    failed = [(g, results[g][0]) for g in ids if results[g][0]]
    for group_id in ids:
        if not results[group_id][0]:
            coordinators.forget(group_id)
    if failed:
        group_id, code = failed[0]
        error = group_error(group_id, code, "DeleteGroups")
        if len(failed) > 1:
            others = ", ".join(f"{g!r} ({error_name(c)})" for g, c in failed[1:])
            error = KafkaError(code, f"{error.message}; also failed: {others}")
        raise error
