"""OffsetFetch (key 9). Served v0-10.

Listed partitions or all of a group's; v8+ several groups at once; v7+
require_stable. v10 names topics by id: requested ids are resolved to names
(an unknown id is UNKNOWN_TOPIC_ID for its partitions) and answered topics
carry their id (offsets of a topic deleted since are left out: it has none).
With an authorizer: a group needs Describe (else GROUP_AUTHORIZATION_FAILED and no
offsets); each topic needs Describe: a listed topic without it answers
TOPIC_AUTHORIZATION_FAILED for its partitions (no offset), and the all-topics form leaves
such topics out.
"""

from __future__ import annotations

from typing import TypeVar

from ...protocol.apis.offset_fetch import (
    SPEC,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 10
TOPIC_IDS_VERSION = 10


GROUPS_VERSION = 8


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if not ctx.authorizing:
        return await _fetch(ctx, request)
    if ctx.api_version < GROUPS_VERSION:
        return await _fetch_one_group(ctx, request)
    wanted = request.groups
    request.groups = [g for g in wanted if ctx.group_allowed(Operation.DESCRIBE, g.group_id)]
    response = await _fetch(ctx, request) if request.groups else OffsetFetchResponse(groups=[])
    answered = {g.group_id: g for g in response.groups}
    groups: list[OffsetFetchResponseGroup] = []
    for group in wanted:
        found = answered.get(group.group_id)
        if found is None:
            groups.append(
                OffsetFetchResponseGroup(group_id=group.group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
            continue
        # A v10 topic id that names no topic has no name: UNKNOWN_TOPIC_ID already.
        found.topics = _describable_topics(ctx, found.topics, group.topics is not None, unnamed_visible=True)
        groups.append(found)
    response.groups = groups
    return response


async def _fetch_one_group(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    """v0-7: one group, topics by name."""
    if not ctx.group_allowed(Operation.DESCRIBE, request.group_id):
        topics = [
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=i, committed_offset=-1, metadata=None,
                        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    )
                    for i in t.partition_indexes
                ],
            )
            for t in request.topics or ()
        ] if ctx.api_version < 2 else []
        return OffsetFetchResponse(topics=topics, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    listed = request.topics is not None
    response = await _fetch(ctx, request)
    response.topics = _describable_topics(ctx, response.topics, listed)
    return response


TopicOffsets = TypeVar("TopicOffsets", OffsetFetchResponseTopic, OffsetFetchResponseTopics)


def _describable_topics(
    ctx: RequestContext, topics: list[TopicOffsets], listed: bool, *, unnamed_visible: bool = False
) -> list[TopicOffsets]:
    """The topics the principal may Describe (and, with ``unnamed_visible``, those without a
    name). The others: left out, or when the request listed its topics, kept with their
    offsets hidden (TOPIC_AUTHORIZATION_FAILED)."""
    kept: list[TopicOffsets] = []
    for topic in topics:
        if (unnamed_visible and not topic.name) or ctx.topic_allowed(Operation.DESCRIBE, topic.name):
            kept.append(topic)
        elif listed:
            for part in topic.partitions:
                part.committed_offset, part.committed_leader_epoch, part.metadata = -1, -1, None
                part.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            kept.append(topic)
    return kept


async def _fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
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
