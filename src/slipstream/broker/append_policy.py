"""What the produce path needs of a topic's configs, parsed once per configs version.

Every Produce used to merge the broker defaults with the topic's overrides into a fresh
dict and parse the same strings again, for each partition of each request. A topic's
overrides are only ever replaced as a whole (``TopicManager.set_configs`` assigns a new
dict), so the parsed policy is kept per topic together with the very overrides dict it
came from, and made again when that object is no longer the topic's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..protocol import compression
from .topics import Topic, TopicManager

_LONG_MAX = str((1 << 63) - 1)
# A topic's compression.type -> the codec its batches are stored with (absent: as produced).
TOPIC_CODECS = {
    "uncompressed": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}


@dataclass(frozen=True, slots=True)
class AppendPolicy:
    """What Produce checks and does for one topic: its configs, parsed."""

    max_batch_bytes: int
    compacted: bool
    # The topic's min.insync.replicas when above 1 (acks=all cannot be met), else None.
    min_insync_replicas: str | None
    # message.timestamp.before.max.ms / after.max.ms; None when neither bound is set.
    timestamp_bounds: tuple[int, int] | None
    # The codec batches are stored with, None for "producer" (as sent: zero-copy).
    topic_codec: int | None
    log_append_time: bool


def policy_from(configs: dict[str, str]) -> AppendPolicy:
    before, after = configs["message.timestamp.before.max.ms"], configs["message.timestamp.after.max.ms"]
    bounds = None if before == _LONG_MAX and after == _LONG_MAX else (int(before), int(after))
    min_isr = configs["min.insync.replicas"]
    return AppendPolicy(
        max_batch_bytes=int(configs["max.message.bytes"]),
        compacted="compact" in configs["cleanup.policy"],
        min_insync_replicas=None if min_isr == "1" else min_isr,
        timestamp_bounds=bounds,
        topic_codec=TOPIC_CODECS.get(configs["compression.type"]),
        log_append_time=configs["message.timestamp.type"] == "LogAppendTime",
    )


class AppendPolicies:
    """Topic name -> (topic id, the overrides dict it was made from, its policy); a topic
    deleted and made again has a new id."""

    def __init__(self) -> None:
        self._cached: dict[str, tuple[uuid.UUID, dict[str, str], AppendPolicy]] = {}

    def for_topic(self, topics: TopicManager, topic: Topic) -> AppendPolicy:
        found = self._cached.get(topic.name)
        if found is not None and found[1] is topic.configs and found[0] == topic.topic_id:
            return found[2]
        policy = policy_from(topics.effective_configs(topic))
        self._cached[topic.name] = (topic.topic_id, topic.configs, policy)
        return policy
