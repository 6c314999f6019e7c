"""DescribeCluster (key 60), versions 0-1; flexible from v0.

The admin client's cluster view (KIP-700): brokers, controller and cluster
id, plus cluster authorized operations when asked (-2147483648 = not
requested). v1 adds endpoint_type (1 brokers, 2 controllers; KIP-919) to
both sides and makes MISMATCHED_ENDPOINT_TYPE / UNSUPPORTED_ENDPOINT_TYPE
valid top-level errors.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, field


class DescribeClusterRequest(Struct):
    include_cluster_authorized_operations: bool = field(BOOL)
    endpoint_type: int = field(INT8, v="1+", default=1)


class DescribeClusterResponseBroker(Struct):
    broker_id: int = field(INT32)
    host: str = field(STRING)
    port: int = field(INT32)
    rack: str | None = field(STRING, nullable="0+", default=None)


class DescribeClusterResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+", default=None)
    endpoint_type: int = field(INT8, v="1+", default=1)
    cluster_id: str = field(STRING)
    controller_id: int = field(INT32, default=-1)
    brokers: list[DescribeClusterResponseBroker] = field(Array(DescribeClusterResponseBroker))
    cluster_authorized_operations: int = field(INT32, default=-2147483648)


SPEC = register(
    ApiSpec(60, "DescribeCluster", DescribeClusterRequest, DescribeClusterResponse, 0, 1, 0)
)
