"""The SQL of the cluster: the broker registry and the partition leases (asyncpg).

Tables are created by the postgres log store's migrations (log/postgres/schema.py).
Every time is the database's clock (``NOW_MS``), so brokers on machines whose clocks
disagree still agree on who is live and which lease has expired.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...log.postgres.schema import NOW_MS
from .assignment import BrokerRow, Lease, ListenerEndpoint, TopicPartition

# LISTEN/NOTIFY channel: a lease handed over, a broker joined or left, a shared document
# changed - every member runs its next heartbeat at once instead of at its interval.
CHANNEL = "slipstream_cluster"


async def notify(conn: Any, what: str) -> None:
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, what)


@dataclass(frozen=True, slots=True)
class Beat:
    """What one heartbeat statement (``beat``) found."""

    now_ms: int  # the database's clock, as recorded in this broker's heartbeat
    brokers: list[BrokerRow]  # every registered broker, this one as just recorded
    renewed: dict[TopicPartition, int]  # the leases this broker still holds, with epochs
    leases: dict[TopicPartition, Lease]  # every lease, this broker's as just renewed


async def beat(
    conn: Any, node_id: int, listeners: Sequence[ListenerEndpoint], ttl_ms: int, *, timeout_s: float | None = None
) -> Beat:
    """Record this broker's heartbeat and its advertised listeners (the first one is also
    its host and port), extend every lease it still holds, and read every broker and every
    lease: one statement, so one round trip and one transaction per heartbeat (every broker
    pays it every interval). The statement's reads see the rows as they were before its own
    writes, so this broker's heartbeat and renewed leases are put in from what the writes
    returned. The renewal changes only ``expires_ms`` (no key column: a FOR NO KEY UPDATE
    lock), so it does not wait for this broker's commits in flight (they lock their lease
    rows FOR KEY SHARE); it waits only for a claim racing it, or for an older broker's
    lease check during an upgrade (FOR SHARE): ``timeout_s`` (default: the connection's)
    should let it."""
    first = listeners[0]
    endpoints = [{"name": e.name, "host": e.host, "port": e.port} for e in listeners]
    row = await conn.fetchrow(
        "WITH beat AS ("
        "  INSERT INTO cluster_brokers (node_id, host, port, heartbeat_ms, listeners) "
        f"  VALUES ($1, $2, $3, {NOW_MS}, $4::jsonb) ON CONFLICT (node_id) DO UPDATE SET "
        "  host = EXCLUDED.host, port = EXCLUDED.port, heartbeat_ms = EXCLUDED.heartbeat_ms, "
        "  listeners = EXCLUDED.listeners RETURNING heartbeat_ms"
        "), renewed AS ("
        f"  UPDATE partition_leases SET expires_ms = {NOW_MS} + $5 "
        f"  WHERE owner = $1 AND expires_ms > {NOW_MS} RETURNING topic, partition, epoch, expires_ms"
        ") SELECT (SELECT heartbeat_ms FROM beat) AS now, "
        "(SELECT json_agg(json_build_array(node_id, host, port, heartbeat_ms, listeners)) "
        " FROM cluster_brokers)::text AS brokers, "
        "(SELECT json_agg(json_build_array(topic, partition, epoch, expires_ms)) FROM renewed)::text AS renewed, "
        "(SELECT json_agg(json_build_array(topic, partition, owner, epoch, expires_ms)) "
        " FROM partition_leases)::text AS leases",
        node_id,
        first.host,
        first.port,
        json.dumps(endpoints),
        ttl_ms,
        timeout=timeout_s,
    )
    now = int(row["now"])
    rows = {
        r[0]: BrokerRow(r[0], r[1], r[2], r[3], tuple(ListenerEndpoint(e["name"], e["host"], e["port"]) for e in r[4] or ()))
        for r in json.loads(row["brokers"] or "[]")
    }
    rows[node_id] = BrokerRow(node_id, first.host, first.port, now, tuple(listeners))
    leases = {(r[0], r[1]): Lease(r[2], r[3], r[4]) for r in json.loads(row["leases"] or "[]")}
    renewed: dict[TopicPartition, int] = {}
    for topic, partition, epoch, expires_ms in json.loads(row["renewed"] or "[]"):
        renewed[(topic, partition)] = epoch
        leases[(topic, partition)] = Lease(node_id, epoch, expires_ms)
    return Beat(now, [rows[n] for n in sorted(rows)], renewed, leases)


async def brokers(conn: Any) -> list[BrokerRow]:
    rows = await conn.fetch(
        "SELECT node_id, host, port, heartbeat_ms, listeners::text AS listeners FROM cluster_brokers ORDER BY node_id"
    )
    return [
        BrokerRow(
            r["node_id"], r["host"], r["port"], r["heartbeat_ms"],
            tuple(ListenerEndpoint(e["name"], e["host"], e["port"]) for e in json.loads(r["listeners"])),
        )
        for r in rows
    ]  # fmt: skip


async def now_ms(conn: Any) -> int:
    return int(await conn.fetchval(f"SELECT {NOW_MS}"))


async def leave(conn: Any, node_id: int) -> None:
    """A clean stop: this broker is no longer live (its leases were released before)."""
    await conn.execute("UPDATE cluster_brokers SET heartbeat_ms = 0 WHERE node_id = $1", node_id)
    await notify(conn, "left")


async def leases(conn: Any) -> dict[TopicPartition, Lease]:
    rows = await conn.fetch("SELECT topic, partition, owner, epoch, expires_ms FROM partition_leases")
    return {(r["topic"], r["partition"]): Lease(r["owner"], r["epoch"], r["expires_ms"]) for r in rows}


async def claim(conn: Any, node_id: int, wanted: list[TopicPartition], ttl_ms: int) -> dict[TopicPartition, int]:
    """Take the wanted partitions whose lease is free, expired or this node's (a restart);
    each new hold bumps the epoch. Returns the partitions won, with their epochs.

    The epoch is part of a unique key (schema version 6), so this statement locks each
    existing row FOR UPDATE: it waits for the commits in flight of the old owner (they
    hold the row FOR KEY SHARE), and a commit that waited for it finds the new epoch."""
    if not wanted:
        return {}
    # Rows never leased are inserted with DO NOTHING on any conflict, not through an
    # upsert: the epoch key is a second unique index, which ON CONFLICT (topic, partition)
    # does not arbitrate, so two brokers first claiming one partition at once could fail
    # on it. Existing rows are taken by the UPDATE (expired, or this node's own).
    rows = await conn.fetch(
        "WITH w AS (SELECT t, p FROM unnest($1::text[], $2::int[]) AS w(t, p)), "
        "fresh AS (INSERT INTO partition_leases (topic, partition, owner, epoch, expires_ms) "
        f"SELECT t, p, $3, 1, {NOW_MS} + $4 FROM w ON CONFLICT DO NOTHING "
        "RETURNING topic, partition, epoch), "
        "taken AS (UPDATE partition_leases AS l SET owner = $3, epoch = l.epoch + 1, "
        f"expires_ms = {NOW_MS} + $4 FROM w WHERE l.topic = w.t AND l.partition = w.p "
        f"AND (l.expires_ms <= {NOW_MS} OR l.owner = $3) RETURNING l.topic, l.partition, l.epoch) "
        "SELECT topic, partition, epoch FROM fresh UNION ALL SELECT topic, partition, epoch FROM taken",
        [t for t, _ in wanted],
        [p for _, p in wanted],
        node_id,
        ttl_ms,
    )
    if rows:
        await notify(conn, "claimed")  # the others' views (Metadata answers) follow now
    return {(r["topic"], r["partition"]): r["epoch"] for r in rows}


async def release(conn: Any, node_id: int, held: dict[TopicPartition, int]) -> None:
    """Hand leases over now (expired), if still this node's at the same epoch."""
    if not held:
        return
    items = list(held.items())
    await conn.execute(
        "UPDATE partition_leases AS l SET expires_ms = 0 FROM unnest($1::text[], $2::int[], $3::int[]) "
        "AS r(t, p, e) WHERE l.topic = r.t AND l.partition = r.p AND l.epoch = r.e AND l.owner = $4",
        [tp[0] for tp, _ in items],
        [tp[1] for tp, _ in items],
        [e for _, e in items],
        node_id,
    )
    await notify(conn, "released")


async def forget_topic(conn: Any, topic: str) -> None:
    await conn.execute("DELETE FROM partition_leases WHERE topic = $1", topic)
