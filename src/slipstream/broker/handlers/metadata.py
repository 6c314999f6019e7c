"""Metadata (key 3). Served v0-12.

One node leads every partition. Topics: null (v1+) or an empty list in v0 means
all topics; otherwise unknown topics are auto-created when the broker allows it
and the request does (allow_auto_topic_creation, v4+; implied before v4).
v10+ carries topic ids; v12 lets a topic be named by id alone (name null).
Authorized-operations fields answer "not requested" (-2147483648).
"""

from __future__ import annotations

import logging
import uuid

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
from ..state import BrokerState
from ..topics import Topic, check_topic_name

MIN_VERSION = 0
MAX_VERSION = 13

OPERATIONS_NOT_REQUESTED = -2147483648

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    state = ctx.state
    version = ctx.api_version
    node = state.config.node_id
    topics: list[MetadataResponseTopic] = []
    if request.topics is None or (version == 0 and not request.topics):
        for topic in state.topics.topics.values():
            topics.append(describe_topic(topic, node))
    else:
        allow_create = state.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
        for wanted in request.topics:
            topics.append(_lookup(state, wanted.name, wanted.topic_id, allow_create, node))
    host, port = ctx.advertised_endpoint()
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=node, host=host, port=port, rack=None)],
        cluster_id=state.cluster_id,
        controller_id=node,
        topics=topics,
        cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def _lookup(
    state: BrokerState, name: str | None, topic_id: uuid.UUID, allow_create: bool, node: int
) -> MetadataResponseTopic:
    if name is None:
        by_id = state.topics.by_id.get(topic_id)
        if by_id is None:
            return MetadataResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id,
                topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
            )
        return describe_topic(by_id, node)
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
    return describe_topic(topic, node)


def _error_topic(name: str, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False,
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def describe_topic(topic: Topic, node: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=[
            MetadataResponsePartition(
                error_code=0,
                partition_index=index,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for index in range(len(topic.partitions))
        ],
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
