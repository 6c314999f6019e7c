"""What the coordinator knows of the broker's topics: a versioned, read-only image.

Consumer (KIP-848) groups assign partitions by topic id and bump their epoch when
the metadata of a subscribed topic changes. The broker hands the coordinator a
``TopicsImage`` through a callable; its ``version`` changes whenever a topic is
created or deleted or gains partitions, so a group only recomputes its metadata
hash and regex resolutions when the version moved.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .consumer.assignors.base import TopicMetadata
from .consumer.partitions import TopicId

_COUNT = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class TopicsImage:
    version: int = 0
    by_name: Mapping[str, TopicMetadata] = field(default_factory=dict)
    by_id: Mapping[TopicId, TopicMetadata] = field(default_factory=dict)

    @classmethod
    def of(cls, version: int, topics: Iterable[TopicMetadata]) -> TopicsImage:
        listed = list(topics)
        return cls(version, {t.name: t for t in listed}, {t.topic_id: t for t in listed})

    def name_of(self, topic_id: TopicId) -> str | None:
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.name

    def public_names(self) -> list[str]:
        """Names a regex subscription may match: internal topics (``__*``) never do, as in Kafka."""
        return [name for name in self.by_name if not name.startswith("__")]

    def metadata_hash(self, names: Iterable[str]) -> int:
        """A signed 64-bit digest of the named topics' ids and partition counts.

        Stored in the group's metadata record: a different value on a later heartbeat
        (a topic created, deleted, recreated or grown) bumps the group epoch.
        """
        digest = hashlib.blake2b(digest_size=8)
        for name in sorted(names):
            topic = self.by_name.get(name)
            if topic is None:
                continue
            digest.update(name.encode())
            digest.update(topic.topic_id.bytes)
            digest.update(_COUNT.pack(topic.partition_count))
        return int.from_bytes(digest.digest(), "big", signed=True)


EMPTY_TOPICS_IMAGE = TopicsImage()
