"""DeleteTopics (key 20). Served v1-6.

v1-5 name topics in topic_names; v6 gives a name or a topic id per entry and is
answered with both. Internal topics (``__consumer_offsets``) cannot be deleted.
Many topics are deleted in slices that yield to the event loop (admin_slices.py);
``controller.mutation.rate`` counts deleted partitions (mutation_quota.py; v5+ may be
refused with THROTTLING_QUOTA_EXCEEDED). With an authorizer each topic needs Delete (else
TOPIC_AUTHORIZATION_FAILED; by id, without Describe, its name is not given either).
"""

from __future__ import annotations

import uuid

from ...protocol.apis.delete_topics import (
    SPEC,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicsResponseTopic,
)
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.primitives import ZERO_UUID
from ..admin_slices import Slices
from ..mutation_quota_check import QuotaCheck
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 1
MAX_VERSION = 6


STRICT_QUOTA_VERSION = 5


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    state = ctx.state
    slices = Slices(state.topics)
    quota = QuotaCheck(ctx, strict=ctx.api_version >= STRICT_QUOTA_VERSION)
    wanted: list[tuple[str | None, uuid.UUID]] = (
        [(t.name, t.topic_id) for t in request.topics]
        if ctx.api_version >= 6
        else [(name, ZERO_UUID) for name in request.topic_names]
    )
    results = []
    for name, topic_id in wanted:
        out = DeleteTopicsResponseTopic(name=name, topic_id=topic_id)
        try:
            if name is None:
                topic = state.topics.by_id.get(topic_id)
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {topic_id}")
                if not ctx.topic_allowed(Operation.DESCRIBE, topic.name):
                    # Its name stays unsaid to a principal that may not describe it.
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Describe on topic id {topic_id} is not allowed")
                name = out.name = topic.name
            if not ctx.topic_allowed(Operation.DELETE, name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Delete on topic {name!r} is not allowed")
            topic = state.topics.get(name)
            if topic is not None and topic.internal:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"internal topic {name} cannot be deleted")
            if topic is not None:
                quota.admit(len(topic.partitions))
            deleted = state.topics.delete(name, save=False)
            slices.changed()
            out.topic_id = deleted.topic_id
            for index in range(len(deleted.partitions)):
                state.producer_states.pop((name, index), None)
        except KafkaError as exc:
            out.error_code = exc.code
            out.error_message = exc.message
        results.append(out)
        await slices.step()
    slices.finish()
    return DeleteTopicsResponse(throttle_time_ms=quota.throttle_ms(), responses=results)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
