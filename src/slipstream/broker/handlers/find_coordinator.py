"""FindCoordinator (key 10). Served v0-6.

This node coordinates every group (key_type 0) and every transactional id
(key_type 1; asking creates ``__transaction_state``, as in Kafka). In a cluster the
coordinator is the leader of the key's ``__consumer_offsets`` (or
``__transaction_state``) partition, at its endpoint for the listener the request came in
on; COORDINATOR_NOT_AVAILABLE while it has none, or when it has no listener of that name
(as Kafka answers). Other key
types (2, share groups) answer INVALID_REQUEST. v4+ batches keys (coordinator_keys).
With an authorizer a key needs Describe on its group (else GROUP_AUTHORIZATION_FAILED) or
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka checks.
"""

from __future__ import annotations

from ...coordinator import OFFSETS_TOPIC, partition_for
from ...protocol.apis.find_coordinator import (
    SPEC,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from ...protocol.errors import ErrorCode
from ..internal_topics import TRANSACTION_STATE_TOPIC
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 6

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
_REFUSAL = "this broker coordinates consumer groups (key type 0) and transactions (key type 1) only"


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    state = ctx.state
    node = state.config.node_id
    host, port = ctx.advertised_endpoint()
    served = request.key_type in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION)
    keys = request.coordinator_keys if ctx.api_version >= 4 else [request.key]
    # Only a key the principal may describe has effects (as in Kafka, which checks first).
    allowed = [k for k in keys if served and not _denied(ctx, request.key_type, k)]
    if request.key_type == KEY_TYPE_TRANSACTION and allowed:
        ctx.transactions.ensure_topic()
    elif allowed:
        # Lookups hint that members are on their way (group.initial.rebalance.delay.ms).
        ctx.groups.note_coordinator_lookup(allowed, ctx.client_host)
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            denied = served and _denied(ctx, request.key_type, key)
            if denied:
                coordinators.append(
                    FindCoordinatorResponseCoordinator(
                        key=key, node_id=-1, host="", port=-1, error_code=denied, error_message=None
                    )
                )
                continue
            if not served:
                coordinators.append(
                    FindCoordinatorResponseCoordinator(
                        key=key, node_id=-1, host="", port=-1,
                        error_code=ErrorCode.INVALID_REQUEST, error_message=_REFUSAL,
                    )
                )
                continue
            code, node_id, key_host, key_port = _owner(ctx, request.key_type, key, node, host, port)
            coordinators.append(
                FindCoordinatorResponseCoordinator(
                    key=key, node_id=node_id, host=key_host, port=key_port, error_code=code,
                    error_message=None if code == 0 else "the coordinator is moving between brokers",
                )
            )
        return FindCoordinatorResponse(coordinators=coordinators)
    denied = served and _denied(ctx, request.key_type, request.key)
    if denied:
        return FindCoordinatorResponse(error_code=denied, error_message=None, node_id=-1, host="", port=-1)
    if not served:
        return FindCoordinatorResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message=_REFUSAL, node_id=-1, host="", port=-1
        )
    code, node, host, port = _owner(ctx, request.key_type, request.key, node, host, port)
    return FindCoordinatorResponse(
        error_code=code, error_message=None if code == 0 else "the coordinator is moving between brokers",
        node_id=node, host=host, port=port,
    )


def _owner(ctx: RequestContext, key_type: int, key: str, node: int, host: str, port: int) -> tuple[int, int, str, int]:
    """(error, node id, host, port) of the key's coordinator: this broker, or in a cluster
    the leader of the key's partition of the internal topic."""
    cluster = ctx.state.cluster
    if cluster is None:
        return ErrorCode.NONE, node, host, port
    if key_type == KEY_TYPE_GROUP:
        topic, partitions = OFFSETS_TOPIC, ctx.state.config.offsets_topic_partitions
    else:
        topic, partitions = TRANSACTION_STATE_TOPIC, ctx.state.config.transaction_state_log_num_partitions
    leader = cluster.leader(topic, partition_for(key, partitions))
    if leader is not None:
        if leader[0] == node:
            return ErrorCode.NONE, node, host, port
        endpoint = cluster.endpoint(leader[0], ctx.listener)
        if endpoint is not None:
            return ErrorCode.NONE, leader[0], *endpoint
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1


def _denied(ctx: RequestContext, key_type: int, key: str) -> int:
    """The authorization error for the key, or 0 when Describe on it is allowed."""
    if key_type == KEY_TYPE_TRANSACTION:
        allowed = ctx.authorized(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
        return 0 if allowed else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return 0 if ctx.group_allowed(Operation.DESCRIBE, key) else ErrorCode.GROUP_AUTHORIZATION_FAILED


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
