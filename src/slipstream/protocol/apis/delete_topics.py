"""DeleteTopics (key 20), versions 0-6; flexible from v4.

v0-5 name the topics to delete in ``topic_names`` (Kafka 4 removed v0:
KIP-896); v1 adds throttle_time_ms; v2 throttles after answering; v3 may
answer TOPIC_DELETION_DISABLED; v4 is the first flexible version; v5 adds a
per-topic error_message and may answer THROTTLING_QUOTA_EXCEEDED (KIP-599);
v6 replaces ``topic_names`` with ``topics`` whose entries give a name or a
topic id (name null), and answers with the topic id (UNKNOWN_TOPIC_ID for an
unknown one).
"""

from __future__ import annotations

import uuid

from ..api import ApiSpec, register
from ..schema import INT16, INT32, STRING, UUID, Array, Struct, field


class DeleteTopicsRequestTopic(Struct):
    name: str | None = field(STRING, v="6+", nullable="6+", default=None)
    topic_id: uuid.UUID = field(UUID, v="6+")


class DeleteTopicsRequest(Struct):
    topics: list[DeleteTopicsRequestTopic] = field(Array(DeleteTopicsRequestTopic), v="6+")
    topic_names: list[str] = field(Array(STRING), v="0-5")
    timeout_ms: int = field(INT32)


class DeleteTopicsResponseTopic(Struct):
    name: str | None = field(STRING, nullable="6+")
    topic_id: uuid.UUID = field(UUID, v="6+")
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, v="5+", nullable="5+", default=None)


class DeleteTopicsResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    responses: list[DeleteTopicsResponseTopic] = field(Array(DeleteTopicsResponseTopic))


SPEC = register(ApiSpec(20, "DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse, 0, 6, 4))
