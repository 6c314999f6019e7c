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
        await database.heartbeat(conn, 1, listeners)
        await database.heartbeat(conn, 2, listeners[:1])
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
