"""Slipstream's poll consumer with ``isolation_level="read_committed"`` against the real
in-process broker: aborted records are dropped, the LSO holds back an open
transaction, control records never reach the application; read_uncommitted sees
every data record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from client_helpers import create_topic, fast_consumer_settings

from slipstream.broker.broker import Broker
from slipstream.client.connection import BrokerConnection
from slipstream.client.consumer import Consumer
from slipstream.testing.transactions import MixedLog, write_mixed_transactions

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0) as b:
        yield b


def write(broker: Broker) -> MixedLog:
    async def go() -> MixedLog:
        await create_topic(broker.bootstrap_servers, "t", 1)
        conn = await BrokerConnection("127.0.0.1", broker.port).connect()
        try:
            return await write_mixed_transactions(conn, "t")
        finally:
            await conn.close()

    return asyncio.run(go())


def read_all(broker: Broker, isolation: str, expected: int) -> list[bytes | None]:
    c = Consumer(broker.bootstrap_servers, **fast_consumer_settings(isolation_level=isolation))
    got: list[bytes | None] = []
    try:
        c.assign([("t", 0)])
        deadline = time.monotonic() + 12
        while len(got) < expected:
            assert time.monotonic() < deadline, f"only {len(got)} of {expected} records: {got}"
            got.extend(m.value for m in c.poll(0.05))
        quiet = time.monotonic() + 0.5  # nothing more arrives
        while time.monotonic() < quiet:
            got.extend(m.value for m in c.poll(0.05))
        return got
    finally:
        c.close()


def test_read_committed_sees_only_committed_records(broker: Broker) -> None:
    mixed = write(broker)
    assert read_all(broker, "read_committed", len(mixed.read_committed)) == mixed.read_committed


def test_read_uncommitted_sees_every_data_record(broker: Broker) -> None:
    mixed = write(broker)
    assert read_all(broker, "read_uncommitted", len(mixed.read_uncommitted)) == mixed.read_uncommitted
