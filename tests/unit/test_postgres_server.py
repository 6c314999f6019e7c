"""slipstream.testing.postgres: a stopped server's log can be kept (bench/cluster.py
--keep), though its data directory is removed."""

from __future__ import annotations

from pathlib import Path

from slipstream.testing.postgres import PostgresServer


def test_stop_keeps_the_server_log_where_asked_and_removes_the_rest(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    # postgres_server: skipped locally or failed in CI, as the others, without PostgreSQL.
    kept = tmp_path / "postgres.log"
    server = PostgresServer(fsync=False, keep_log=kept)
    server.start()
    root = server._root
    assert root is not None
    server.stop()
    assert not root.exists()
    assert "database system is ready to accept connections" in kept.read_text()


def test_without_keep_log_nothing_is_left(postgres_server: PostgresServer) -> None:
    server = PostgresServer(fsync=False)
    server.start()
    root = server._root
    assert root is not None
    server.stop()
    assert not root.exists()
