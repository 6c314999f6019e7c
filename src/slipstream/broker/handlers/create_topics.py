"""CreateTopics (key 19). Served v2-7.

Single node: replication factor must be -1 (default) or 1, and a manual
assignment may only name this node. validate_only (v1+) checks without creating.
v5+ answers with the partition count, replication factor and effective configs;
v7 with the topic id.

Thousands of topics in one request are created in slices that yield to the event
loop (admin_slices.py); with ``controller.mutation.rate`` set, partitions created
count against the client's quota (mutation_quota.py): v6+ refuses topics once it is
in debt (THROTTLING_QUOTA_EXCEEDED), every version reports throttle_time_ms.
With an authorizer a topic needs Create on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED); its configs are answered only with DescribeConfigs on it
(else null, with topic_config_error_code TOPIC_AUTHORIZATION_FAILED), as Kafka does.
"""

from __future__ import annotations

from ...protocol.apis.create_topics import (
    SPEC,
    CreateTopicsRequest,
    CreateTopicsRequestTopic,
    CreateTopicsResponse,
    CreateTopicsResponseConfig,
    CreateTopicsResponseTopic,
)
from ...protocol.errors import ErrorCode, KafkaError
from ..admin_slices import Slices
from ..mutation_quota_check import QuotaCheck
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState
from . import config_views

MIN_VERSION = 2
MAX_VERSION = 7


STRICT_QUOTA_VERSION = 6


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    results = []
    seen: set[str] = set()
    slices = Slices(ctx.state.topics)
    quota = QuotaCheck(ctx, strict=ctx.api_version >= STRICT_QUOTA_VERSION)
    cluster_create = ctx.authorized_cluster(Operation.CREATE)
    for wanted in request.topics:
        out = CreateTopicsResponseTopic(name=wanted.name, configs=None)
        if wanted.name in seen:
            out.error_code = ErrorCode.INVALID_REQUEST
            out.error_message = f"topic {wanted.name!r} is listed twice in one request"
        else:
            seen.add(wanted.name)
            try:
                if not cluster_create and not ctx.topic_allowed(Operation.CREATE, wanted.name):
                    raise KafkaError(
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Create on topic {wanted.name!r} is not allowed"
                    )
                _create(ctx.state, wanted, request.validate_only, out, quota)
                slices.changed()
                if not ctx.topic_allowed(Operation.DESCRIBE_CONFIGS, wanted.name):
                    out.configs = None
                    out.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            except KafkaError as exc:
                out.error_code = exc.code
                out.error_message = exc.message
        results.append(out)
        await slices.step()
    slices.finish()
    return CreateTopicsResponse(throttle_time_ms=quota.throttle_ms(), topics=results)


def _create(
    state: BrokerState,
    wanted: CreateTopicsRequestTopic,
    validate_only: bool,
    out: CreateTopicsResponseTopic,
    quota: QuotaCheck,
) -> None:
    node = state.config.node_id
    partitions = wanted.num_partitions
    if wanted.assignments:
        if partitions != -1 or wanted.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "give either a replica assignment or num_partitions/replication_factor, not both",
            )
        indexes = sorted(a.partition_index for a in wanted.assignments)
        if indexes != list(range(len(indexes))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partition indexes must be 0..n-1")
        for a in wanted.assignments:
            if a.broker_ids != [node]:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {a.partition_index} names brokers {a.broker_ids}; this cluster has only node {node}",
                )
        partitions = len(indexes)
    elif partitions == -1:
        partitions = state.config.default_partitions
    if wanted.replication_factor not in (-1, 1):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {wanted.replication_factor} is larger than the 1 available broker",
        )
    overrides: dict[str, str] = {}
    for c in wanted.configs:
        if c.value is not None:
            overrides[c.name] = c.value
    if not validate_only:
        quota.admit(partitions)
    topic = state.topics.create(wanted.name, partitions, overrides, validate_only=validate_only, save=False)
    out.topic_id = topic.topic_id
    out.num_partitions = partitions
    out.replication_factor = 1
    out.configs = [
        CreateTopicsResponseConfig(
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=entry.source,
            is_sensitive=False,
        )
        for entry in config_views.topic_entries(state, topic)
    ]


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
