"""CreatePartitions (key 37). Served v0-3.

Raises a topic's partition count to ``count``; a count that is not larger than
the current one is INVALID_PARTITIONS (partitions are never removed). When
``assignments`` is given it must hold one replica list per new partition, and
on this single-node cluster each list must be exactly [this node]
(INVALID_REPLICA_ASSIGNMENT otherwise). A topic named twice in one request is
INVALID_REQUEST for each mention. ``validate_only`` checks without changing
anything. ``__consumer_offsets`` keeps its partition count: group placement
depends on it.

v1 only differs in throttling; v2 is flexible; v3 may answer
THROTTLING_QUOTA_EXCEEDED, which this broker never does.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from ...protocol.apis.create_partitions import (
    SPEC,
    CreatePartitionsRequest,
    CreatePartitionsRequestTopic,
    CreatePartitionsResponse,
    CreatePartitionsResponseTopic,
)
from ...protocol.errors import ErrorCode, KafkaError
from ..mutation_quota_check import QuotaCheck
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState
from ..topics import OFFSETS_TOPIC

MIN_VERSION = 0
MAX_VERSION = 3


# KIP-599: v3+ may be refused with THROTTLING_QUOTA_EXCEEDED (controller.mutation.rate).
STRICT_QUOTA_VERSION = 3


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    quota = QuotaCheck(ctx, strict=ctx.api_version >= STRICT_QUOTA_VERSION)
    for wanted in request.topics:
        out = CreatePartitionsResponseTopic(name=wanted.name, error_code=0, error_message=None)
        try:
            if counts[wanted.name] > 1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"topic {wanted.name!r} is listed more than once in one request",
                )
            if not ctx.topic_allowed(Operation.ALTER, wanted.name):
                # Alter on the topic, as Kafka checks (whether or not it exists).
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Alter on topic {wanted.name!r} is not allowed")
            _create(ctx.state, wanted, request.validate_only, quota)
        except KafkaError as exc:
            out.error_code = exc.code
            out.error_message = exc.message
        results.append(out)
        await asyncio.sleep(0)  # other connections between topics (each opens partitions)
    return CreatePartitionsResponse(throttle_time_ms=quota.throttle_ms(), results=results)


def _create(
    state: BrokerState, wanted: CreatePartitionsRequestTopic, validate_only: bool, quota: QuotaCheck
) -> None:
    name = wanted.name
    topic = state.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    if name == OFFSETS_TOPIC:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"the partition count of internal topic {name} cannot be changed: "
            "consumer groups are placed by it",
        )
    current = len(topic.partitions)
    if wanted.count <= current:
        if wanted.count == current:
            message = f"topic {name!r} already has {current} partitions"
        else:
            message = (
                f"topic {name!r} has {current} partitions, more than the requested {wanted.count}; "
                "partitions cannot be removed"
            )
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, message)
    if wanted.assignments is not None:
        node = state.config.node_id
        added = wanted.count - current
        if len(wanted.assignments) != added:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{len(wanted.assignments)} replica assignments given for {added} new partitions",
            )
        for index, assignment in enumerate(wanted.assignments, start=current):
            if assignment.broker_ids != [node]:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {index} is assigned to brokers {assignment.broker_ids}; "
                    f"this cluster has only node {node}",
                )
    if not validate_only:
        quota.admit(wanted.count - current)
    state.topics.add_partitions(name, wanted.count, validate_only=validate_only)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
