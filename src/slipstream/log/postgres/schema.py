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
    # 4: a group commit in one statement (one round trip, see PostgresLogStore._store):
    # the lease checks, the next-offset moves and the rows in the transaction of the call.
    # Nothing is written when a lease is lost or a next offset moved: the caller hears
    # which (lost_leases: 1-based positions in the lease arrays; stale_ids: partition
    # ids whose next offset is not the expected one, or that are gone) and retries.
    """
    CREATE FUNCTION slipstream_commit(
        node integer, lease_topics text[], lease_partitions integer[], lease_epochs integer[],
        ids bigint[], expected bigint[], new_ends bigint[], log_starts bigint[],
        batch_partition_ids bigint[], batch_bases bigint[], batch_lasts bigint[],
        batch_segments bigint[], batch_timestamps bigint[], batch_data bytea[],
        aborted_partition_ids bigint[], aborted_segments bigint[], aborted_producers bigint[],
        aborted_firsts bigint[], aborted_lasts bigint[], aborted_stables bigint[],
        OUT lost_leases integer[], OUT stale_ids bigint[]
    ) LANGUAGE plpgsql AS $$
    DECLARE
        held integer[];
    BEGIN
        -- FOR SHARE: a broker claiming one of these leases waits for this commit.
        SELECT coalesce(array_agg(u.i), '{}') INTO held FROM (
            SELECT u.i FROM partition_leases AS l
            JOIN unnest(lease_topics, lease_partitions, lease_epochs) WITH ORDINALITY AS u(t, p, e, i)
              ON l.topic = u.t AND l.partition = u.p
            WHERE l.owner = node AND l.epoch = u.e
              AND l.expires_ms > (extract(epoch from clock_timestamp()) * 1000)::bigint
            FOR SHARE OF l
        ) AS u;
        IF cardinality(held) < cardinality(lease_topics) THEN
            lost_leases := ARRAY(
                SELECT i FROM generate_subscripts(lease_topics, 1) AS i WHERE NOT i = ANY(held)
            );
            RETURN;
        END IF;
        -- Locked (in one order: two commits never wait on each other's rows) so no other
        -- writer moves them between this check and the update; the check's snapshot,
        -- taken after the locks, sees their latest committed values.
        PERFORM 1 FROM log_partitions WHERE id = ANY(ids) ORDER BY id FOR UPDATE;
        stale_ids := ARRAY(
            SELECT u.id FROM unnest(ids, expected) AS u(id, e)
            LEFT JOIN log_partitions AS p ON p.id = u.id
            WHERE p.next_offset IS DISTINCT FROM u.e
        );
        IF cardinality(stale_ids) > 0 THEN
            RETURN;
        END IF;
        UPDATE log_partitions AS p
           SET next_offset = u.new_end, log_start_offset = GREATEST(p.log_start_offset, u.log_start)
          FROM unnest(ids, new_ends, log_starts) AS u(id, new_end, log_start)
         WHERE p.id = u.id;
        INSERT INTO log_batches (partition_id, base_offset, last_offset, segment_base, max_timestamp, data)
        SELECT * FROM unnest(
            batch_partition_ids, batch_bases, batch_lasts, batch_segments, batch_timestamps, batch_data
        );
        -- May repeat rows of a commit whose answer was lost (PostgresLogStore._reconciled
        -- keeps its aborted rows): stored once.
        INSERT INTO log_aborted_txns (
            partition_id, segment_base, producer_id, first_offset, last_offset, last_stable_offset
        )
        SELECT * FROM unnest(
            aborted_partition_ids, aborted_segments, aborted_producers, aborted_firsts,
            aborted_lasts, aborted_stables
        ) ON CONFLICT DO NOTHING;
    END
    $$;
    """,
    # 5: batches compressed with lz4 rather than pglz when the server has it (14+, built
    # with lz4, as Debian's and the managed services' are). A batch of ~1 MB is TOASTed
    # and compressed first: lz4 takes half pglz's CPU on batches that compress (records
    # alike) and a little less on ones that do not (already compressed by the client),
    # and decompresses faster when a leader loads a partition. Values stored before keep
    # their method; a server without lz4 keeps pglz.
    """
    DO $$
    BEGIN
        EXECUTE 'ALTER TABLE log_batches ALTER COLUMN data SET COMPRESSION lz4';
    EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR syntax_error THEN
        NULL;
    END
    $$;
    """,
    # 6: commits lock their lease rows FOR KEY SHARE (was FOR SHARE), so the heartbeat's
    # renewal - an UPDATE of expires_ms only, which takes FOR NO KEY UPDATE - never waits
    # for a commit in flight. The fence stays exact through the unique key on
    # (topic, partition, epoch): it makes the epoch a key column for row locks, so any
    # UPDATE that moves it (a claim: a new owner or a restarted one) takes FOR UPDATE,
    # which conflicts with FOR KEY SHARE. Either the claim waits for the commit to end,
    # and the new leader's load (after the claim) holds what it stored; or the commit
    # waits for the claim, then re-reads the row (EvalPlanQual), finds the new epoch and
    # writes nothing. Old brokers still running during an upgrade claim with their own
    # statement: the key makes their claims conflict too. Renewals leave the lockers of
    # the row they replace on the new version, so a claim after a renewal still waits.
    """
    ALTER TABLE partition_leases ADD CONSTRAINT partition_leases_epoch_key UNIQUE (topic, partition, epoch);
    CREATE OR REPLACE FUNCTION slipstream_commit(
        node integer, lease_topics text[], lease_partitions integer[], lease_epochs integer[],
        ids bigint[], expected bigint[], new_ends bigint[], log_starts bigint[],
        batch_partition_ids bigint[], batch_bases bigint[], batch_lasts bigint[],
        batch_segments bigint[], batch_timestamps bigint[], batch_data bytea[],
        aborted_partition_ids bigint[], aborted_segments bigint[], aborted_producers bigint[],
        aborted_firsts bigint[], aborted_lasts bigint[], aborted_stables bigint[],
        OUT lost_leases integer[], OUT stale_ids bigint[]
    ) LANGUAGE plpgsql AS $$
    DECLARE
        held integer[];
    BEGIN
        -- FOR KEY SHARE: a claim (which moves the epoch, a key column) waits for this
        -- commit; a renewal (expires_ms only) does not.
        SELECT coalesce(array_agg(u.i), '{}') INTO held FROM (
            SELECT u.i FROM partition_leases AS l
            JOIN unnest(lease_topics, lease_partitions, lease_epochs) WITH ORDINALITY AS u(t, p, e, i)
              ON l.topic = u.t AND l.partition = u.p
            WHERE l.owner = node AND l.epoch = u.e
              AND l.expires_ms > (extract(epoch from clock_timestamp()) * 1000)::bigint
            FOR KEY SHARE OF l
        ) AS u;
        IF cardinality(held) < cardinality(lease_topics) THEN
            lost_leases := ARRAY(
                SELECT i FROM generate_subscripts(lease_topics, 1) AS i WHERE NOT i = ANY(held)
            );
            RETURN;
        END IF;
        -- Locked (in one order: two commits never wait on each other's rows) so no other
        -- writer moves them between this check and the update; the check's snapshot,
        -- taken after the locks, sees their latest committed values.
        PERFORM 1 FROM log_partitions WHERE id = ANY(ids) ORDER BY id FOR UPDATE;
        stale_ids := ARRAY(
            SELECT u.id FROM unnest(ids, expected) AS u(id, e)
            LEFT JOIN log_partitions AS p ON p.id = u.id
            WHERE p.next_offset IS DISTINCT FROM u.e
        );
        IF cardinality(stale_ids) > 0 THEN
            RETURN;
        END IF;
        UPDATE log_partitions AS p
           SET next_offset = u.new_end, log_start_offset = GREATEST(p.log_start_offset, u.log_start)
          FROM unnest(ids, new_ends, log_starts) AS u(id, new_end, log_start)
         WHERE p.id = u.id;
        INSERT INTO log_batches (partition_id, base_offset, last_offset, segment_base, max_timestamp, data)
        SELECT * FROM unnest(
            batch_partition_ids, batch_bases, batch_lasts, batch_segments, batch_timestamps, batch_data
        );
        -- May repeat rows of a commit whose answer was lost (PostgresLogStore._reconciled
        -- keeps its aborted rows): stored once.
        INSERT INTO log_aborted_txns (
            partition_id, segment_base, producer_id, first_offset, last_offset, last_stable_offset
        )
        SELECT * FROM unnest(
            aborted_partition_ids, aborted_segments, aborted_producers, aborted_firsts,
            aborted_lasts, aborted_stables
        ) ON CONFLICT DO NOTHING;
    END
    $$;
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
