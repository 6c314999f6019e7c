"""Metadata (key 3), versions 0-13; flexible from v9.

v0 asks for every topic with an empty ``topics`` list; from v1 an empty list
means no topics and a null list means all of them. v1 adds the broker rack,
controller_id and is_internal; v2 the cluster_id; v3 throttle_time_ms; v4
allow_auto_topic_creation (before v4 a request for an unknown topic always
may auto-create it); v5 per-partition offline_replicas; v7 leader_epoch; v8
the include_*_authorized_operations flags and the matching answers
(-2147483648 = not requested); v9 is the first flexible version; v10 adds
topic ids to both sides (Kafka brokers ignore request ids before v12); v11
drops the cluster-level authorized operations (moved to DescribeCluster);
v12 lets a request name a topic by id alone (name null) and a response carry
a null name for an unknown id; v13 adds a top-level error_code (KIP-1102).
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Struct, field

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


class MetadataRequestTopic(Struct):
    topic_id: uuid.UUID = field(UUID, v="10+")
    name: str | None = field(STRING, nullable="10+")


class MetadataRequest(Struct):
    topics: list[MetadataRequestTopic] | None = field(Array(MetadataRequestTopic), nullable="1+")
    allow_auto_topic_creation: bool = field(BOOL, v="4+", default=True)
    include_cluster_authorized_operations: bool = field(BOOL, v="8-10")
    include_topic_authorized_operations: bool = field(BOOL, v="8+")


class MetadataResponseBroker(Struct):
    node_id: int = field(INT32)
    host: str = field(STRING)
    port: int = field(INT32)
    rack: str | None = field(STRING, v="1+", nullable="1+", default=None)


class MetadataResponsePartition(Struct):
    error_code: int = field(INT16)
    partition_index: int = field(INT32)
    leader_id: int = field(INT32)
    leader_epoch: int = field(INT32, v="7+", default=-1)
    replica_nodes: list[int] = field(Array(INT32))
    isr_nodes: list[int] = field(Array(INT32))
    offline_replicas: list[int] = field(Array(INT32), v="5+")


class MetadataResponseTopic(Struct):
    error_code: int = field(INT16)
    name: str | None = field(STRING, nullable="12+")
    topic_id: uuid.UUID = field(UUID, v="10+")
    is_internal: bool = field(BOOL, v="1+", default=False)
    partitions: list[MetadataResponsePartition] = field(Array(MetadataResponsePartition))
    topic_authorized_operations: int = field(INT32, v="8+", default=AUTHORIZED_OPERATIONS_OMITTED)


class MetadataResponse(Struct):
    throttle_time_ms: int = field(INT32, v="3+")
    brokers: list[MetadataResponseBroker] = field(Array(MetadataResponseBroker))
    cluster_id: str | None = field(STRING, v="2+", nullable="2+", default=None)
    controller_id: int = field(INT32, v="1+", default=-1)
    topics: list[MetadataResponseTopic] = field(Array(MetadataResponseTopic))
    cluster_authorized_operations: int = field(
        INT32, v="8-10", default=AUTHORIZED_OPERATIONS_OMITTED
    )
    # v13 (KIP-1102): a top-level error, e.g. REBOOTSTRAP_REQUIRED; 0 from a single node.
    error_code: int = field(INT16, v="13+", default=0)


SPEC = register(ApiSpec(3, "Metadata", MetadataRequest, MetadataResponse, 0, 13, 9))
