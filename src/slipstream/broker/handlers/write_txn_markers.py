"""WriteTxnMarkers (key 27). Served v0-1 (Kafka 3.9's range).

The transaction coordinator sends it to each partition's leader to end a
transaction: in a cluster, the coordinator of another broker (for partitions it
leads here, itself through ``txn_markers`` directly); also tools and tests. Each
marker is written to its partitions (see broker/txn_markers.py; a
``__consumer_offsets`` partition through the group coordinator, which commits or
drops the transaction's offsets); the answer has one error code per partition:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER where another broker leads it,
INVALID_PRODUCER_EPOCH for a stale producer epoch, TRANSACTION_COORDINATOR_FENCED for
an older coordinator epoch. With an authorizer it needs
ClusterAction (else every partition is CLUSTER_AUTHORIZATION_FAILED, nothing written).
"""

from __future__ import annotations

from ...protocol.apis.write_txn_markers import (
    SPEC,
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation
from ..txn_markers import TxnMarker, write_markers_here

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not ctx.authorized_cluster(Operation.CLUSTER_ACTION):
        # Only brokers write markers: without ClusterAction nothing is written (as Kafka).
        return WriteTxnMarkersResponse(markers=[_refused(m) for m in request.markers])
    results = []
    for wanted in request.markers:
        marker = TxnMarker(
            producer_id=wanted.producer_id,
            producer_epoch=wanted.producer_epoch,
            commit=wanted.transaction_result,
            coordinator_epoch=wanted.coordinator_epoch,
            partitions=tuple((t.name, p) for t in wanted.topics for p in t.partition_indexes),
        )
        codes = await write_markers_here(ctx.state, ctx.groups, marker)
        topics = [
            WritableTxnMarkerTopicResult(
                name=t.name,
                partitions=[
                    WritableTxnMarkerPartitionResult(partition_index=p, error_code=codes[(t.name, p)])
                    for p in t.partition_indexes
                ],
            )
            for t in wanted.topics
        ]
        results.append(WritableTxnMarkerResult(producer_id=wanted.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)


def _refused(wanted: WritableTxnMarker) -> WritableTxnMarkerResult:
    return WritableTxnMarkerResult(
        producer_id=wanted.producer_id,
        topics=[
            WritableTxnMarkerTopicResult(
                name=t.name,
                partitions=[
                    WritableTxnMarkerPartitionResult(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for p in t.partition_indexes
                ],
            )
            for t in wanted.topics
        ],
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
