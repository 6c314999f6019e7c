"""The simulated cluster's topics: names, stable ids, partition counts, a versioned image."""

from __future__ import annotations

import uuid

from ...coordinator.consumer.assignors.base import TopicMetadata
from ...coordinator.topics_image import TopicsImage


def topic_id(name: str) -> uuid.UUID:
    # Derived from the name, so ids are the same in every run and every process.
    return uuid.uuid5(uuid.NAMESPACE_OID, f"slipstream-sim/{name}")


class Topics:
    """What the broker's metadata says; partitions only ever get added (as in Kafka)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = dict(sorted(counts.items()))
        self.version = 1
        self._image: TopicsImage | None = None
        self.names_by_id = {topic_id(n): n for n in self.counts}

    @property
    def names(self) -> list[str]:
        return list(self.counts)

    def add_partitions(self, name: str, extra: int) -> None:
        self.counts[name] += extra
        self.version += 1
        self._image = None

    def image(self) -> TopicsImage:
        """The image the coordinator sees (rebuilt only when the version moved)."""
        if self._image is None:
            self._image = TopicsImage.of(
                self.version, [TopicMetadata(topic_id(n), n, c) for n, c in self.counts.items()]
            )
        return self._image

    def partitions_of(self, names: list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
        return [(n, p) for n in sorted(set(names)) if n in self.counts for p in range(self.counts[n])]
