"""The database schema of the postgres log store, created and migrated by the broker.

``schema_version`` holds one row: the number of migrations applied. Each migration
runs in the transaction that bumps the version, under an advisory lock, so brokers
starting together over one database migrate it once. A database migrated by a newer
broker is refused rather than guessed at.
"""

from __future__ import annotations

from typing import Any

# Appended to, never edited: a database at version N has run MIGRATIONS[:N].
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE log_partitions (
        id               bigserial PRIMARY KEY,
        topic            text    NOT NULL,
        partition        integer NOT NULL,
        log_start_offset bigint  NOT NULL DEFAULT 0,
        -- the next offset to assign: every commit checks it (see PostgresLogStore.commit)
        next_offset      bigint  NOT NULL DEFAULT 0,
        UNIQUE (topic, partition)
    );
    CREATE TABLE log_batches (
        partition_id  bigint  NOT NULL REFERENCES log_partitions (id) ON DELETE CASCADE,
        base_offset   bigint  NOT NULL,
        last_offset   bigint  NOT NULL,
        segment_base  bigint  NOT NULL,
        max_timestamp bigint  NOT NULL,
        data          bytea   NOT NULL,
        PRIMARY KEY (partition_id, base_offset)
    );
    CREATE TABLE log_aborted_txns (
        partition_id       bigint NOT NULL REFERENCES log_partitions (id) ON DELETE CASCADE,
        segment_base       bigint NOT NULL,
        producer_id        bigint NOT NULL,
        first_offset       bigint NOT NULL,
        last_offset        bigint NOT NULL,
        last_stable_offset bigint NOT NULL,
        PRIMARY KEY (partition_id, last_offset)
    );
    CREATE TABLE broker_metadata (
        name text PRIMARY KEY,
        body text NOT NULL
    );
    """,
    # 2: the cluster (broker/cluster/): live brokers, partition leases, producer-id blocks.
    """
    CREATE TABLE cluster_brokers (
        node_id      integer PRIMARY KEY,
        host         text    NOT NULL,
        port         integer NOT NULL,
        -- database clock (ms) of the last heartbeat: live while within the session
        heartbeat_ms bigint  NOT NULL
    );
    CREATE TABLE partition_leases (
        topic      text    NOT NULL,
        partition  integer NOT NULL,
        owner      integer NOT NULL,
        -- bumped by every new owner: the leader epoch, checked by every commit
        epoch      integer NOT NULL,
        expires_ms bigint  NOT NULL,
        PRIMARY KEY (topic, partition)
    );
    CREATE TABLE producer_id_blocks (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        next_id  bigint  NOT NULL
    );
    """,
    # 3: every advertised listener of a broker, by name ([{"name", "host", "port"}, ...] in
    # the broker's listener order), so an answer on listener L names each broker's L endpoint.
    """
    ALTER TABLE cluster_brokers ADD COLUMN listeners jsonb NOT NULL DEFAULT '[]';
    """,
)

# The database's clock in milliseconds: every broker judges leases and heartbeats by it.
NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

SCHEMA_VERSION = len(MIGRATIONS)
_MIGRATION_LOCK = 0x5EED_0016  # pg_advisory_xact_lock key shared by every broker


class SchemaTooNew(RuntimeError):
    pass


async def migrate(conn: Any) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version found before."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        found = await conn.fetchval("SELECT version FROM schema_version")
        if found is None:
            await conn.execute("INSERT INTO schema_version VALUES (0)")
            found = 0
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the database schema is at version {found}, newer than this broker's "
                f"{SCHEMA_VERSION}: upgrade the broker"
            )
        for statement in MIGRATIONS[found:]:
            await conn.execute(statement)
        await conn.execute("UPDATE schema_version SET version = $1", SCHEMA_VERSION)
        return int(found)
