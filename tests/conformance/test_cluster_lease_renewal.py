"""A broker whose renewal waits for a lock keeps its own leases (issue 16).

Commits lock their lease rows FOR KEY SHARE, which a renewal does not wait for
(tests/conformance/test_cluster_lease_locks.py), but a FOR SHARE lock it does wait for:
commits took one before schema version 6, and a broker of that version still running
during an upgrade checks leases that way. Here one transaction holds this broker's lease
rows FOR SHARE for most of a session: the heartbeat waits for it rather than giving up,
so the broker renews its leases when the lock goes and keeps leading at the same epochs
(before, a beat blocked past a third of the session was cancelled and the next one came
a third later: the leases expired, and the broker claimed and reloaded its own
partitions).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import ck_create_topic

from slipstream.broker.cluster import database
from slipstream.testing.broker_process import BrokerProcess
from slipstream.testing.ports import free_port

pytestmark = pytest.mark.conformance

SESSION_MS = 9000
# How long the lease rows are held from right after a renewal: the next beat, a third of
# the session later, waits for the lock longer than a third of the session (where it used
# to give up) and is answered before the leases expire.
HELD_S = 7.0


def held_by(url: str, node: int) -> dict[tuple[str, int], int]:
    async def read() -> dict[tuple[str, int], int]:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            now = await database.now_ms(conn)
            leases = await database.leases(conn)
        finally:
            await conn.close()
        return {tp: lease.epoch for tp, lease in leases.items() if lease.owner == node and lease.expires_ms > now}

    return asyncio.run(read())


async def hold_leases_for_share(url: str, node: int, seconds: float) -> int:
    """Right after the broker's next heartbeat, lock its lease rows FOR SHARE (as commits
    did before schema version 6) for ``seconds``; the database's clock when the lock went."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        first = await heartbeat_ms(conn, node)
        deadline = time.monotonic() + 30
        while await heartbeat_ms(conn, node) == first and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        async with conn.transaction():
            await conn.execute("SELECT 1 FROM partition_leases WHERE owner = $1 FOR SHARE", node)
            await asyncio.sleep(seconds)
        return await database.now_ms(conn)
    finally:
        await conn.close()


async def heartbeat_ms(conn: Any, node: int) -> int:
    return int(await conn.fetchval("SELECT heartbeat_ms FROM cluster_brokers WHERE node_id = $1", node))


async def wait_for_heartbeat_after(url: str, node: int, since_ms: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + 30
        while await heartbeat_ms(conn, node) <= since_ms and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


def test_a_heartbeat_waits_for_a_commit_in_flight_and_keeps_the_leases(
    tmp_path: Path, postgres_url: str, topic_name: str
) -> None:
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "broker.log", port=free_port(),
        extra_args=(
            "--storage", "postgres", "--database-url", postgres_url, "--set", "node.id=1",
            "--set", f"cluster.broker.session.ms={SESSION_MS}", "--set", "offsets.topic.num.partitions=2",
        ),
    )  # fmt: skip
    broker.start(timeout=60)
    try:
        ck_create_topic(broker.bootstrap, topic_name, partitions=2)
        deadline = time.monotonic() + 30
        while len(before := held_by(postgres_url, 1)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        released_ms = asyncio.run(hold_leases_for_share(postgres_url, 1, HELD_S))
        asyncio.run(wait_for_heartbeat_after(postgres_url, 1, released_ms))
        after = held_by(postgres_url, 1)
        log = broker.log_tail(200)
    finally:
        broker.stop()
    assert len(before) == 4, before
    assert after == before, log  # still this broker's, at the same epochs: never lost nor claimed again
    assert "lost the lease" not in log and "heartbeat failed" not in log, log
