"""OffsetCommit (key 8). Served v0-10.

Answered once the commit is appended to __consumer_offsets. Generation -1 with
no member id is a standalone commit, accepted for groups with no members. v10
names topics by id: they are resolved to names here (the coordinator stores
offsets by name, as Kafka does) and an unknown id is UNKNOWN_TOPIC_ID.
With an authorizer: Read on the group (else every partition is GROUP_AUTHORIZATION_FAILED)
and Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, which are
not committed).
"""

from __future__ import annotations

from ...protocol.apis.offset_commit import (
    SPEC,
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 10
TOPIC_IDS_VERSION = 10


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if not ctx.authorizing:
        return await _commit(ctx, request)
    if not ctx.group_allowed(Operation.READ, request.group_id):
        return OffsetCommitResponse(topics=[_failed(t, ErrorCode.GROUP_AUTHORIZATION_FAILED) for t in request.topics])
    by_id = ctx.state.topics.by_id
    kept: list[OffsetCommitRequestTopic] = []
    denied: list[OffsetCommitRequestTopic] = []
    for topic in request.topics:
        if ctx.api_version >= TOPIC_IDS_VERSION:
            found = by_id.get(topic.topic_id)
            name = found.name if found is not None else None
        else:
            name = topic.name
        (kept if name is None or ctx.topic_allowed(Operation.READ, name) else denied).append(topic)
    request.topics = kept
    response = await _commit(ctx, request) if kept else OffsetCommitResponse(topics=[])
    response.topics.extend(_failed(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in denied)
    return response


def _failed(topic: OffsetCommitRequestTopic, code: int) -> OffsetCommitResponseTopic:
    return OffsetCommitResponseTopic(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=[OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in topic.partitions],
    )


async def _commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if ctx.api_version < TOPIC_IDS_VERSION:
        return await ctx.groups.offset_commit(ctx.coordinator_context(), request)
    by_id = ctx.state.topics.by_id
    known = []
    unknown = []
    for topic in request.topics:
        found = by_id.get(topic.topic_id)
        if found is None:
            unknown.append(topic)
        else:
            topic.name = found.name
            known.append(topic)
    request.topics = known
    response = await ctx.groups.offset_commit(ctx.coordinator_context(), request)
    ids = {t.name: t.topic_id for t in known}
    for answered in response.topics:
        answered.topic_id = ids[answered.name]
    for topic in unknown:
        response.topics.append(
            OffsetCommitResponseTopic(
                topic_id=topic.topic_id,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID
                    )
                    for p in topic.partitions
                ],
            )
        )
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
