"""DiskLogStore: one directory per partition, named ``{topic}-{partition}``."""

from __future__ import annotations

import os
import uuid
from functools import cached_property
from typing import TYPE_CHECKING

from slipstream.log.api import LogConfig

if TYPE_CHECKING:
    from pathlib import Path

    from slipstream.log.disk.disk_log import DiskLog

_DELETE_SUFFIX = "-delete"


def _parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class DiskLogStore:
    """Partition logs under ``data_dir``. A removed partition's directory is first
    renamed to ``<name>.<id>-delete`` (so it vanishes from ``existing()`` at once) and
    then deleted; leftovers of an interrupted removal are cleaned at start."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        # A str until a partition is opened (data_dir): a broker that answers before it
        # opens any need not import pathlib.
        self._root = os.fspath(data_dir)
        os.makedirs(self._root, exist_ok=True)
        self._logs: dict[tuple[str, int], DiskLog] = {}
        for entry in os.scandir(self._root):
            if entry.is_dir() and entry.name.endswith(_DELETE_SUFFIX):
                import shutil  # (rarely needed: a broker start imports it only for leftovers)

                shutil.rmtree(entry.path, ignore_errors=True)

    @cached_property
    def data_dir(self) -> Path:
        from pathlib import Path

        return Path(self._root)

    def _directory(self, topic: str, partition: int) -> Path:
        if not topic or "/" in topic or topic in (".", "..") or partition < 0:
            raise ValueError(f"invalid topic partition {topic!r}/{partition}")
        return self.data_dir / f"{topic}-{partition}"

    def open(self, topic: str, partition: int, config: LogConfig) -> DiskLog:
        log = self._logs.get((topic, partition))
        if log is not None:
            log.update_config(config)
            return log
        # Imported at the first partition's opening, not with the store: a starting broker
        # answers its first requests before it opens any (__consumer_offsets is opened by
        # a worker thread meanwhile).
        from slipstream.log.disk.disk_log import DiskLog

        log = DiskLog.open(self._directory(topic, partition), config)
        self._logs[(topic, partition)] = log
        return log

    def remove(self, topic: str, partition: int) -> None:
        directory = self._directory(topic, partition)
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            log.close()
        if not directory.exists():
            return
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
        os.replace(directory, doomed)
        import shutil

        shutil.rmtree(doomed, ignore_errors=True)

    def existing(self) -> list[tuple[str, int]]:
        found = []
        for entry in os.scandir(self._root):
            if not entry.is_dir():
                continue
            parsed = _parse_partition_dir(entry.name)
            if parsed is not None:
                found.append(parsed)
        return sorted(found)

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()
