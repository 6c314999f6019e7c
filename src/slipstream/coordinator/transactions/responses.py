"""Shaping the transaction APIs' answers for the version that asked, and what a failed
``__transaction_state`` append tells the client."""

from __future__ import annotations

from ...protocol.apis.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from ...protocol.apis.init_producer_id import InitProducerIdResponse
from ...protocol.errors import ErrorCode
from ..append_errors import append_error_for_group
from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition


def append_error_for_txn(error: int) -> int:
    """Kafka's mapping of a failed ``__transaction_state`` append to the client's error."""
    mapped = append_error_for_group(error)
    if mapped in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return mapped
    return ErrorCode.UNKNOWN_SERVER_ERROR


def fenced_for_version(error: int, version: int, first_fenced_version: int) -> int:
    """PRODUCER_FENCED is known to clients from ``first_fenced_version``; older ones get
    INVALID_PRODUCER_EPOCH (Kafka does the same down-conversion)."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def init_error(error: int, version: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=fenced_for_version(error, version, 4), producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )


def partition_results(tid: str, errors: dict[TopicPartition, int]) -> AddPartitionsToTxnResult:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error)
        )
    return AddPartitionsToTxnResult(
        transactional_id=tid,
        topic_results=[AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()],
    )
