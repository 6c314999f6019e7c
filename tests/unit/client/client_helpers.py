"""Helpers shared by the client's in-process broker tests (conftest puts this dir on sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from confluent_kafka import Producer as CkProducer

from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.assignors import TopicPartition
from slipstream.client.cluster import Cluster
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.coordinator_locator import CoordinatorLocator
from slipstream.client.offsets import GroupOffsets
from slipstream.client.rebalance_listener import RebalanceListener

DEADLINE_S = 15.0


def fast_consumer_settings(**overrides: Any) -> dict[str, Any]:
    """Consumer settings that make groups, fetches and retries quick in tests; ``overrides`` win."""
    return dict(
        auto_offset_reset="earliest",
        heartbeat_interval_ms=100,
        session_timeout_ms=6000,
        fetch_max_wait_ms=100,
        retry_backoff_ms=20,
        retry_backoff_max_ms=200,
    ) | overrides


@contextlib.asynccontextmanager
async def group_broker() -> AsyncIterator[Broker]:
    """A memory broker that forms groups at once and accepts short session timeouts."""
    async with Broker(
        storage="memory", port=0, group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500
    ) as b:
        yield b


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(name, partitions)
    finally:
        await cluster.close()


# ---------------------------------------------------------------------------- groups


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    p = CkProducer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5})
    for partition, n in per_partition.items():
        for i in range(n):
            p.produce(topic, key=f"k{i}".encode(), value=f"{topic}-{partition}-{i}".encode(), partition=partition)
    assert p.flush(15) == 0


async def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    await asyncio.to_thread(_produce, bootstrap, topic, per_partition)


class Ledger:
    """Who owns what, across all members; records every violation of single ownership."""

    def __init__(self) -> None:
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []

    def acquire(self, member: str, tps: list[TopicPartition]) -> None:
        for tp in tps:
            other = self.owner.get(tp)
            if other is not None and other != member:
                self.violations.append(f"{tp} assigned to {member} while {other} owns it")
            self.owner[tp] = member

    def release(self, member: str, tps: list[TopicPartition]) -> None:
        for tp in tps:
            if self.owner.get(tp) == member:
                del self.owner[tp]

    def owned_by(self, member: str) -> set[TopicPartition]:
        return {tp for tp, m in self.owner.items() if m == member}


class Recorder(RebalanceListener):
    def __init__(self, name: str, ledger: Ledger) -> None:
        self.name = name
        self.ledger = ledger
        self.events: list[tuple[str, list[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))
        self.ledger.release(self.name, revoked)

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.events.append(("lost", lost))
        self.ledger.release(self.name, lost)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))
        self.ledger.acquire(self.name, assigned)

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]


async def committed_offsets(
    bootstrap: str, group_id: str, tps: list[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """The group's committed offset of each partition (None: nothing committed), read with a
    client of its own."""
    config = ConsumerConfig(bootstrap_servers=bootstrap, group_id=group_id)
    cluster = Cluster(bootstrap)
    locator = CoordinatorLocator(cluster, config)
    try:
        got = await GroupOffsets(locator, config).fetch_committed(tps, timeout_s=10)
        return {tp: (om.offset if om is not None else None) for tp, om in got.items()}
    finally:
        await locator.close()
        await cluster.close()
