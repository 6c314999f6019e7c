"""The simulated cluster's topics: names, stable ids, partition counts, a versioned image."""

from __future__ import annotations

import uuid

from ...coordinator.consumer.assignors.base import TopicMetadata
from ...coordinator.topics_image import TopicsImage


def topic_id(name: str, incarnation: int = 0) -> uuid.UUID:
    # Derived from the name (and how often it was created before), so ids are the same in
    # every run and every process, and a re-created topic gets a new id (as in Kafka).
    suffix = f"#{incarnation}" if incarnation else ""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"slipstream-sim/{name}{suffix}")


class Topics:
    """What the broker's metadata says: partitions only ever get added (as in Kafka);
    topics are created and deleted."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = dict(sorted(counts.items()))
        self.version = 1
        self._image: TopicsImage | None = None
        self._incarnations = {n: 0 for n in self.counts}
        self.ids = {n: topic_id(n) for n in self.counts}
        # Every id ever used (answers may name a deleted topic's id a little while longer).
        self.names_by_id = {i: n for n, i in self.ids.items()}

    @property
    def names(self) -> list[str]:
        return list(self.counts)

    def current_names_by_id(self) -> dict[uuid.UUID, str]:
        """What a metadata request answers now: existing topics only."""
        return {self.ids[n]: n for n in self.counts}

    def add_partitions(self, name: str, extra: int) -> None:
        if name not in self.counts:
            return  # deleted meanwhile: nothing to grow
        self.counts[name] += extra
        self._changed()

    def create(self, name: str, partitions: int) -> None:
        if name in self.counts:
            return
        incarnation = self._incarnations.get(name, -1) + 1
        self._incarnations[name] = incarnation
        self.ids[name] = topic_id(name, incarnation)
        self.names_by_id[self.ids[name]] = name
        self.counts[name] = partitions
        self.counts = dict(sorted(self.counts.items()))
        self._changed()

    def delete(self, name: str) -> None:
        if self.counts.pop(name, None) is not None:
            self.ids.pop(name)
            self._changed()

    def _changed(self) -> None:
        self.version += 1
        self._image = None

    def image(self) -> TopicsImage:
        """The image the coordinator sees (rebuilt only when the version moved)."""
        if self._image is None:
            self._image = TopicsImage.of(
                self.version, [TopicMetadata(self.ids[n], n, c) for n, c in self.counts.items()]
            )
        return self._image

    def partitions_of(self, names: list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
        return [(n, p) for n in sorted(set(names)) if n in self.counts for p in range(self.counts[n])]
