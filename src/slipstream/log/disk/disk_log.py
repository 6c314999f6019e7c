"""DiskLog: a partition log stored as segment files in one directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from slipstream.log.api import LogConfig
from slipstream.log.disk.checkpoint import sync_directory, write_offset
from slipstream.log.disk.recovery import LOG_START_FILE, recover_log
from slipstream.log.disk.segment import DiskSegment
from slipstream.log.disk.txn_index import load_aborted_indexes

if TYPE_CHECKING:
    from slipstream.log.disk.compaction_space import DiskCompactionSpace
from slipstream.log.policy import below_log_start_count
from slipstream.log.segmented import Segment, SegmentedLog


class DiskLog(SegmentedLog):
    """Segments ``<base>.log/.index/.timeindex`` plus a ``log-start-offset`` checkpoint.

    A rolled segment is fsynced (data and indexes) before the new one is created, so
    recovery only has to validate the last segment.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[DiskSegment],
        log_start_offset: int,
    ) -> None:
        self.directory = directory
        self._closed = False
        super().__init__(config, list[Segment](segments), log_start_offset)

    @classmethod
    def open(cls, directory: Path | str, config: LogConfig) -> DiskLog:
        """Create the log in ``directory`` or recover what is there."""
        directory = Path(directory)
        segments, log_start = recover_log(directory, config.index_interval_bytes)
        load_aborted_indexes(segments, segments[-1].next_offset)
        log = cls(directory, config, segments, log_start)
        # Segments wholly below the log start may survive a crash during DeleteRecords.
        log._delete_leading(below_log_start_count(log._segments, log._log_start))
        return log

    @property
    def closed(self) -> bool:
        return self._closed

    def _create_segment(self, base_offset: int) -> Segment:
        segment = DiskSegment.create(self.directory, base_offset, self._config.index_interval_bytes)
        sync_directory(self.directory)
        return segment

    def _persist_log_start(self) -> None:
        write_offset(self.directory / LOG_START_FILE, self._log_start)

    def _config_changed(self) -> None:
        active = self._segments[-1]
        if isinstance(active, DiskSegment):
            active.set_index_interval(self._config.index_interval_bytes)

    def compaction_space(self) -> DiskCompactionSpace | None:
        # Imported at the first pass, not at start: serving does not need it.
        from slipstream.log.disk.compaction_space import DiskCompactionSpace

        return None if self._closed else DiskCompactionSpace(self)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            super().close()

    def delete(self) -> None:
        self._closed = True
        super().delete()
        shutil.rmtree(self.directory, ignore_errors=True)
