"""Metadata (key 3). Served v0-12.

One node leads every partition, or, in a cluster (storage postgres), the live broker
holding the partition's lease (leader epoch = lease epoch; LEADER_NOT_AVAILABLE while
none does). In a cluster the answer is for the listener the request came in on, as
Kafka's: the brokers listed are those with a listener of that name, at its endpoint; a
partition whose leader has none is LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before)
with no leader. Topics: null (v1+) or an empty list in v0 means
all topics; otherwise unknown topics are auto-created when the broker allows it
and the request does (allow_auto_topic_creation, v4+; implied before v4).
v10+ carries topic ids; v12 lets a topic be named by id alone (name null).
Authorized-operations fields answer "not requested" (-2147483648) unless an authorizer
is configured, which answers them when asked (v8+).
With an authorizer (Kafka's rules): the all-topics form lists only topics the principal
may Describe; a named topic it may not Describe is TOPIC_AUTHORIZATION_FAILED (nothing
else said about it, existing or not); auto-creating one needs Create on the cluster or
on the topic, else TOPIC_AUTHORIZATION_FAILED. A topic asked by id without Describe is
TOPIC_AUTHORIZATION_FAILED with no name.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...protocol.acl_types import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from ...protocol.apis.metadata import (
    SPEC,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.primitives import ZERO_UUID
from ..request_context import RequestContext
from ..security.acl import CLUSTER_NAME, Operation, ResourceType
from ..state import BrokerState
from ..topics import Topic, check_topic_name

if TYPE_CHECKING:
    from ..cluster.view import ClusterView  # (a postgres broker's only)

MIN_VERSION = 0
MAX_VERSION = 13

OPERATIONS_NOT_REQUESTED = -2147483648

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    state = ctx.state
    version = ctx.api_version
    node = state.config.node_id
    leaders = PartitionLeaders(
        node, state.cluster, ctx.listener,
        ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE,
    )  # fmt: skip
    topics: list[MetadataResponseTopic] = []
    if request.topics is None or (version == 0 and not request.topics):
        for topic in state.topics.topics.values():
            if ctx.topic_allowed(Operation.DESCRIBE, topic.name):
                topics.append(describe_topic(topic, leaders))
    else:
        allow_create = state.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
        for wanted in request.topics:
            topics.append(_authorized_lookup(ctx, wanted.name, wanted.topic_id, allow_create, leaders))
    host, port = ctx.advertised_endpoint()
    brokers = [MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)]
    controller = node
    if state.cluster is not None:
        brokers += [
            MetadataResponseBroker(node_id=other, host=other_host, port=other_port, rack=None)
            for other, other_host, other_port in state.cluster.others_on(ctx.listener)
        ]
        controller = min(b.node_id for b in brokers)
    cluster_operations = OPERATIONS_NOT_REQUESTED
    if ctx.authorizing and version >= 8:
        # With an authorizer, what was asked for is answered (without one: "not requested").
        if request.include_topic_authorized_operations:
            for described in topics:
                if not described.error_code and described.name is not None:
                    described.topic_authorized_operations = ctx.authorized_operations(
                        ResourceType.TOPIC, described.name, TOPIC_OPERATIONS
                    )
        if version <= 10 and request.include_cluster_authorized_operations:
            cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
    return MetadataResponse(
        brokers=brokers,
        cluster_id=state.cluster_id,
        controller_id=controller,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


@dataclass(frozen=True, slots=True)
class PartitionLeaders:
    """Who leads a partition, as told to a client of one listener."""

    node: int  # this broker
    cluster: ClusterView | None
    listener: str
    no_listener_code: int  # a leader without that listener: LISTENER_NOT_FOUND (v6+)

    def partition(self, topic: str, index: int) -> MetadataResponsePartition:
        code, leader, epoch = ErrorCode.NONE, self.node, 0
        if self.cluster is not None:
            code, leader, epoch = self.cluster.told_leader(topic, index, self.listener)
            if code == ErrorCode.LISTENER_NOT_FOUND:
                code = self.no_listener_code
        replicas = [leader] if leader >= 0 else []
        return MetadataResponsePartition(
            error_code=code,
            partition_index=index,
            leader_id=leader,
            leader_epoch=epoch,
            replica_nodes=replicas,
            isr_nodes=list(replicas),
            offline_replicas=[],
        )


def _authorized_lookup(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID, allow_create: bool, leaders: PartitionLeaders
) -> MetadataResponseTopic:
    state = ctx.state
    if not ctx.authorizing:
        return _lookup(state, name, topic_id, allow_create, leaders)
    if name is None:
        found = state.topics.by_id.get(topic_id)
        if found is not None and not ctx.topic_allowed(Operation.DESCRIBE, found.name):
            return MetadataResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=topic_id,
                topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
            )
        return _lookup(state, name, topic_id, allow_create, leaders)
    if not ctx.topic_allowed(Operation.DESCRIBE, name):
        return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if allow_create and state.topics.get(name) is None and not (
        ctx.authorized_cluster(Operation.CREATE) or ctx.topic_allowed(Operation.CREATE, name)
    ):
        return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return _lookup(state, name, topic_id, allow_create, leaders)


def _lookup(
    state: BrokerState, name: str | None, topic_id: uuid.UUID, allow_create: bool, leaders: PartitionLeaders
) -> MetadataResponseTopic:
    if name is None:
        by_id = state.topics.by_id.get(topic_id)
        if by_id is None:
            return MetadataResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id,
                topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
            )
        return describe_topic(by_id, leaders)
    topic = state.topics.get(name)
    if topic is None:
        try:
            check_topic_name(name)
        except KafkaError:
            return _error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if state.topics.being_created(name):
            # Its logs are still being made (__consumer_offsets at a fresh start): Kafka
            # answers a topic in creation this way, and clients retry.
            return _error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE)
        if not allow_create:
            return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            topic = state.topics.create(name, state.config.default_partitions)
            log.info("auto-created topic %s", name)
        except KafkaError as exc:
            return _error_topic(name, exc.code)
    return describe_topic(topic, leaders)


def _error_topic(name: str, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False,
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def describe_topic(topic: Topic, leaders: PartitionLeaders) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=[leaders.partition(topic.name, index) for index in range(len(topic.partitions))],
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
