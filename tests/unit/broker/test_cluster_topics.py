"""Brokers of a cluster share one topics document: each writes only what it changed
(merged under the database's lock, here a plain dict), and follows the others' changes."""

from __future__ import annotations

from collections.abc import Callable

from slipstream.broker.config import BrokerConfig
from slipstream.broker.topics import TopicManager
from slipstream.log.memory import MemoryLogStore


class SharedDocuments:
    """The database's broker_metadata table, as far as TopicManager can tell."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {}

    def load(self, name: str) -> str | None:
        return self.docs.get(name)

    def save(self, name: str, body: str) -> None:
        self.docs[name] = body

    def update(self, name: str, change: Callable[[str | None], str]) -> str:
        self.docs[name] = change(self.docs.get(name))
        return self.docs[name]


def broker(shared: SharedDocuments) -> TopicManager:
    topics = TopicManager(BrokerConfig(storage="memory"), MemoryLogStore(), shared)
    topics.load()
    return topics


def follow(topics: TopicManager) -> bool:
    text = topics.fetch_document()
    return text is not None and topics.apply_document(text)


def test_a_topic_created_on_one_broker_appears_on_the_others_with_the_same_id() -> None:
    shared = SharedDocuments()
    a, b = broker(shared), broker(shared)
    created = a.create("orders", 3)
    assert b.get("orders") is None
    assert follow(b)
    found = b.get("orders")
    assert found is not None and found.topic_id == created.topic_id and len(found.partitions) == 3
    assert not follow(b)  # nothing new


def test_each_broker_writes_only_what_it_changed() -> None:
    shared = SharedDocuments()
    a, b = broker(shared), broker(shared)
    a.create("one", 1)
    follow(b)
    b.add_partitions("one", 4)  # b grows it; a has not seen that yet...
    a.create("two", 2)  # ...and a's save must not shrink it back
    c = broker(shared)
    one, two = c.get("one"), c.get("two")
    assert one is not None and len(one.partitions) == 4
    assert two is not None and len(two.partitions) == 2


def test_deletes_and_creates_of_two_brokers_both_land() -> None:
    shared = SharedDocuments()
    a, b = broker(shared), broker(shared)
    a.create("doomed", 1)
    follow(b)
    b.delete("doomed")
    a.create("kept", 1)  # a catches up before creating: "doomed" is gone there too
    assert a.get("doomed") is None
    c = broker(shared)
    assert sorted(c.topics) == ["kept"]


def test_a_save_does_not_bring_back_a_topic_deleted_elsewhere() -> None:
    shared = SharedDocuments()
    a, b = broker(shared), broker(shared)
    a.create("doomed", 1)
    a.create("other", 1)
    follow(b)
    b.delete("doomed")
    a.set_configs("other", {"retention.ms": "1000"})  # a saves with a stale "doomed" in memory
    c = broker(shared)
    assert sorted(c.topics) == ["other"]
    other = c.get("other")
    assert other is not None and other.configs == {"retention.ms": "1000"}


def test_creating_a_topic_another_broker_just_created_finds_it() -> None:
    from slipstream.protocol.errors import ErrorCode, KafkaError

    shared = SharedDocuments()
    a, b = broker(shared), broker(shared)
    first = a.create("race", 2)
    try:
        b.create("race", 2)
    except KafkaError as exc:
        assert exc.code == ErrorCode.TOPIC_ALREADY_EXISTS
    else:
        raise AssertionError("the second create should have found the topic")
    found = b.get("race")
    assert found is not None and found.topic_id == first.topic_id


def test_internal_topics_are_ensured_once_when_brokers_start_together() -> None:
    shared = SharedDocuments()
    a, b = broker(shared), broker(shared)  # both loaded before either created it
    assert a.ensure("__consumer_offsets", 6, {"cleanup.policy": "compact"})
    assert not b.ensure("__consumer_offsets", 6, {"cleanup.policy": "compact"})
    found, created = b.get("__consumer_offsets"), a.get("__consumer_offsets")
    assert found is not None and created is not None and found.topic_id == created.topic_id
