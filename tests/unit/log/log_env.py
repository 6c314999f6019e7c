"""The store under test for the conformance suite (memory, disk or postgres)."""

from __future__ import annotations

from pathlib import Path

from slipstream.log.api import LogConfig, LogStore, PartitionLog
from slipstream.log.disk.store import DiskLogStore
from slipstream.log.memory import MemoryLogStore


class LogEnv:
    """Opens partition logs from one store kind; ``reopen`` simulates a restart."""

    def __init__(self, kind: str, data_dir: Path, database_url: str | None = None) -> None:
        self.kind = kind
        self.data_dir = data_dir
        self.database_url = database_url
        self.store: LogStore = self._new_store()

    def _new_store(self) -> LogStore:
        if self.kind == "memory":
            return MemoryLogStore()
        if self.kind == "postgres":
            from slipstream.log.postgres import PostgresLogStore

            assert self.database_url is not None
            return PostgresLogStore(self.database_url)
        return DiskLogStore(self.data_dir)

    def open(
        self, config: LogConfig | None = None, topic: str = "t", partition: int = 0
    ) -> PartitionLog:
        return self.store.open(topic, partition, config or LogConfig())

    def reopen(
        self, config: LogConfig | None = None, topic: str = "t", partition: int = 0
    ) -> PartitionLog:
        self.store.close()
        if self.kind != "memory":
            self.store = self._new_store()
        return self.open(config, topic, partition)
