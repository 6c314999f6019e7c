"""WriteTxnMarkers (key 27). Served v0-1 (Kafka 3.9's range).

Kafka's transaction coordinator sends it to each partition leader to end a
transaction; on this single broker the coordinator calls ``txn_markers`` directly,
and this handler is the same call for tools and tests. Each marker is written to its
partitions (see broker/txn_markers.py); the answer has one error code per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for a stale producer epoch,
TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch.
"""

from __future__ import annotations

from ...protocol.apis.write_txn_markers import (
    SPEC,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from ..request_context import RequestContext
from ..txn_markers import TxnMarker, write_txn_markers

MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    results = []
    for wanted in request.markers:
        marker = TxnMarker(
            producer_id=wanted.producer_id,
            producer_epoch=wanted.producer_epoch,
            commit=wanted.transaction_result,
            coordinator_epoch=wanted.coordinator_epoch,
            partitions=tuple((t.name, p) for t in wanted.topics for p in t.partition_indexes),
        )
        codes = await write_txn_markers(ctx.state, marker)
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


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
