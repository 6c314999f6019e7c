"""DeleteRecords (key 21). Served v0-2.

Advances each partition's log start offset to ``offset`` and answers the new
low_watermark; segments wholly below it are deleted. ``offset`` -1 means the
high watermark (the log end offset on a single node). The log start never moves
backwards: an offset below it leaves the log as it is and answers the current
low watermark. An offset past the high watermark, or negative other than -1,
is OFFSET_OUT_OF_RANGE; a topic without the ``delete`` cleanup policy is
POLICY_VIOLATION (as in Kafka); an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION; a failing disk KAFKA_STORAGE_ERROR. Errors answer low_watermark -1 (the response has
no message field).

v1 only differs in throttling; v2 is flexible. With an authorizer each topic needs Delete
(else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from ...log.api import OffsetOutOfRange
from ...protocol.apis.delete_records import (
    SPEC,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsResponsePartition,
    DeleteRecordsResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState

MIN_VERSION = 0
MAX_VERSION = 2

HIGH_WATERMARK = -1

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for wanted in request.topics:
        out = DeleteRecordsResponseTopic(name=wanted.name, partitions=[])
        allowed = ctx.topic_allowed(Operation.DELETE, wanted.name)
        for part in wanted.partitions:
            if allowed:
                code, low = _delete(ctx.state, wanted.name, part.partition_index, part.offset)
            else:
                # Delete on the topic, as Kafka checks.
                code, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            out.partitions.append(
                DeleteRecordsResponsePartition(
                    partition_index=part.partition_index, low_watermark=low, error_code=code
                )
            )
        topics.append(out)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete(state: BrokerState, topic_name: str, index: int, offset: int) -> tuple[int, int]:
    plog = state.topics.partition(topic_name, index)
    topic = state.topics.get(topic_name)
    if plog is None or topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if state.not_leader(topic_name, index):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    policy = state.topics.effective_configs(topic)["cleanup.policy"]
    if "delete" not in (x.strip() for x in policy.split(",")):
        return ErrorCode.POLICY_VIOLATION, -1
    if offset == HIGH_WATERMARK:
        offset = state.high_watermark(plog)
    if offset < 0:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    try:
        low = plog.delete_records_before(offset)
    except OffsetOutOfRange:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    except OSError:
        log.exception("DeleteRecords on %s-%d failed", topic_name, index)
        return ErrorCode.KAFKA_STORAGE_ERROR, -1
    log.info("deleted records of %s-%d before offset %d (log start now %d)", topic_name, index, offset, low)
    return ErrorCode.NONE, low


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
