"""What only the postgres store has: the two-writer guard, schema versions, group
commit across partitions, metadata documents, a failed commit kept for a retry, a
commit whose answer was lost recognised as stored, and the lease check of a cluster's
commits. Every test runs over both ways a commit is stored: one statement (small
commits) and COPY in a transaction (large ones)."""

from __future__ import annotations

import asyncio

import pytest
from log_batches import make_batch

from slipstream.log.api import AbortedTxn, LogConfig
from slipstream.log.postgres import DatabaseError, LogFenced, PostgresLogStore
from slipstream.log.postgres import store as store_module
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


@pytest.fixture(autouse=True, params=["statement", "streamed"])
def commit_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "streamed":  # every commit past the size that streams
        monkeypatch.setattr(store_module, "STATEMENT_COMMIT_BYTES", -1)


def test_a_commit_without_the_lease_at_its_epoch_stores_nothing(postgres_url: str) -> None:
    store = PostgresLogStore(postgres_url, node_id=1)
    try:
        log = store.open("t", 0, LogConfig())
        other = store.open("t", 1, LogConfig())
        query(
            postgres_url,
            "INSERT INTO partition_leases VALUES ('t', 0, 1, 5, 1e15), ('t', 1, 1, 3, 1e15)",
        )
        log.lease_epoch, other.lease_epoch = 5, 3
        log.append([make_batch([1])], now_ms=0, log_append_time=False)
        log.add_aborted_txn(AbortedTxn(producer_id=7, first_offset=0, last_offset=0, last_stable_offset=0))
        log.flush()
        assert query(postgres_url, "SELECT count(*) FROM log_aborted_txns") == [(1,)]
        query(postgres_url, "UPDATE partition_leases SET owner = 2, epoch = 6 WHERE partition = 0")
        log.append([make_batch([2])], now_ms=0, log_append_time=False)
        other.append([make_batch([3])], now_ms=0, log_append_time=False)
        with pytest.raises(LogFenced, match="epoch 5"):
            log.flush()
        other.flush()  # the commit goes on without the fenced partition
        assert query(postgres_url, "SELECT p.partition, b.base_offset FROM log_batches AS b "
                     "JOIN log_partitions AS p ON p.id = b.partition_id ORDER BY 1, 2") == [(0, 0), (1, 0)]  # fmt: skip
        query(postgres_url, "UPDATE partition_leases SET expires_ms = 0 WHERE partition = 1")
        other.append([make_batch([4])], now_ms=0, log_append_time=False)
        with pytest.raises(LogFenced, match="expired"):
            other.flush()
        assert query(postgres_url, "SELECT partition, next_offset FROM log_partitions ORDER BY 1") == [(0, 1), (1, 1)]
    finally:
        with pytest.raises(LogFenced):
            store.close()


def test_a_second_writer_of_a_partition_is_fenced(postgres_url: str) -> None:
    first, second = PostgresLogStore(postgres_url), PostgresLogStore(postgres_url)
    try:
        a = first.open("t", 0, LogConfig())
        b = second.open("t", 0, LogConfig())
        a.append([make_batch([1])], now_ms=0, log_append_time=False)
        a.flush()
        # b never saw offset 0 and assigns it again: its commit must fail, and keep failing.
        assert b.append([make_batch([2])], now_ms=0, log_append_time=False).base_offset == 0
        with pytest.raises(LogFenced) as fenced:
            b.flush()
        # also an OSError: the coordinators answer a failed write of their log retriably
        assert isinstance(fenced.value, OSError)
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


def test_a_commit_whose_answer_was_lost_is_not_taken_for_another_writer(postgres_url: str) -> None:
    """The database stored a commit but the connection died before saying so (a server
    restart): the rows come back for the next commit, which finds them already stored
    and goes on, instead of fencing the log as if another broker had written it."""
    store = PostgresLogStore(postgres_url)
    log = store.open("t", 0, LogConfig())
    log.append([make_batch([1]), make_batch([2, 3])], now_ms=0, log_append_time=False)
    log.add_aborted_txn(AbortedTxn(producer_id=7, first_offset=0, last_offset=2, last_stable_offset=0))
    real_store = store._store

    async def answer_lost(conn: object, *, work: list[object]) -> None:
        await real_store(conn, work=work)  # committed on leaving the transaction...
        raise ConnectionResetError("the answer never came")  # ...and then the connection went

    store._store = answer_lost  # type: ignore[method-assign]
    with pytest.raises(OSError):
        log.flush()
    store._store = real_store  # type: ignore[method-assign]
    log.append([make_batch([4])], now_ms=0, log_append_time=False)
    log.flush()
    assert query(postgres_url, "SELECT base_offset, last_offset FROM log_batches ORDER BY 1") == [
        (0, 0), (1, 2), (3, 3),
    ]  # fmt: skip
    assert query(postgres_url, "SELECT producer_id, last_offset FROM log_aborted_txns") == [(7, 2)]
    assert query(postgres_url, "SELECT next_offset FROM log_partitions") == [(4,)]
    assert log.committed_end == 4
    store.close()


def test_driver_errors_are_storage_errors(postgres_url: str) -> None:
    """A lost connection or a server shutting down reaches the broker as an OSError, which
    it answers with a retriable storage error (as for a failing disk)."""
    import asyncpg

    store = PostgresLogStore(postgres_url)

    async def connection_gone() -> None:
        raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    try:
        with pytest.raises(DatabaseError, match="closed in the middle") as raised:
            store.database.run(connection_gone())
        assert isinstance(raised.value, OSError)
    finally:
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


def test_batches_are_compressed_with_lz4_when_the_server_has_it(postgres_url: str) -> None:
    lz4 = query(postgres_url, "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
    store = PostgresLogStore(postgres_url)
    try:
        log = store.open("t", 0, LogConfig())
        log.append([make_batch([1000] * 200, value=b"x" * 1000)], now_ms=0, log_append_time=False)
        log.flush()
    finally:
        store.close()
    expected = "lz4" if lz4 == [(True,)] else "pglz"
    assert query(postgres_url, "SELECT pg_column_compression(data) FROM log_batches") == [(expected,)]
    store = PostgresLogStore(postgres_url)
    try:
        assert store.open("t", 0, LogConfig()).log_end_offset == 200
    finally:
        store.close()


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
