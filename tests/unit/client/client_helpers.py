"""Helpers shared by the client's in-process broker tests (conftest puts this dir on sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.cluster import Cluster

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
