"""Fixtures shared across test directories."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slipstream.testing.peers import missing_peer
from slipstream.testing.postgres import PostgresServer, find_postgres_bin, fresh_database


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (skipped locally, failed in CI, if absent)."""
    if find_postgres_bin() is None:
        missing_peer("PostgreSQL is not installed (scripts/setup_postgres.sh installs it)")
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        missing_peer("asyncpg is not installed (pip install -e '.[postgres]')")
    server = PostgresServer(fsync=False)  # the tests crash brokers, never the server
    try:
        server.start()
    except Exception as exc:
        server.stop()
        missing_peer(f"PostgreSQL could not be started: {exc}")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of an empty database of its own."""
    return fresh_database(postgres_server.url)
