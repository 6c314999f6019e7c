"""Fetch (key 1). Served v4-16.

Long-polls up to max_wait_ms until min_bytes are available, woken by appends.
Limits: the response holds at most max_bytes (v3+) and each partition at most
partition_max_bytes, except that the first batch of the first non-empty partition
is always returned whole so a consumer can progress past a large batch.
Fetch sessions (v7+, KIP-227) are refused: session_id 0 tells the client to keep
sending full fetches. v13+ names topics by topic_id. Batches go out exactly as
stored, as buffers straight from the log.
"""

from __future__ import annotations

from ...log.api import OffsetOutOfRange
from ...protocol.apis.fetch import (
    SPEC,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..state import BrokerState, RequestContext
from ..topics import Topic

MIN_VERSION = 4
MAX_VERSION = 16

_NO_LIMIT = 0x7FFFFFFF


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    state = ctx.state
    version = ctx.api_version
    if version >= 7 and request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    if version >= 7 and request.session_id == 0 and request.session_epoch > 0:
        return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    max_wait_s = max(0, request.max_wait_ms) / 1000
    deadline = state.clock() / 1000 + max_wait_s
    while True:
        response, size, keys, failed = _read_all(state, request, version)
        remaining = deadline - state.clock() / 1000
        if size >= request.min_bytes or failed or remaining <= 0 or not keys:
            return response
        await state.notifier.wait(keys, remaining)


def _read_all(
    state: BrokerState, request: FetchRequest, version: int
) -> tuple[FetchResponse, int, list[tuple[str, int]], bool]:
    budget = request.max_bytes if request.max_bytes > 0 else _NO_LIMIT
    total = 0
    keys: list[tuple[str, int]] = []
    failed = False
    topics: list[FetchResponseTopic] = []
    for wanted in request.topics:
        topic: Topic | None
        if version >= 13:
            topic = state.topics.by_id.get(wanted.topic_id)
            missing_code = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = state.topics.get(wanted.topic)
            missing_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        out = FetchResponseTopic(topic=wanted.topic, topic_id=wanted.topic_id)
        for part in wanted.partitions:
            resp = FetchResponsePartition(
                partition_index=part.partition,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                preferred_read_replica=-1,
                aborted_transactions=None,
                records=b"",
            )
            out.partitions.append(resp)
            plog = None
            if topic is not None and 0 <= part.partition < len(topic.partitions):
                plog = topic.partitions[part.partition]
            if plog is None or topic is None:
                resp.error_code = missing_code
                failed = True
                continue
            keys.append((topic.name, part.partition))
            resp.high_watermark = resp.last_stable_offset = plog.log_end_offset
            resp.log_start_offset = plog.log_start_offset
            limit = min(part.partition_max_bytes, budget - total)
            if limit <= 0 and total > 0:
                continue
            try:
                result = plog.read(part.fetch_offset, max(limit, 0), min_one_batch=total == 0)
            except OffsetOutOfRange:
                resp.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                failed = True
                continue
            if result.size:
                resp.records = result.chunks
                total += result.size
            resp.high_watermark = resp.last_stable_offset = result.log_end_offset
            resp.log_start_offset = result.log_start_offset
        topics.append(out)
    return FetchResponse(error_code=0, session_id=0, responses=topics), total, keys, failed



__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
