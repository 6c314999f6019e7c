"""The postgres log backend: partition logs stored in a PostgreSQL database (asyncpg)."""

from slipstream.log.postgres.metadata import PostgresMetadata
from slipstream.log.postgres.runner import DatabaseError
from slipstream.log.postgres.store import LogFenced, PostgresLog, PostgresLogStore

__all__ = ["DatabaseError", "LogFenced", "PostgresLog", "PostgresLogStore", "PostgresMetadata"]
