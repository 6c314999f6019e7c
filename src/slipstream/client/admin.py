"""Admin operations over the wire: topics, configs, offsets, consumer groups.

Works against any Kafka-compatible broker: every request goes out at the highest
version both sides support, and group requests are routed to the group's
coordinator (FindCoordinator, cached per group; rediscovered with bounded
backoff on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
COORDINATOR_LOAD_IN_PROGRESS).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..protocol.acl_types import AclBinding
from ..protocol.apis.consumer_group_describe import SPEC as CONSUMER_GROUP_DESCRIBE
from ..protocol.apis.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponseAssignment,
)
from ..protocol.apis.create_topics import (
    SPEC as CREATE_TOPICS,
)
from ..protocol.apis.create_topics import (
    CreateTopicsRequest,
    CreateTopicsRequestConfig,
    CreateTopicsRequestTopic,
)
from ..protocol.apis.delete_groups import SPEC as DELETE_GROUPS
from ..protocol.apis.delete_groups import DeleteGroupsRequest
from ..protocol.apis.delete_topics import (
    SPEC as DELETE_TOPICS,
)
from ..protocol.apis.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsRequestTopic,
)
from ..protocol.apis.describe_configs import (
    SPEC as DESCRIBE_CONFIGS,
)
from ..protocol.apis.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsRequestResource,
)
from ..protocol.apis.describe_groups import SPEC as DESCRIBE_GROUPS
from ..protocol.apis.describe_groups import DescribeGroupsRequest
from ..protocol.apis.find_coordinator import SPEC as FIND_COORDINATOR
from ..protocol.apis.find_coordinator import FindCoordinatorRequest
from ..protocol.apis.list_groups import SPEC as LIST_GROUPS
from ..protocol.apis.list_groups import ListGroupsRequest
from ..protocol.apis.list_offsets import (
    SPEC as LIST_OFFSETS,
)
from ..protocol.apis.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsRequestPartition,
    ListOffsetsRequestTopic,
)
from ..protocol.apis.offset_commit import SPEC as OFFSET_COMMIT
from ..protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from ..protocol.apis.offset_delete import SPEC as OFFSET_DELETE
from ..protocol.apis.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from ..protocol.apis.offset_fetch import SPEC as OFFSET_FETCH
from ..protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from ..protocol.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from ..protocol.errors import ErrorCode, KafkaError, info
from ..protocol.errors import name as error_name
from ..protocol.primitives import DecodeError
from . import acl_admin
from .acl_admin import AclBindingFilter
from .cluster import BrokerNode, Cluster, TopicInfo
from .connection import BrokerConnection, ConnectionClosed, UnsupportedApi
from .offsets import NAMED_TOPICS_MAX_VERSION
from .retry import DeadlineBackoff
from .security import ClientSecurity

EARLIEST = -2
LATEST = -1
RESOURCE_TOPIC = 2


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    partition: int
    leader: int
    earliest: int
    latest: int


# ====================================================================== consumer groups

TopicPartition = tuple[str, int]

# Errors that mean "ask (another) coordinator again after a pause".
_COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
_FIND_RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_LEADER_RETRIABLE = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)
KEY_TYPE_GROUP = 0
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


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    # None: the group has no committed offset for the partition.
    committed: int | None
    # None: the log end offset could not be read (e.g. the topic was deleted).
    log_end: int | None
    # log_end - committed, None when either is unknown.
    lag: int | None
    member_id: str | None = None
    client_id: str | None = None
    host: str | None = None


def _group_error(group_id: str, code: int, what: str) -> KafkaError:
    hints = {
        ErrorCode.NON_EMPTY_GROUP: "the group still has active members",
        ErrorCode.GROUP_ID_NOT_FOUND: "the group does not exist",
        ErrorCode.UNKNOWN_MEMBER_ID: (
            "the group has active members; committed offsets can only be changed while it is Empty"
        ),
        ErrorCode.ILLEGAL_GENERATION: (
            "the group has active members; committed offsets can only be changed while it is Empty"
        ),
        ErrorCode.REBALANCE_IN_PROGRESS: "the group is rebalancing",
        ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "the live group still subscribes to the topic",
        ErrorCode.COORDINATOR_NOT_AVAILABLE: "no coordinator answered in time",
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "the coordinator is still loading",
    }
    detail = hints.get(code) or info(code).message
    return KafkaError(code, f"{what} for group {group_id!r} failed: {detail}")


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


class Admin:
    """Admin operations: ``Admin("host:9092")`` (or a list of servers), like every client.

    ::

        async with Admin("localhost:9092", client_id="ops") as admin:
            await admin.create_topic("orders", 3)

    Passing a :class:`Cluster` you made (the older form) still works; the admin then
    leaves closing it to you. Built from a bootstrap string, it owns its connections and
    ``close()`` (or leaving the ``async with``) closes them.

    Group calls retry coordinator errors with exponential backoff from
    ``retry_backoff_s`` up to ``retry_backoff_max_s``, for at most
    ``retry_timeout_s`` in all; then the last error is raised. ``clock`` and ``sleep``
    time those retries (tests pass a manual clock).
    """

    def __init__(
        self,
        bootstrap_servers: Cluster | str | list[str],
        *,
        client_id: str = "slipstream-admin",
        request_timeout_ms: float = 30_000,
        retry_backoff_s: float = 0.05,
        retry_backoff_max_s: float = 1.0,
        retry_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **security: Any,
    ) -> None:
        if isinstance(bootstrap_servers, Cluster):
            cluster = bootstrap_servers
            self._owns_cluster = False
        else:
            # security_protocol, sasl_mechanism, sasl_username, ... as for the producer.
            cluster = Cluster(
                bootstrap_servers, client_id=client_id, request_timeout_s=request_timeout_ms / 1000,
                security=ClientSecurity(**security),
            )
            self._owns_cluster = True
        self.cluster = cluster
        self.retry_backoff_s = retry_backoff_s
        self.retry_backoff_max_s = retry_backoff_max_s
        self.retry_timeout_s = retry_timeout_s
        self.clock = clock
        self.sleep = sleep
        self._coordinators: dict[str, BrokerNode] = {}

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections, if this admin made them (not a Cluster passed in)."""
        if self._owns_cluster:
            await self.cluster.close()

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        """Create ACLs (needs Alter on the cluster); the first refused one raises."""
        await acl_admin.create_acls(self.cluster, bindings)

    async def describe_acls(self, acl_filter: AclBindingFilter = acl_admin.ANY_ACL) -> list[AclBinding]:
        """The ACLs matching the filter (every ACL by default; needs Describe on the cluster)."""
        return await acl_admin.describe_acls(self.cluster, acl_filter)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        """Delete the ACLs matching any filter (needs Alter on the cluster); returns them."""
        return await acl_admin.delete_acls(self.cluster, filters)

    async def create_topic(
        self, name: str, partitions: int = -1, replication_factor: int = -1,
        configs: dict[str, str] | None = None, *, timeout_ms: int = 30000,
    ) -> None:
        conn = await self.cluster.controller_connection()
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequestTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=[CreateTopicsRequestConfig(name=k, value=v) for k, v in (configs or {}).items()],
                )
            ],
            timeout_ms=timeout_ms,
        )
        response = await conn.request(CREATE_TOPICS, request)
        for topic in response.topics:
            if topic.error_code:
                raise KafkaError(topic.error_code, topic.error_message)

    async def delete_topic(self, name: str, *, timeout_ms: int = 30000) -> None:
        conn = await self.cluster.controller_connection()
        request = DeleteTopicsRequest(
            topics=[DeleteTopicsRequestTopic(name=name)], topic_names=[name], timeout_ms=timeout_ms
        )
        response = await conn.request(DELETE_TOPICS, request)
        for topic in response.responses:
            if topic.error_code:
                raise KafkaError(topic.error_code, topic.error_message)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        topics = await self.cluster.refresh_metadata(None)
        return sorted(
            (t for t in topics.values() if include_internal or not t.is_internal), key=lambda t: t.name
        )

    async def describe_topic(self, name: str) -> TopicInfo:
        topics = await self.cluster.refresh_metadata([name])
        info = topics.get(name)
        if info is None or info.error_code:
            raise KafkaError(info.error_code if info else 3, f"topic {name!r}: cannot describe")
        return info

    async def topic_configs(self, name: str) -> dict[str, str | None]:
        conn = await self.cluster.any_connection()
        request = DescribeConfigsRequest(
            resources=[DescribeConfigsRequestResource(resource_type=RESOURCE_TOPIC, resource_name=name, configuration_keys=None)]
        )
        response = await conn.request(DESCRIBE_CONFIGS, request)
        out: dict[str, str | None] = {}
        for result in response.results:
            if result.error_code:
                raise KafkaError(result.error_code, result.error_message)
            for entry in result.configs:
                out[entry.name] = entry.value
        return out

    async def list_offsets(self, topic: str, partitions: list[int], timestamp: int) -> dict[int, tuple[int, int]]:
        """partition -> (offset, timestamp) for a ListOffsets spec (-1 latest, -2 earliest, or a time)."""
        out: dict[int, tuple[int, int]] = {}
        by_leader: dict[int, list[int]] = {}
        info = self.cluster.topics.get(topic) or (await self.describe_topic(topic))
        for p in partitions:
            by_leader.setdefault(info.leaders.get(p, -1), []).append(p)
        for leader, parts in by_leader.items():
            conn = await self.cluster.connection(leader)
            request = ListOffsetsRequest(
                replica_id=-1,
                # v10+: how long the broker may wait on tiered storage.
                timeout_ms=int(conn.request_timeout_s * 1000),
                topics=[
                    ListOffsetsRequestTopic(
                        name=topic,
                        partitions=[ListOffsetsRequestPartition(partition_index=p, timestamp=timestamp) for p in parts],
                    )
                ],
            )
            response = await conn.request(LIST_OFFSETS, request)
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise KafkaError(p.error_code, f"ListOffsets {topic}-{p.partition_index}")
                    out[p.partition_index] = (p.offset, p.timestamp)
        return out

    async def partition_offsets(self, name: str) -> list[PartitionOffsets]:
        info = await self.describe_topic(name)
        parts = sorted(info.leaders)
        earliest = await self.list_offsets(name, parts, EARLIEST)
        latest = await self.list_offsets(name, parts, LATEST)
        return [PartitionOffsets(p, info.leaders[p], earliest[p][0], latest[p][0]) for p in parts]

    # ================================================================== consumer groups

    def _backoff(self) -> DeadlineBackoff:
        return DeadlineBackoff(
            self.retry_backoff_s, self.retry_backoff_max_s, self.retry_timeout_s, clock=self.clock, sleep=self.sleep
        )

    # ------------------------------------------------------------------ coordinator discovery

    async def find_coordinator(self, group_id: str) -> BrokerNode:
        """The broker coordinating ``group_id`` (FindCoordinator; cached until it stops answering)."""
        return (await self.find_coordinators([group_id]))[group_id]

    async def find_coordinators(self, group_ids: Iterable[str]) -> dict[str, BrokerNode]:
        """Coordinators of several groups: one batched request on v4+, one per group below."""
        wanted = list(dict.fromkeys(group_ids))
        out = {g: self._coordinators[g] for g in wanted if g in self._coordinators}
        todo = [g for g in wanted if g not in out]
        backoff = self._backoff()
        while todo:
            # No bootstrap server reachable: fail now. A connection lost mid-request: retry,
            # any_connection() reconnects (to another bootstrap server if need be).
            conn = await self.cluster.any_connection()
            try:
                answers = await self._find_coordinator_request(conn, todo)
            except (ConnectionClosed, OSError) as exc:
                await backoff.wait(KafkaError(ErrorCode.NETWORK_EXCEPTION, f"FindCoordinator: {exc}"))
                continue
            retry: list[str] = []
            last: KafkaError | None = None
            for group_id in todo:
                code, message, node = answers.get(
                    group_id, (ErrorCode.COORDINATOR_NOT_AVAILABLE, "no answer for this group", None)
                )
                if node is not None and node.node_id >= 0:
                    self._coordinators[group_id] = out[group_id] = node
                elif code in _FIND_RETRIABLE or not code:
                    retry.append(group_id)
                    last = _group_error(group_id, code or ErrorCode.COORDINATOR_NOT_AVAILABLE, "FindCoordinator")
                else:
                    raise KafkaError(code, f"FindCoordinator for group {group_id!r}: {message or info(code).message}")
            todo = retry
            if todo:
                assert last is not None
                await backoff.wait(last)
        return out

    async def _find_coordinator_request(
        self, conn: BrokerConnection, group_ids: list[str]
    ) -> dict[str, tuple[int, str | None, BrokerNode | None]]:
        version = conn.version_for(FIND_COORDINATOR)
        answers: dict[str, tuple[int, str | None, BrokerNode | None]] = {}
        if version >= 4:
            response = await conn.request(
                FIND_COORDINATOR,
                FindCoordinatorRequest(key_type=KEY_TYPE_GROUP, coordinator_keys=group_ids),
                version=version,
            )
            for c in response.coordinators:
                node = BrokerNode(c.node_id, c.host, c.port) if not c.error_code else None
                answers[c.key] = (c.error_code, c.error_message, node)
            return answers
        for group_id in group_ids:
            response = await conn.request(
                FIND_COORDINATOR,
                FindCoordinatorRequest(key=group_id, key_type=KEY_TYPE_GROUP),
                version=version,
            )
            node = None
            if not response.error_code:
                node = BrokerNode(response.node_id, response.host, response.port)
            message = response.error_message if version >= 1 else None
            answers[group_id] = (response.error_code, message, node)
        return answers

    async def _node_connection(self, node: BrokerNode) -> BrokerConnection:
        known = self.cluster.brokers.get(node.node_id)
        if known is None or (known.host, known.port) != (node.host, node.port):
            self.cluster.brokers[node.node_id] = node
        return await self.cluster.connection(node.node_id)

    async def _per_group(
        self,
        group_ids: Iterable[str],
        what: str,
        send: Callable[[BrokerConnection, list[str]], Awaitable[dict[str, tuple[int, Any]]]],
    ) -> dict[str, tuple[int, Any, BrokerNode]]:
        """Run ``send`` against each group's coordinator, retrying coordinator errors.

        ``send(conn, ids)`` answers ``{group: (error_code, value)}``; groups whose
        code means "wrong/unavailable coordinator" are rediscovered and resent
        with backoff until ``retry_timeout_s``. Other codes are returned as is.
        """
        todo = list(dict.fromkeys(group_ids))
        results: dict[str, tuple[int, Any, BrokerNode]] = {}
        backoff = self._backoff()
        while todo:
            coordinators = await self.find_coordinators(todo)
            by_node: dict[BrokerNode, list[str]] = {}
            for group_id in todo:
                by_node.setdefault(coordinators[group_id], []).append(group_id)
            retry: list[str] = []
            last: BaseException | None = None
            for node, ids in by_node.items():
                try:
                    conn = await self._node_connection(node)
                    answers = await send(conn, ids)
                except KafkaError as exc:
                    if exc.code not in _COORDINATOR_RETRIABLE:
                        raise
                    answers = {g: (exc.code, None) for g in ids}
                except (ConnectionClosed, OSError) as exc:
                    for group_id in ids:
                        self._coordinators.pop(group_id, None)
                    retry.extend(ids)
                    last = KafkaError(
                        ErrorCode.NETWORK_EXCEPTION,
                        f"{what}: coordinator {node.host}:{node.port} unreachable: {exc}",
                    )
                    continue
                for group_id in ids:
                    code, value = answers.get(group_id, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
                    if code in _COORDINATOR_RETRIABLE:
                        self._coordinators.pop(group_id, None)
                        retry.append(group_id)
                        last = _group_error(group_id, code, what)
                    else:
                        results[group_id] = (code, value, node)
            todo = retry
            if todo:
                assert last is not None
                await backoff.wait(last)
        return results

    # ------------------------------------------------------------------ list / describe / delete

    async def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        """Every group of every broker (ListGroups to each), sorted by id.

        ``states`` ("Stable", "Empty", ...) needs ListGroups v4 and ``types``
        ("classic", "consumer") v5 on the brokers; a broker without them raises
        UNSUPPORTED_VERSION rather than answering unfiltered.
        """
        states_filter = list(states or [])
        types_filter = list(types or [])
        await self.cluster.refresh_metadata([])
        node_ids: list[int | None] = [*sorted(self.cluster.brokers)] or [None]
        found: dict[str, GroupListing] = {}
        for node_id in node_ids:
            backoff = self._backoff()
            while True:
                conn = await (self.cluster.any_connection() if node_id is None else self.cluster.connection(node_id))
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
                if response.error_code in _COORDINATOR_RETRIABLE:
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

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """DescribeGroups, in the order asked. A group the coordinator does not know is "Dead"."""
        ids = list(dict.fromkeys(group_ids))

        async def send(conn: BrokerConnection, batch: list[str]) -> dict[str, tuple[int, Any]]:
            response = await conn.request(DESCRIBE_GROUPS, DescribeGroupsRequest(groups=batch))
            return {g.group_id: (g.error_code, g) for g in response.groups}

        results = await self._per_group(ids, "DescribeGroups", send)
        out = []
        for group_id in ids:
            code, g, node = results[group_id]
            if code == ErrorCode.GROUP_ID_NOT_FOUND:
                # DescribeGroups v6+ (KIP-1043) says what v0-5 said with state "Dead".
                out.append(GroupDescription(group_id, STATE_DEAD, "", "", [], coordinator=node))
                continue
            if code:
                raise _group_error(group_id, code, "DescribeGroups")
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

    async def describe_group(self, group_id: str) -> GroupDescription:
        return (await self.describe_groups([group_id]))[0]

    async def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> list[ConsumerGroupDescription | None]:
        """ConsumerGroupDescribe, in the order asked: consumer (KIP-848) groups with their
        epochs and target assignments; None for a group that is not one (a classic group,
        or none at all). Raises UnsupportedApi when the coordinator does not serve it."""
        ids = list(dict.fromkeys(group_ids))

        async def send(conn: BrokerConnection, batch: list[str]) -> dict[str, tuple[int, Any]]:
            response = await conn.request(
                CONSUMER_GROUP_DESCRIBE,
                ConsumerGroupDescribeRequest(group_ids=batch, include_authorized_operations=False),
            )
            return {g.group_id: (g.error_code, g) for g in response.groups}

        results = await self._per_group(ids, "ConsumerGroupDescribe", send)
        out: list[ConsumerGroupDescription | None] = []
        for group_id in ids:
            code, g, node = results[group_id]
            if code == ErrorCode.GROUP_ID_NOT_FOUND:
                out.append(None)
                continue
            if code:
                raise _group_error(group_id, code, "ConsumerGroupDescribe")
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

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """DeleteGroups: every group is tried; the first failure is then raised.

        Kafka deletes only Empty groups (NON_EMPTY_GROUP otherwise) and answers
        GROUP_ID_NOT_FOUND for a group it does not know.
        """
        ids = list(dict.fromkeys(group_ids))

        async def send(conn: BrokerConnection, batch: list[str]) -> dict[str, tuple[int, Any]]:
            response = await conn.request(DELETE_GROUPS, DeleteGroupsRequest(groups_names=batch))
            return {r.group_id: (r.error_code, None) for r in response.results}

        results = await self._per_group(ids, "DeleteGroups", send)
        failed = [(g, results[g][0]) for g in ids if results[g][0]]
        for group_id in ids:
            if not results[group_id][0]:
                self._coordinators.pop(group_id, None)
        if failed:
            group_id, code = failed[0]
            error = _group_error(group_id, code, "DeleteGroups")
            if len(failed) > 1:
                others = ", ".join(f"{g!r} ({error_name(c)})" for g, c in failed[1:])
                error = KafkaError(code, f"{error.message}; also failed: {others}")
            raise error

    # ------------------------------------------------------------------ committed offsets

    async def list_committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """OffsetFetch: the group's committed offsets (all of them when ``partitions`` is None).

        Partitions without a committed offset are left out of the answer.
        """
        wanted = None if partitions is None else sorted(set(partitions))
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted or []:
            by_topic.setdefault(topic, []).append(partition)

        async def send(conn: BrokerConnection, batch: list[str]) -> dict[str, tuple[int, Any]]:
            version = conn.version_for(OFFSET_FETCH, NAMED_TOPICS_MAX_VERSION)
            if wanted is None and version < 2:
                raise UnsupportedApi(f"{conn.address} serves OffsetFetch v{version}: fetching all offsets needs v2")
            if version >= 8:
                request = OffsetFetchRequest(
                    groups=[
                        OffsetFetchRequestGroup(
                            group_id=group_id,
                            topics=None
                            if wanted is None
                            else [OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
                        )
                    ],
                    require_stable=False,
                )
                response = await conn.request(OFFSET_FETCH, request, version=version)
                group = next((g for g in response.groups if g.group_id == group_id), None)
                if group is None:
                    return {group_id: (ErrorCode.UNKNOWN_SERVER_ERROR, None)}
                return {group_id: (group.error_code, group.topics)}
            request = OffsetFetchRequest(
                group_id=group_id,
                topics=None
                if wanted is None
                else [OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            )
            response = await conn.request(OFFSET_FETCH, request, version=version)
            code = response.error_code if version >= 2 else 0
            if not code:
                # Before v2 a group-level error is repeated on every partition.
                codes = {p.error_code for t in response.topics for p in t.partitions}
                if len(codes) == 1 and codes & _COORDINATOR_RETRIABLE:
                    code = codes.pop()
            return {group_id: (code, response.topics)}

        code, topics, _ = (await self._per_group([group_id], "OffsetFetch", send))[group_id]
        if code:
            raise _group_error(group_id, code, "OffsetFetch")
        out: dict[TopicPartition, CommittedOffset] = {}
        for t in topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(
                        p.error_code,
                        f"OffsetFetch for group {group_id!r}, {t.name}-{p.partition_index}: {info(p.error_code).message}",
                    )
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = CommittedOffset(
                        p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1)
                    )
        return dict(sorted(out.items()))

    async def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, metadata: str = ""
    ) -> None:
        """Standalone OffsetCommit (generation -1, no member): Kafka takes it only while the
        group has no members (Empty, or unknown: then a group is created for the offsets)."""
        if not offsets:
            return
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            if offset < 0:
                raise ValueError(f"offset for {topic}-{partition} must be >= 0, not {offset}")
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_metadata=metadata
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

        async def send(conn: BrokerConnection, batch: list[str]) -> dict[str, tuple[int, Any]]:
            response = await conn.request(OFFSET_COMMIT, request, max_version=NAMED_TOPICS_MAX_VERSION)
            codes = {p.error_code for t in response.topics for p in t.partitions}
            retriable = codes & _COORDINATOR_RETRIABLE
            return {group_id: (min(retriable) if retriable else 0, response)}

        _, response, _ = (await self._per_group([group_id], "OffsetCommit", send))[group_id]
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    error = _group_error(group_id, p.error_code, f"OffsetCommit of {t.name}-{p.partition_index}")
                    raise error

    async def delete_committed_offsets(
        self, group_id: str, topic: str, partitions: Iterable[int] | None = None
    ) -> None:
        """OffsetDelete for ``topic`` (all its partitions when ``partitions`` is None).

        Kafka refuses (GROUP_SUBSCRIBED_TO_TOPIC) while a live consumer group subscribes to it.
        """
        if partitions is None:
            parts = sorted((await self.describe_topic(topic)).leaders)
        else:
            parts = sorted(set(partitions))
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                OffsetDeleteRequestTopic(
                    name=topic, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in parts]
                )
            ],
        )

        async def send(conn: BrokerConnection, batch: list[str]) -> dict[str, tuple[int, Any]]:
            response = await conn.request(OFFSET_DELETE, request)
            return {group_id: (response.error_code, response)}

        code, response, _ = (await self._per_group([group_id], "OffsetDelete", send))[group_id]
        if code:
            raise _group_error(group_id, code, "OffsetDelete")
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise _group_error(group_id, p.error_code, f"OffsetDelete of {t.name}-{p.partition_index}")

    # ------------------------------------------------------------------ log offsets and lag

    async def log_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int = LATEST, *, isolation_level: int = 0
    ) -> dict[TopicPartition, int | KafkaError]:
        """ListOffsets for many partitions at once, routed to their leaders.

        ``timestamp``: LATEST (-1), EARLIEST (-2) or a time in ms (the first
        offset whose record timestamp is at or after it; -1 when none is).
        Partitions that fail are answered with their KafkaError, not raised.
        Leader changes are retried after a metadata refresh. ``isolation_level=1``
        (read_committed): LATEST is the last stable offset.
        """
        todo = sorted(set(partitions))
        out: dict[TopicPartition, int | KafkaError] = {}
        backoff = self._backoff()
        refresh = True
        while todo:
            topics = sorted({t for t, _ in todo})
            if refresh or any(t not in self.cluster.topics for t in topics):
                await self.cluster.refresh_metadata(topics)
            by_leader: dict[int, dict[str, list[int]]] = {}
            for topic, partition in todo:
                topic_info = self.cluster.topics.get(topic)
                if topic_info is None:
                    out[(topic, partition)] = KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
                    )
                    continue
                leader = topic_info.leaders.get(partition)
                if leader is None:
                    out[(topic, partition)] = KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} has no partition {partition}"
                    )
                    continue
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
            retry: list[TopicPartition] = []
            last: KafkaError | None = None
            for leader, parts in by_leader.items():
                wanted = [(t, p) for t, ps in parts.items() for p in ps]
                try:
                    if leader < 0:
                        raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, "no leader")
                    conn = await self.cluster.connection(leader)
                    response = await conn.request(
                        LIST_OFFSETS,
                        ListOffsetsRequest(
                            replica_id=-1,
                            # v10+: how long the broker may wait on tiered storage.
                            timeout_ms=int(conn.request_timeout_s * 1000),
                            isolation_level=isolation_level,
                            topics=[
                                ListOffsetsRequestTopic(
                                    name=t,
                                    partitions=[
                                        ListOffsetsRequestPartition(
                                            partition_index=p, timestamp=timestamp, max_num_offsets=1
                                        )
                                        for p in ps
                                    ],
                                )
                                for t, ps in parts.items()
                            ],
                        ),
                    )
                except (KafkaError, ConnectionClosed, OSError) as exc:
                    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                    if code in _LEADER_RETRIABLE or code == ErrorCode.NETWORK_EXCEPTION:
                        retry.extend(wanted)
                        last = KafkaError(code, f"ListOffsets to broker {leader}: {exc}")
                        continue
                    raise
                answered = set()
                for t in response.topics:
                    for p in t.partitions:
                        tp = (t.name, p.partition_index)
                        answered.add(tp)
                        if p.error_code in _LEADER_RETRIABLE:
                            retry.append(tp)
                            last = KafkaError(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                        elif p.error_code:
                            out[tp] = KafkaError(
                                p.error_code, f"ListOffsets {t.name}-{p.partition_index}: {info(p.error_code).message}"
                            )
                        elif p.offset == -1 and p.old_style_offsets:  # v0
                            out[tp] = p.old_style_offsets[0]
                        else:
                            out[tp] = p.offset
                for tp in wanted:
                    if tp not in answered:
                        out[tp] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets: no answer for {tp[0]}-{tp[1]}")
            todo = sorted(set(retry))
            refresh = True
            if todo:
                assert last is not None
                await backoff.wait(last)
        return out

    async def group_lag(self, group_id: str) -> list[PartitionLag]:
        """Per partition the group has a committed offset for or has assigned: committed offset,
        log end offset (ListOffsets latest), lag and owner, sorted by topic and partition."""
        description = await self.describe_group(group_id)
        committed = await self.list_committed_offsets(group_id)
        owners: dict[TopicPartition, MemberDescription] = {}
        for member in description.members:
            for topic, parts in member.assignment.items():
                for partition in parts:
                    owners[(topic, partition)] = member
        tps = sorted(set(committed) | set(owners))
        ends = await self.log_offsets(tps, LATEST) if tps else {}
        out = []
        for tp in tps:
            c = committed.get(tp)
            end = ends.get(tp)
            log_end = end if isinstance(end, int) and end >= 0 else None
            offset = c.offset if c is not None else None
            owner = owners.get(tp)
            out.append(
                PartitionLag(
                    topic=tp[0],
                    partition=tp[1],
                    committed=offset,
                    log_end=log_end,
                    lag=log_end - offset if log_end is not None and offset is not None else None,
                    member_id=owner.member_id if owner else None,
                    client_id=owner.client_id if owner else None,
                    host=owner.host if owner else None,
                )
            )
        return out
