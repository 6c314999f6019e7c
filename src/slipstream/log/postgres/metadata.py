"""The broker's metadata documents (topics, cluster id, ACLs, SCRAM users) as rows of the
database, so a broker over PostgreSQL keeps no local state (see log/metadata.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slipstream.log.postgres.runner import DatabaseThread


class PostgresMetadata:
    """Named text documents in ``broker_metadata`` (the data directory's JSON files)."""

    def __init__(self, db: DatabaseThread) -> None:
        self._db = db

    def load(self, name: str) -> str | None:
        body = self._db.with_connection(
            lambda conn: conn.fetchval("SELECT body FROM broker_metadata WHERE name = $1", name)
        )
        return None if body is None else str(body)

    def update(self, name: str, change: Callable[[str | None], str]) -> str:
        """Replace the document by ``change(current)`` with no other update in between
        (brokers of a cluster change shared documents through this)."""

        async def work(conn: Any) -> str:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", name)
                current = await conn.fetchval("SELECT body FROM broker_metadata WHERE name = $1", name)
                body = change(None if current is None else str(current))
                await conn.execute(
                    "INSERT INTO broker_metadata (name, body) VALUES ($1, $2) "
                    "ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body",
                    name,
                    body,
                )
                # Delivered at commit: the cluster's brokers follow the change at once
                # (broker/cluster/member.py listens on this channel).
                await conn.execute("SELECT pg_notify('slipstream_cluster', $1)", name)
                return body

        return self._db.with_connection(work)

    def save(self, name: str, body: str) -> None:
        self._db.with_connection(
            lambda conn: conn.execute(
                "INSERT INTO broker_metadata (name, body) VALUES ($1, $2) "
                "ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body",
                name,
                body,
            )
        )
