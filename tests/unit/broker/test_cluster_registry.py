"""The broker registry in PostgreSQL: each broker's advertised listeners by name, and a
registry migrated from before listeners were registered."""

from __future__ import annotations

import asyncio
from typing import Any

from slipstream.broker.cluster import database
from slipstream.broker.cluster.assignment import ListenerEndpoint
from slipstream.log.postgres.schema import MIGRATIONS, SCHEMA_VERSION, migrate

# asyncpg is imported only inside tests: the postgres_url fixture reports it missing.


def run(url: str, work: Any) -> Any:
    import asyncpg

    async def go() -> Any:
        conn = await asyncpg.connect(url)
        try:
            return await work(conn)
        finally:
            await conn.close()

    return asyncio.run(go())


def test_a_heartbeat_registers_every_listener_in_order(postgres_url: str) -> None:
    listeners = [ListenerEndpoint("PLAINTEXT", "10.0.0.1", 9092), ListenerEndpoint("INTERNAL", "broker-1.internal", 19092)]

    async def work(conn: Any) -> Any:
        await migrate(conn)
        await database.beat(conn, 1, listeners, 60_000)
        await database.beat(conn, 2, listeners[:1], 60_000)
        return await database.brokers(conn)

    one, two = run(postgres_url, work)
    assert (one.node_id, one.host, one.port, one.listeners) == (1, "10.0.0.1", 9092, tuple(listeners))
    assert one.endpoint("INTERNAL") == ("broker-1.internal", 19092)
    assert two.listeners == tuple(listeners[:1])
    assert two.endpoint("INTERNAL") is None


def test_brokers_registered_before_listeners_were_keep_their_endpoint(postgres_url: str) -> None:
    async def work(conn: Any) -> Any:
        # A database at schema version 2, with a broker of that version registered.
        async with conn.transaction():
            await conn.execute("CREATE TABLE schema_version (version integer NOT NULL)")
            await conn.execute("INSERT INTO schema_version VALUES (2)")
            for statement in MIGRATIONS[:2]:
                await conn.execute(statement)
        await conn.execute("INSERT INTO cluster_brokers VALUES (7, 'old-host', 9000, 0)")
        assert await migrate(conn) == 2
        assert await conn.fetchval("SELECT version FROM schema_version") == SCHEMA_VERSION
        return await database.brokers(conn)

    (old,) = run(postgres_url, work)
    assert old.listeners == ()
    assert old.endpoint("PLAINTEXT") == old.endpoint("INTERNAL") == ("old-host", 9000)


def test_one_beat_records_the_heartbeat_renews_and_reads_brokers_and_leases(postgres_url: str) -> None:
    listeners = [ListenerEndpoint("PLAINTEXT", "10.0.0.1", 9092)]
    others = [ListenerEndpoint("PLAINTEXT", "10.0.0.2", 9092)]

    async def work(conn: Any) -> Any:
        await migrate(conn)
        await database.beat(conn, 2, others, 60_000)
        await database.claim(conn, 1, [("t", 0), ("t", 1)], 60_000)
        await database.claim(conn, 2, [("t", 2)], 60_000)
        await conn.execute("UPDATE partition_leases SET expires_ms = 0 WHERE topic = 't' AND partition = 1")
        first = await database.beat(conn, 1, listeners, 60_000)  # not registered before
        return first, await database.brokers(conn), await database.leases(conn)

    beat, rows, leases = run(postgres_url, work)
    # What it returns is what is stored now, its own heartbeat and renewals included.
    assert [(b.node_id, b.host, b.listeners) for b in beat.brokers] == [(b.node_id, b.host, b.listeners) for b in rows]
    assert [b.node_id for b in beat.brokers] == [1, 2]
    me = beat.brokers[0]
    assert me.listeners == tuple(listeners)
    assert 0 < beat.now_ms == me.heartbeat_ms == rows[0].heartbeat_ms
    assert beat.renewed == {("t", 0): 1}  # the expired lease of t-1 is not renewed
    assert beat.leases == leases
    assert set(leases) == {("t", 0), ("t", 1), ("t", 2)}
    assert leases[("t", 0)].owner == 1 and leases[("t", 0)].expires_ms >= beat.now_ms + 60_000
    assert leases[("t", 1)].expires_ms == 0
    assert leases[("t", 2)].owner == 2
