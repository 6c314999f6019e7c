"""WriteTxnMarkers (key 27), versions 0-1; flexible from v1.

The transaction coordinator asks each partition leader to append COMMIT or ABORT
control batches (the transaction markers) for a producer's transaction; the answer
carries one error code per partition.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, field


class WritableTxnMarkerTopic(Struct):
    name: str = field(STRING)
    partition_indexes: list[int] = field(Array(INT32))


class WritableTxnMarker(Struct):
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT16)
    transaction_result: bool = field(BOOL)  # True = COMMIT, False = ABORT
    topics: list[WritableTxnMarkerTopic] = field(Array(WritableTxnMarkerTopic))
    coordinator_epoch: int = field(INT32)


class WriteTxnMarkersRequest(Struct):
    markers: list[WritableTxnMarker] = field(Array(WritableTxnMarker))


class WritableTxnMarkerPartitionResult(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)


class WritableTxnMarkerTopicResult(Struct):
    name: str = field(STRING)
    partitions: list[WritableTxnMarkerPartitionResult] = field(Array(WritableTxnMarkerPartitionResult))


class WritableTxnMarkerResult(Struct):
    producer_id: int = field(INT64)
    topics: list[WritableTxnMarkerTopicResult] = field(Array(WritableTxnMarkerTopicResult))


class WriteTxnMarkersResponse(Struct):
    markers: list[WritableTxnMarkerResult] = field(Array(WritableTxnMarkerResult))


SPEC = register(ApiSpec(27, "WriteTxnMarkers", WriteTxnMarkersRequest, WriteTxnMarkersResponse, 0, 1, 1))
