"""DescribeCluster (key 60). Served v0-1.

The admin client's cluster view (KIP-700): the cluster id, this node as the
controller and as the only broker, at its advertised host and port - or, in a
cluster over PostgreSQL, every live broker with a listener of the request's listener's
name, at that listener's endpoint (the lowest node id as "controller").
cluster_authorized_operations is always -2147483648 ("not provided"), as in
the Metadata answer: this broker has no authorizer.

v1 adds endpoint_type (KIP-919): this is a broker endpoint (1). A request for
controllers (2) is MISMATCHED_ENDPOINT_TYPE, any other type
UNSUPPORTED_ENDPOINT_TYPE, each with a message.
"""

from __future__ import annotations

from ...protocol.acl_types import CLUSTER_OPERATIONS
from ...protocol.apis.describe_cluster import (
    SPEC,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeClusterResponseBroker,
)
from ..request_context import RequestContext
from ..security.acl import CLUSTER_NAME, Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 1

ENDPOINT_BROKER = 1
ENDPOINT_CONTROLLER = 2
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115
OPERATIONS_NOT_PROVIDED = -2147483648
CLUSTER_AUTHORIZATION_FAILED = 31


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    state = ctx.state
    node = state.config.node_id
    host, port = ctx.advertised_endpoint()
    response = DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=ENDPOINT_BROKER,
        cluster_id=state.cluster_id,
        controller_id=node,
        brokers=[
            DescribeClusterResponseBroker(
                broker_id=node, host=host, port=port, rack=None
            )
        ],
        cluster_authorized_operations=OPERATIONS_NOT_PROVIDED,
    )
    if state.cluster is not None:  # the other live brokers over the same database
        response.brokers += [
            DescribeClusterResponseBroker(broker_id=other, host=other_host, port=other_port, rack=None)
            for other, other_host, other_port in state.cluster.others_on(ctx.listener)
        ]
        response.controller_id = min(b.broker_id for b in response.brokers)
    if ctx.authorizing and request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = ctx.authorized_operations(
            ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS
        )
    if not ctx.authorized_cluster(Operation.DESCRIBE):
        response.error_code = CLUSTER_AUTHORIZATION_FAILED
        response.error_message = "Describe on the cluster is not allowed"
        response.brokers = []
        response.controller_id = -1
        response.cluster_id = ""
        return response
    if ctx.api_version >= 1 and request.endpoint_type != ENDPOINT_BROKER:
        if request.endpoint_type == ENDPOINT_CONTROLLER:
            response.error_code = MISMATCHED_ENDPOINT_TYPE
            response.error_message = (
                "the request asked for controller endpoints (endpoint_type 2) but was sent "
                "to a broker endpoint; this single node serves only broker endpoints (1)"
            )
        else:
            response.error_code = UNSUPPORTED_ENDPOINT_TYPE
            response.error_message = (
                f"unsupported endpoint_type {request.endpoint_type}; use 1 (brokers)"
            )
        response.brokers = []
        response.controller_id = -1
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
