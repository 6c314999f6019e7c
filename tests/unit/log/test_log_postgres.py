"""What only the postgres store has: the two-writer guard, schema versions, group
commit across partitions, metadata documents, and a failed commit kept for a retry."""

from __future__ import annotations

import asyncio

import pytest
from log_batches import make_batch

from slipstream.log.api import LogConfig
from slipstream.log.postgres import LogFenced, PostgresLogStore
from slipstream.log.postgres.schema import SCHEMA_VERSION, SchemaTooNew, migrate

# asyncpg is imported only inside tests: the postgres_url fixture reports it missing
# (skipped locally, failed in CI) like a missing server.


def query(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    import asyncpg

    async def run() -> list[tuple[object, ...]]:
        conn = await asyncpg.connect(url)
        try:
            return [tuple(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()

    return asyncio.run(run())


def test_a_second_writer_of_a_partition_is_fenced(postgres_url: str) -> None:
    first, second = PostgresLogStore(postgres_url), PostgresLogStore(postgres_url)
    try:
        a = first.open("t", 0, LogConfig())
        b = second.open("t", 0, LogConfig())
        a.append([make_batch([1])], now_ms=0, log_append_time=False)
        a.flush()
        # b never saw offset 0 and assigns it again: its commit must fail, and keep failing.
        assert b.append([make_batch([2])], now_ms=0, log_append_time=False).base_offset == 0
        with pytest.raises(LogFenced):
            b.flush()
        with pytest.raises(LogFenced):
            b.flush()
        a.append([make_batch([3])], now_ms=0, log_append_time=False)
        a.flush()
        rows = query(postgres_url, "SELECT base_offset, last_offset FROM log_batches ORDER BY base_offset")
        assert rows == [(0, 0), (1, 1)]
    finally:
        first.close()
        with pytest.raises(LogFenced):  # close commits what is queued: still refused
            second.close()


def test_one_commit_stores_every_partitions_appends(postgres_url: str) -> None:
    store = PostgresLogStore(postgres_url)
    logs = [store.open("t", p, LogConfig()) for p in range(3)]
    for p, log in enumerate(logs):
        log.append([make_batch([p] * (p + 1))], now_ms=0, log_append_time=False)
    assert query(postgres_url, "SELECT count(*) FROM log_batches") == [(0,)]
    logs[0].flush()  # the barrier of one partition commits them all, in one transaction
    assert query(postgres_url, "SELECT count(*) FROM log_batches") == [(3,)]
    assert query(postgres_url, "SELECT partition, next_offset FROM log_partitions ORDER BY partition") == [
        (0, 1), (1, 2), (2, 3),
    ]  # fmt: skip
    store.close()


def test_a_failed_commit_is_retried_by_the_next_one(postgres_url: str) -> None:
    store = PostgresLogStore(postgres_url)
    log = store.open("t", 0, LogConfig())
    log.append([make_batch([1])], now_ms=0, log_append_time=False)
    query(postgres_url, "ALTER TABLE log_batches RENAME TO log_batches_away")
    with pytest.raises(Exception, match="log_batches"):
        log.flush()
    query(postgres_url, "ALTER TABLE log_batches_away RENAME TO log_batches")
    log.append([make_batch([2])], now_ms=0, log_append_time=False)
    log.flush()
    assert query(postgres_url, "SELECT base_offset FROM log_batches ORDER BY 1") == [(0,), (1,)]
    store.close()


def test_schema_is_versioned_and_a_newer_one_is_refused(postgres_url: str) -> None:
    import asyncpg

    PostgresLogStore(postgres_url).close()
    PostgresLogStore(postgres_url).close()  # migrating again changes nothing
    assert query(postgres_url, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    query(postgres_url, "UPDATE schema_version SET version = version + 1")

    async def migrate_again() -> None:
        conn = await asyncpg.connect(postgres_url)
        try:
            await migrate(conn)
        finally:
            await conn.close()

    with pytest.raises(SchemaTooNew, match="newer than this broker"):
        asyncio.run(migrate_again())


def test_metadata_documents_round_trip(postgres_url: str) -> None:
    store = PostgresLogStore(postgres_url)
    meta = store.metadata()
    assert meta.load("topics.json") is None
    meta.save("topics.json", '{"topics": {}}')
    meta.save("topics.json", '{"topics": {"a": 1}}')
    store.close()
    store = PostgresLogStore(postgres_url)
    assert store.metadata().load("topics.json") == '{"topics": {"a": 1}}'
    store.close()
