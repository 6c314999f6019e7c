"""Topic registry: names, ids, partition counts and config overrides, persisted in the data dir.

Each partition's data lives in a PartitionLog from the log store; this module only
knows which partitions exist and with what settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..log.api import LogConfig, LogStore, PartitionLog
from ..log.metadata import MetadataStore
from ..protocol.errors import ErrorCode, KafkaError
from . import topic_config
from .config import BrokerConfig

if TYPE_CHECKING:
    from ..coordinator.topics_image import TopicsImage

log = logging.getLogger(__name__)

# A pattern, compiled at its first use (re keeps it): compiling costs a start ~0.2 ms.
_LEGAL_NAME = r"^[a-zA-Z0-9._-]+$"
MAX_NAME_LENGTH = 249
OFFSETS_TOPIC = "__consumer_offsets"
_DOCUMENT = "topics.json"
# Each partition is a directory and open files; a runaway count must not stall the broker.
MAX_PARTITIONS_PER_TOPIC = 10_000


def check_topic_name(name: str | None) -> str:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not allowed")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is {len(name)} characters; the limit is {MAX_NAME_LENGTH}",
        )
    if not re.match(_LEGAL_NAME, name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'",
        )
    return name


@dataclass
class Topic:
    """A topic: its id, its config overrides and one log per partition."""

    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]  # overrides only; effective values add the broker defaults
    partitions: list[PartitionLog] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")


class TopicManager:
    def __init__(self, config: BrokerConfig, store: LogStore, metadata: MetadataStore | None) -> None:
        self.config = config
        self.store = store
        self._metadata = metadata
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        # Bumped by every change the group coordinator must see (topics created or
        # deleted, partitions added); the image is rebuilt on demand after one.
        self._version = 0
        self._image: TopicsImage | None = None
        # Names whose logs a worker thread is making or opening, or will (load's defer).
        self._being_created: set[str] = set()
        # Saved topics whose logs load() left to open_deferred_in_worker_thread: (topic, partitions).
        self._deferred: dict[str, tuple[Topic, int]] = {}
        # Cluster (a metadata store with ``update``): topics changed or deleted here since
        # the last save, so a save merges them into the shared document and leaves the
        # other brokers' changes alone.
        self._touched: set[str] = set()
        self._deleted: set[str] = set()
        self._seen_document: str | None = None

    # ---------------------------------------------------------------- persistence

    def load(self, *, defer: Collection[str] = ()) -> None:
        """Register the saved topics and open (recover) their logs. The topics named in
        ``defer`` are left to ``open_deferred_in_worker_thread``; until then they are
        ``being_created`` (and still saved with the rest)."""
        text = self._metadata.load(_DOCUMENT) if self._metadata is not None else None
        if text is None:
            return
        import json  # (here, not at the top: a fresh broker has no document to read)

        self._seen_document = text
        saved = json.loads(text)
        for name, entry in saved["topics"].items():
            topic = Topic(name, uuid.UUID(entry["id"]), dict(entry.get("configs", {})))
            if name in defer:
                self._deferred[name] = (topic, int(entry["partitions"]))
                self._being_created.add(name)
                continue
            self._register(topic)
            self._open_partitions(topic, int(entry["partitions"]))
        log.info("loaded %d topics", len(self.topics))

    async def open_deferred_in_worker_thread(self, name: str) -> Topic | None:
        """Open the logs of a topic ``load`` deferred, in a worker thread (see
        ``create_in_worker_thread``); None when it was not deferred (not saved)."""
        deferred = self._deferred.get(name)
        if deferred is None:
            return None
        topic, count = deferred
        await self._attach_in_worker_thread(topic, count)
        del self._deferred[name]
        log.info("opened topic %s with %d partitions", name, count)
        return topic

    def save_metadata(self) -> None:
        """Write the topic metadata now (after changes made with ``save=False``)."""
        self._save()

    def _save(self) -> None:
        import json  # (see load)

        if self._metadata is None:
            return
        entries = {
            t.name: {"id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
            for t in self.topics.values()
        }
        for t, count in self._deferred.values():
            entries[t.name] = {"id": str(t.topic_id), "partitions": count, "configs": t.configs}
        update = getattr(self._metadata, "update", None)
        if update is None:
            self._metadata.save(_DOCUMENT, json.dumps({"topics": entries}, indent=1, sort_keys=True))
            return
        deleted, self._deleted = self._deleted, set()
        touched, self._touched = self._touched, set()

        def merge(current: str | None) -> str:
            import json  # (see load)

            # Brokers sharing the document: only what this broker changed is written.
            topics = json.loads(current)["topics"] if current else {}
            for name in deleted:
                topics.pop(name, None)
            topics.update({name: entries[name] for name in touched if name in entries})
            return json.dumps({"topics": topics}, indent=1, sort_keys=True)

        self._seen_document = update(_DOCUMENT, merge)

    @property
    def shared(self) -> bool:
        """Whether other brokers change these topics too (a cluster's shared document)."""
        return hasattr(self._metadata, "update")

    def follow_others(self) -> None:
        """Catch up with the shared document now (blocking), before a change here."""
        if self.shared:
            text = self.fetch_document()
            if text is not None:
                self.apply_document(text)

    def fetch_document(self) -> str | None:
        """The shared topics document if it changed since last seen (blocking; cluster)."""
        text = self._metadata.load(_DOCUMENT) if self._metadata is not None else None
        return None if text is None or text == self._seen_document else text

    def apply_document(self, text: str) -> bool:
        """Follow topics created, grown, reconfigured or deleted by other brokers; True if
        anything changed here. Nothing is saved and no stored data is touched."""
        import json  # (see load)

        self._seen_document = text
        saved = json.loads(text)["topics"]
        changed = False
        mine = self._touched | self._deleted | self._being_created  # ours wins until saved
        for name in [n for n in self.topics if n not in saved and n not in mine]:
            gone = self.topics.pop(name)
            self.by_id.pop(gone.topic_id, None)
            for plog in gone.partitions:
                plog.close()
            changed = True
        for name, entry in saved.items():
            if name in mine:
                continue
            topic = self.topics.get(name)
            if topic is None or str(topic.topic_id) != entry["id"]:
                if topic is not None:
                    self.by_id.pop(topic.topic_id, None)
                topic = Topic(name, uuid.UUID(entry["id"]), dict(entry.get("configs", {})))
                self._register(topic)
                changed = True
            elif topic.configs != entry.get("configs", {}):
                topic.configs = dict(entry.get("configs", {}))
                settings = topic_config.log_config(self.effective_configs(topic))
                for plog in topic.partitions:
                    plog.update_config(settings)
            if len(topic.partitions) < int(entry["partitions"]):
                self._open_partitions(topic, int(entry["partitions"]))
                changed = True
        if changed:
            self._changed()
        return changed

    # ---------------------------------------------------------------- queries

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def effective_configs(self, topic: Topic) -> dict[str, str]:
        return topic_config.effective(self.config, topic.configs)

    # ---------------------------------------------------------------- changes

    def create(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        save: bool = True,
    ) -> Topic:
        """Create a topic; ``save=False`` leaves writing the metadata to the caller."""
        if name not in self.topics:
            self.follow_others()  # another broker of the cluster may have created it
        topic = self._new_topic(name, partitions, configs)
        if validate_only:
            return topic
        self._register(topic)
        self._open_partitions(topic, partitions)
        self._touched.add(name)
        if save:
            self._save()
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    async def create_in_worker_thread(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        """``create``, with the partition logs opened by a worker thread (disk store only).

        Why: a new disk partition is a directory and a few files, and the 50 of
        ``__consumer_offsets`` took 200-400 ms of file-system calls at a fresh start on a
        busy 2-core machine; the event loop keeps answering meanwhile. The topic exists
        (listed, saved) only once every log is open; until then ``being_created(name)``
        is true and ``create`` refuses the name.
        """
        topic = self._new_topic(name, partitions, configs)
        await self._attach_in_worker_thread(topic, partitions)
        self._touched.add(name)
        self._save()
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    async def _attach_in_worker_thread(self, topic: Topic, count: int) -> None:
        """Open ``count`` partition logs off the event loop, then register the topic."""
        settings = topic_config.log_config(self.effective_configs(topic))
        self._being_created.add(topic.name)
        opening = asyncio.get_running_loop().run_in_executor(None, self._open_logs, topic.name, count, settings)
        try:
            logs = await asyncio.shield(opening)
        except asyncio.CancelledError:
            # The thread cannot be stopped: let it finish, so nobody closes the store
            # under it (its logs are closed with the store's).
            with contextlib.suppress(Exception):
                await opening
            raise
        finally:
            self._being_created.discard(topic.name)
        self._register(topic)
        topic.partitions.extend(logs)

    def _open_logs(self, name: str, count: int, settings: LogConfig) -> list[PartitionLog]:
        return [self.store.open(name, index, settings) for index in range(count)]

    def being_created(self, name: str) -> bool:
        """True while a worker thread makes or opens this topic's logs (or is yet to)."""
        return name in self._being_created

    def _new_topic(self, name: str, partitions: int, configs: dict[str, str] | None) -> Topic:
        """A validated, not yet registered topic."""
        check_topic_name(name)
        if name in self.topics or name in self._being_created:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}, got {partitions}",
            )
        overrides = dict(configs or {})
        for key, value in overrides.items():
            try:
                topic_config.validate(key, value)
            except topic_config.InvalidConfig as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return Topic(name, uuid.uuid4(), overrides)

    def ensure(self, name: str, partitions: int, configs: dict[str, str]) -> bool:
        """Create an internal topic unless it exists - here, or (a cluster) created by a
        broker starting at the same time; True if this call created it."""
        if self.get(name) is not None:
            return False
        try:
            self.create(name, partitions, configs)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return False
        return True

    def delete(self, name: str, *, save: bool = True) -> Topic:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        del self.by_id[topic.topic_id]
        self._deleted.add(name)
        self._touched.discard(name)
        self._changed()
        for index, plog in enumerate(topic.partitions):
            plog.close()
            self.store.remove(name, index)
        if save:
            self._save()
        log.info("deleted topic %s", name)
        return topic

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {current} partitions; the new count {count} must be larger",
            )
        if count > MAX_PARTITIONS_PER_TOPIC:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"at most {MAX_PARTITIONS_PER_TOPIC} partitions per topic, asked for {count}",
            )
        if validate_only:
            return
        self._open_partitions(topic, count)
        self._touched.add(name)
        self._save()

    def set_configs(self, name: str, overrides: dict[str, str], *, validate_only: bool = False) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        for key, value in overrides.items():
            try:
                topic_config.validate(key, value)
            except topic_config.InvalidConfig as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return
        topic.configs = dict(overrides)
        settings = topic_config.log_config(self.effective_configs(topic))
        for plog in topic.partitions:
            plog.update_config(settings)
        self._touched.add(name)
        self._save()

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self._changed()

    def _changed(self) -> None:
        self._version += 1
        self._image = None

    def image(self) -> TopicsImage:
        """The topics as the group coordinator sees them: ids and partition counts, versioned."""
        if self._image is None:
            # The coordinator's modules: loaded after the listener's first answer (Broker.start).
            from ..coordinator.consumer.assignors.base import TopicMetadata
            from ..coordinator.topics_image import TopicsImage

            self._image = TopicsImage.of(
                self._version,
                (TopicMetadata(t.topic_id, t.name, len(t.partitions)) for t in self.topics.values()),
            )
        return self._image

    def _open_partitions(self, topic: Topic, count: int) -> None:
        self._changed()
        settings = topic_config.log_config(self.effective_configs(topic))
        for index in range(len(topic.partitions), count):
            topic.partitions.append(self.store.open(topic.name, index, settings))

    def enforce_retention(self, now_ms: int) -> int:
        deleted = 0
        for topic in self.topics.values():
            if "delete" not in self.effective_configs(topic)["cleanup.policy"]:
                continue
            for plog in topic.partitions:
                deleted += plog.enforce_retention(now_ms)
        return deleted

    def compacted_partitions(self) -> list[tuple[str, int, PartitionLog, dict[str, str]]]:
        """(topic, partition, log, effective configs) of every partition whose
        cleanup.policy includes compact (for the log cleaner)."""
        found = []
        for topic in list(self.topics.values()):
            configs = self.effective_configs(topic)
            if "compact" not in configs["cleanup.policy"]:
                continue
            for index, plog in enumerate(topic.partitions):
                found.append((topic.name, index, plog, configs))
        return found

    def flush_all(self) -> None:
        for topic in self.topics.values():
            for plog in topic.partitions:
                plog.flush()

    def close(self) -> None:
        for topic in self.topics.values():
            for plog in topic.partitions:
                plog.close()
        self.store.close()
