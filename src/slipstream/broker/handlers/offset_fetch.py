"""OffsetFetch (key 9). Served v0-10.

Listed partitions or all of a group's; v8+ several groups at once; v7+
require_stable. v10 names topics by id: requested ids are resolved to names
(an unknown id is UNKNOWN_TOPIC_ID for its partitions) and answered topics
carry their id (offsets of a topic deleted since are left out: it has none).
"""

from __future__ import annotations

from ...protocol.apis.offset_fetch import (
    SPEC,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 10
TOPIC_IDS_VERSION = 10


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version < TOPIC_IDS_VERSION:
        return await ctx.groups.offset_fetch(ctx.coordinator_context(), request)
    topics = ctx.state.topics
    unknown: dict[str, list[OffsetFetchResponseTopics]] = {}
    for group in request.groups:
        if group.topics is None:
            continue
        known = []
        for topic in group.topics:
            found = topics.by_id.get(topic.topic_id)
            if found is None:
                unknown.setdefault(group.group_id, []).append(
                    OffsetFetchResponseTopics(
                        topic_id=topic.topic_id,
                        partitions=[
                            OffsetFetchResponsePartitions(
                                partition_index=index,
                                committed_offset=-1,
                                metadata=None,
                                error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            )
                            for index in topic.partition_indexes
                        ],
                    )
                )
            else:
                topic.name = found.name
                known.append(topic)
        group.topics = known
    response = await ctx.groups.offset_fetch(ctx.coordinator_context(), request)
    for answered in response.groups:
        kept: list[OffsetFetchResponseTopics] = []
        for answered_topic in answered.topics:
            found_topic = topics.get(answered_topic.name)
            if found_topic is not None:
                answered_topic.topic_id = found_topic.topic_id
                kept.append(answered_topic)
        answered.topics = kept + unknown.get(answered.group_id, [])
    return response


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
