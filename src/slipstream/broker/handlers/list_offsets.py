"""ListOffsets (key 2). Served v1-11 (v10 adds a timeout for tiered storage: unused).

Special timestamps: -1 latest (the high watermark; with isolation_level=1,
read_committed, v2+: the last stable offset), -2 earliest (log start), -3 max timestamp (v7+),
-4 earliest local (v8+, same as earliest: no tiered storage), -5 latest tiered
(v9+, none exists: offset -1), -6 earliest pending upload (v11+: nothing waits to be
uploaded to tiered storage here: offset -1). Any other value finds the first record whose
timestamp is >= it; none -> offset -1. As in Kafka, a timestamp lookup (and -3)
whose answer is at or past the last fetchable offset (the LSO for read_committed,
else the high watermark) answers offset -1.
With an authorizer, each topic needs Describe (else TOPIC_AUTHORIZATION_FAILED).
In a cluster, a current_leader_epoch (v4+) other than the lease's is FENCED_LEADER_EPOCH
(older) or UNKNOWN_LEADER_EPOCH (newer), as in Kafka (KIP-320).
"""

from __future__ import annotations

from ...protocol.apis.list_offsets import (
    SPEC,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsResponsePartition,
    ListOffsetsResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 1
MAX_VERSION = 11

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    state = ctx.state
    topics = []
    for wanted in request.topics:
        out = ListOffsetsResponseTopic(name=wanted.name)
        allowed = ctx.topic_allowed(Operation.DESCRIBE, wanted.name)
        for part in wanted.partitions:
            resp = ListOffsetsResponsePartition(
                partition_index=part.partition_index, timestamp=-1, offset=-1, leader_epoch=0
            )
            out.partitions.append(resp)
            if not allowed:
                resp.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                resp.leader_epoch = -1
                continue
            plog = state.topics.partition(wanted.name, part.partition_index)
            if plog is None:
                resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                resp.leader_epoch = -1
                continue
            if state.not_leader(wanted.name, part.partition_index):
                resp.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                resp.leader_epoch = -1
                continue
            if state.cluster is not None:
                resp.leader_epoch = state.cluster.held.get((wanted.name, part.partition_index), 0)
                fenced = state.cluster.epoch_error(wanted.name, part.partition_index, part.current_leader_epoch)
                if fenced:
                    resp.error_code = fenced
                    continue
            ts = part.timestamp
            fetchable = state.high_watermark(plog)
            if request.isolation_level == READ_COMMITTED:
                fetchable = state.last_stable_offset(wanted.name, part.partition_index, plog)
            if ts == LATEST:
                resp.offset = fetchable
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                resp.offset = plog.log_start_offset
            elif ts == MAX_TIMESTAMP:
                found = plog.max_timestamp()
                if found is not None:
                    resp.offset, resp.timestamp = found
            elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                pass
            elif ts < 0:
                resp.error_code = ErrorCode.INVALID_REQUEST
            else:
                found = plog.offset_for_timestamp(ts)
                if found is not None:
                    resp.offset, resp.timestamp = found
            if (ts >= 0 or ts == MAX_TIMESTAMP) and resp.offset >= fetchable:
                resp.offset, resp.timestamp = -1, -1
        topics.append(out)
    return ListOffsetsResponse(topics=topics)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
