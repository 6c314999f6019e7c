"""Embedded use: the pytest plugin's fixture, both Broker forms, and the durability policies."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from slipstream.broker.broker import Broker
from slipstream.broker.durability import GroupCommitter


def produce(bootstrap: str, topic: str, count: int) -> list[int]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    offsets: list[int] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(count):
        producer.produce(topic, b"v%d" % i, on_delivery=on_delivery)
    assert producer.flush(15) == 0
    return sorted(offsets)


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "embedded", "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    for _ in range(300):
        msg = consumer.poll(0.1)
        if msg is not None and not msg.error():
            values.append(msg.value())
        if len(values) == count:
            break
    consumer.close()
    return values


def test_pytest_plugin_fixture(slipstream_broker: Broker) -> None:
    # The fixture comes from the installed package's pytest11 entry point.
    assert slipstream_broker.config.storage == "memory"
    assert slipstream_broker.port != 0
    assert produce(slipstream_broker.bootstrap_servers, "fixture-t", 5) == [0, 1, 2, 3, 4]
    assert consume_all(slipstream_broker.bootstrap_servers, "fixture-t", 5) == [b"v%d" % i for i in range(5)]


async def test_async_form_on_disk_keeps_data_across_restart(tmp_path: Path) -> None:
    async with Broker(data_dir=str(tmp_path), port=0) as broker:
        bootstrap = broker.bootstrap_servers
        offsets = await asyncio.to_thread(produce, bootstrap, "disk-t", 10)
        assert offsets == list(range(10))
    async with Broker(data_dir=str(tmp_path), port=0) as again:
        values = await asyncio.to_thread(consume_all, again.bootstrap_servers, "disk-t", 10)
        assert values == [b"v%d" % i for i in range(10)]


def test_fsync_policy_syncs_before_acknowledging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[object] = []
    real_sync = GroupCommitter.sync

    async def counting_sync(self: GroupCommitter, plog: object) -> None:
        await real_sync(self, plog)  # type: ignore[arg-type]
        synced.append(plog)

    monkeypatch.setattr(GroupCommitter, "sync", counting_sync)
    with Broker(data_dir=str(tmp_path), port=0, durability="fsync") as broker:
        assert produce(broker.bootstrap_servers, "sync-t", 20) == list(range(20))
    # Every acks=all produce waited for an fsync; concurrent ones may share one.
    assert synced


def test_page_cache_policy_does_not_fsync_per_produce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    async def no_sync(self: GroupCommitter, plog: object) -> None:
        calls.append(plog)

    monkeypatch.setattr(GroupCommitter, "sync", no_sync)
    with Broker(data_dir=str(tmp_path), port=0) as broker:
        assert produce(broker.bootstrap_servers, "pc-t", 5) == list(range(5))
    assert calls == []


def test_invalid_settings_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="durability must be one of"):
        Broker(durability="sometimes")
    with pytest.raises(ValueError, match="storage must be"):
        Broker(storage="tape")
