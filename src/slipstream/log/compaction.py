"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

``plan_compaction`` (loop thread, cheap) snapshots the closed segments to clean;
``CompactionJob.run`` (worker thread) builds the key -> offset map and writes cleaned
segments; ``CompactionJob.install`` (loop thread) swaps them in, on disk through the
crash-safe marker of ``swap.py``. Which records survive, and why, is written down in
docs/ARCHITECTURE.md ("Log compaction").
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import weakref
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

from slipstream.log.api import AbortedTxn, PartitionLog
from slipstream.log.disk.checkpoint import sync_directory
from slipstream.log.disk.disk_log import DiskLog
from slipstream.log.disk.index import SegmentIndexes
from slipstream.log.disk.segment import DiskSegment, data_path
from slipstream.log.disk.swap import (
    SEGMENT_SUFFIXES,
    STAGING_DIR,
    SWAP_MARKER,
    segment_file,
    write_swap_marker,
)
from slipstream.log.memory import MemoryLog, MemorySegment
from slipstream.log.policy import INT32_MAX
from slipstream.log.record_filter import (
    RecordSpan,
    UnreadableRecords,
    delete_horizon,
    empty_batch,
    rebuild_batch,
    record_spans,
)
from slipstream.log.segmented import Segment, SegmentedLog
from slipstream.log.txn_cleaning import TxnCleaningState
from slipstream.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    parse_header,
)

log = logging.getLogger(__name__)

_READ_WINDOW = 1 << 20
_INT64_MAX = (1 << 63) - 1
_ABORT_TYPE = b"\x00\x00"  # a control record key's type field (int16): 0 = ABORT


class CompactionError(Exception):
    """A pass that cannot go on (e.g. a damaged batch in a closed segment)."""


class CompactionCancelled(Exception):
    """The job was cancelled while its worker was running."""


def _step(name: str) -> None:
    """A point of the disk swap; tests replace this to simulate a crash right there."""


@dataclass(slots=True)
class CompactionStats:
    """What one pass did. ``next_delete_horizon_ms`` is the earliest horizon among the
    tombstones still kept (None if none): a pass at or after it has work to do."""

    groups_cleaned: int = 0
    segments_before: int = 0  # segments replaced
    segments_after: int = 0  # segments that replaced them
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    batches_removed: int = 0
    batches_rewritten: int = 0
    batches_unreadable: int = 0  # kept as they are: codec or records not decodable
    aborted_batches_removed: int = 0  # data batches of aborted transactions
    markers_removed: int = 0  # transaction markers past their delete horizon
    next_delete_horizon_ms: int | None = None
    installed: bool = False
    aborted: str | None = None  # why the cleaned segments were not swapped in


# ------------------------------------------------------------------ reading batches


def _checked(header: BatchHeader, batch: bytes | memoryview, where: str) -> None:
    if header.magic != 2 or header.size < HEADER_SIZE or len(batch) != header.size:
        raise CompactionError(f"{where}: no valid batch header at offset {header.base_offset}")
    if compute_crc(batch) != header.crc:
        raise CompactionError(f"{where}: CRC mismatch in the batch at offset {header.base_offset}")


class _MemorySource:
    def __init__(self, batches: list[bytes], name: str) -> None:
        self._batches = batches
        self.name = name

    def batches(self) -> Generator[tuple[BatchHeader, bytes | memoryview], None, None]:
        for batch in self._batches:
            header = parse_header(batch)
            _checked(header, batch, self.name)
            yield header, batch


class _FileSource:
    """The first ``size`` bytes of a segment file (they never change), read in windows
    through its own descriptor, so the log may close or delete the segment meanwhile."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.name = str(path)

    def batches(self) -> Generator[tuple[BatchHeader, bytes | memoryview], None, None]:
        if self.size == 0:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            position = 0
            while position < self.size:
                buf = os.pread(fd, min(_READ_WINDOW, self.size - position), position)
                view = memoryview(buf)
                rel = 0
                while len(view) - rel >= HEADER_SIZE:
                    header = parse_header(view, rel)
                    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                        raise CompactionError(f"{self.name}: bad batch length at {position + rel}")
                    if rel + header.size > len(view):
                        break
                    batch = view[rel : rel + header.size]
                    _checked(header, batch, self.name)
                    yield header, batch
                    rel += header.size
                if rel == 0:  # one batch larger than the window: read it whole
                    if len(view) < HEADER_SIZE:
                        raise CompactionError(f"{self.name}: torn batch header at {position}")
                    header = parse_header(view)
                    if position + header.size > self.size:
                        raise CompactionError(f"{self.name}: batch at {position} runs past the end")
                    batch = memoryview(os.pread(fd, header.size, position))
                    _checked(header, batch, self.name)
                    yield header, batch
                    rel = header.size
                position += rel
        finally:
            os.close(fd)


_Source = _MemorySource | _FileSource


# ------------------------------------------------------------------ group outputs


class _MemoryOutput:
    def __init__(self, base: int) -> None:
        self.segment = MemorySegment(base)

    def add(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        self.segment.append(batch, header, None)

    def finish(self) -> None:
        pass

    def abandon(self) -> None:
        self.segment.delete()


class _DiskOutput:
    def __init__(self, staging: Path, base: int, index_interval: int) -> None:
        self.segment = DiskSegment.create(staging, base, index_interval)
        self.size = 0
        self.next_offset = base
        self.max_timestamp = -1
        self.aborted: list[AbortedTxn] = []

    def add(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        self.segment.append(batch, header, None)

    def finish(self) -> None:
        segment = self.segment
        segment.seal()  # data and both indexes written and fsynced
        self.size, self.next_offset = segment.size, segment.next_offset
        self.max_timestamp = segment.max_timestamp
        self.aborted = list(segment.aborted)
        segment.close()

    def abandon(self) -> None:
        self.segment.delete()


_Output = _MemoryOutput | _DiskOutput


@dataclass(slots=True)
class _GroupResult:
    old: list[Segment]
    output: _Output


# ------------------------------------------------------------------ the job

_busy: weakref.WeakSet[SegmentedLog] = weakref.WeakSet()
_busy_lock = threading.Lock()

_PLANNED, _RUNNING, _RAN, _DONE = "planned", "running", "ran", "done"


def _group_segments(closed: Sequence[Segment], max_bytes: int) -> list[list[Segment]]:
    groups: list[list[Segment]] = []
    current: list[Segment] = []
    size = 0
    for segment in closed:
        if current and (
            size + segment.size > max_bytes
            or segment.next_offset - 1 - current[0].base_offset > INT32_MAX
        ):
            groups.append(current)
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(current)
    return groups


class CompactionJob:
    """One pass over one partition log: ``run`` on a worker thread, then ``install`` (or
    ``cancel``) on the thread that owns the log. See docs/ARCHITECTURE.md ("Log compaction")."""

    def __init__(
        self,
        log: SegmentedLog,
        groups: list[list[Segment]],
        sources: dict[int, _Source],  # id(segment) -> its batches
        tail: list[_Source],
        *,
        now_ms: int,
        delete_retention_ms: int,
        directory: Path | None,
        aborted: Sequence[AbortedTxn] = (),
        stable_end: int | None = None,
    ) -> None:
        self._log = log
        # The aborted transactions of the log below ``stable_end`` (the LSO when the pass
        # was planned): transactional data at or past it may still be aborted.
        self._aborted = list(aborted)
        self._stable_end = stable_end if stable_end is not None else _INT64_MAX
        self._txns = TxnCleaningState(())
        self._groups = groups
        self._sources = sources
        # Read for the latest offset of each key, never rewritten: the active segment, and
        # closed segments still within min.compaction.lag.ms.
        self._tail = tail
        self._now = now_ms
        self._delete_retention = max(delete_retention_ms, 0)
        self._directory = directory  # disk logs only
        self._results: list[_GroupResult] = []
        # producer id -> base offset of its last batch in the log (set by _build).
        self._last_batches: dict[int, int] = {}
        self.stats = CompactionStats()
        self._state = _PLANNED
        self._committed = False  # the disk swap passed its commit point
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    @property
    def staging(self) -> Path | None:
        return self._directory / STAGING_DIR if self._directory is not None else None

    # -- worker thread -----------------------------------------------------------------

    def run(self) -> None:
        """Build the cleaned segments. Safe on any thread; reads only snapshots."""
        with self._lock:
            if self._state != _PLANNED:
                raise RuntimeError(f"compaction job is {self._state}, not planned")
            self._state = _RUNNING
        try:
            self._build()
        except BaseException:
            with self._lock:
                self._state = _DONE
            self._abandon_outputs()
            _release(self._log)
            raise
        with self._lock:
            if not self._cancelled.is_set():
                self._state = _RAN
                return
            self._state = _DONE
        self._abandon_outputs()
        _release(self._log)
        raise CompactionCancelled("compaction job cancelled")

    def _check_cancel(self) -> None:
        if self._cancelled.is_set():
            raise CompactionCancelled("compaction job cancelled")

    def _build(self) -> None:
        staging = self.staging
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
        latest: dict[bytes, int] = {}
        # Each idempotent producer's last batch in the log: kept, emptied if need be.
        last_batches = self._last_batches
        sources = [self._sources[id(s)] for group in self._groups for s in group]
        txns = TxnCleaningState(self._aborted)
        for source in [*sources, *self._tail]:
            for header, batch in source.batches():
                self._check_cancel()
                if header.producer_id >= 0 and not header.is_control:
                    last_batches[header.producer_id] = header.base_offset
                if header.is_control:
                    continue
                if txns.on_data(header) or (
                    header.is_transactional and header.last_offset >= self._stable_end
                ):
                    continue  # aborted, or maybe not committed yet
                try:
                    _, records = record_spans(header, batch)
                except UnreadableRecords:
                    continue
                base = header.base_offset
                for rec in records:
                    if rec.key is not None:
                        latest[rec.key] = base + rec.offset_delta
            self._check_cancel()
        self._txns = TxnCleaningState(self._aborted)
        for group in self._groups:
            self._clean_group(group, latest)
            self._check_cancel()
        if staging is not None:
            if self._results:
                sync_directory(staging)
            else:
                shutil.rmtree(staging, ignore_errors=True)

    def _clean_group(self, group: list[Segment], latest: dict[bytes, int]) -> None:
        stats = self.stats
        output: _Output | None = None
        unchanged = 0  # batches of a lone segment copied as they are, before any change
        for segment in group:
            for header, batch in self._sources[id(segment)].batches():
                self._check_cancel()
                result = self._clean_batch(header, batch, latest)
                if output is None:
                    if result is batch and len(group) == 1:
                        unchanged += 1
                        continue
                    output = self._new_output(group[0].base_offset)
                    if unchanged:  # copy what was skipped while nothing had changed
                        replay = self._sources[id(segment)].batches()
                        for _ in range(unchanged):
                            h, b = next(replay)
                            output.add(b, h)
                        replay.close()
                if result is not None:
                    output.add(result, header if result is batch else parse_header(result))
        if output is None:
            if len(group) > 1:  # empty segments being merged
                output = self._new_output(group[0].base_offset)
            else:
                return
        # Transactional batches and markers are kept, so their aborted-transaction
        # entries move with them (closed segments' entries no longer change).
        for segment in group:
            for txn in segment.aborted:
                output.segment.add_aborted(txn)
        output.finish()
        self._results.append(_GroupResult(list(group), output))
        stats.groups_cleaned += 1

    def _is_last_of_producer(self, header: BatchHeader) -> bool:
        return header.producer_id >= 0 and self._last_batches.get(header.producer_id) == header.base_offset

    def _new_output(self, base: int) -> _Output:
        staging = self.staging
        if staging is None:
            return _MemoryOutput(base)
        return _DiskOutput(staging, base, self._log.config.index_interval_bytes)

    def _clean_batch(
        self, header: BatchHeader, batch: bytes | memoryview, latest: dict[bytes, int]
    ) -> bytes | memoryview | None:
        """``batch`` itself when it stays as it is, the rewritten batch, or None."""
        stats = self.stats
        if header.is_control:
            return self._clean_marker(header, batch)
        if self._txns.on_data(header):
            # Aborted data goes whole, even a producer's last batch (ours: Kafka keeps that
            # one empty too; here its marker's removal is keyed to its data being gone).
            stats.aborted_batches_removed += 1
            stats.batches_removed += 1
            stats.records_removed += header.record_count
            return None
        try:
            data, records = record_spans(header, batch)
        except UnreadableRecords:
            stats.batches_unreadable += 1
            return batch
        horizon = delete_horizon(header)
        expired = horizon is not None and self._now >= horizon
        base = header.base_offset
        kept: list[RecordSpan] = []
        tombstones = False
        for rec in records:
            if rec.key is not None:
                if latest.get(rec.key, -1) > base + rec.offset_delta:
                    stats.records_removed += 1
                    continue
                if rec.tombstone:
                    if expired:
                        stats.records_removed += 1
                        stats.tombstones_removed += 1
                        continue
                    tombstones = True
            kept.append(rec)
        if not kept:
            if self._is_last_of_producer(header):
                # The producer's last batch: kept without records, so its sequence survives
                # a restart (the broker rebuilds producer state from batch headers).
                if not records:
                    return batch  # emptied by an earlier pass
                stats.batches_rewritten += 1
                return empty_batch(header)
            stats.batches_removed += 1
            return None
        if tombstones and horizon is None:
            horizon = min(self._now + self._delete_retention, _INT64_MAX)
        if tombstones:
            assert horizon is not None
            if stats.next_delete_horizon_ms is None or horizon < stats.next_delete_horizon_ms:
                stats.next_delete_horizon_ms = horizon
        if len(kept) == len(records) and horizon == delete_horizon(header):
            return batch
        stats.batches_rewritten += 1
        return rebuild_batch(header, data, kept, horizon)

    def _clean_marker(self, header: BatchHeader, batch: bytes | memoryview) -> bytes | memoryview | None:
        stats = self.stats
        try:
            data, records = record_spans(header, batch)
        except UnreadableRecords:
            stats.batches_unreadable += 1
            return batch
        key = records[0].key if records else None
        if key is None or len(key) < 4:
            return batch  # not a transaction marker we know: keep it
        abort = key[2:4] == _ABORT_TYPE
        if not self._txns.on_marker(header, abort=abort):
            return batch
        horizon = delete_horizon(header)
        if horizon is not None and self._now >= horizon:
            stats.markers_removed += 1
            stats.batches_removed += 1
            return None
        kept: bytes | memoryview = batch
        if horizon is None:  # the first pass that may drop it: stamp the horizon
            horizon = min(self._now + self._delete_retention, _INT64_MAX)
            kept = rebuild_batch(header, data, records, horizon)
            stats.batches_rewritten += 1
        if stats.next_delete_horizon_ms is None or horizon < stats.next_delete_horizon_ms:
            stats.next_delete_horizon_ms = horizon
        return kept

    def _abandon_outputs(self) -> None:
        for result in self._results:
            with contextlib.suppress(Exception):
                result.output.abandon()
        self._results.clear()
        staging = self.staging
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)

    # -- owner thread ------------------------------------------------------------------

    def cancel(self) -> None:
        """Drop the job. A running worker stops at its next check and cleans up itself."""
        with self._lock:
            self._cancelled.set()
            if self._state == _RUNNING or self._state == _DONE:
                return
            self._state = _DONE
        self._abandon_outputs()
        _release(self._log)

    def install(self) -> CompactionStats:
        """Swap the cleaned segments in (on the log's owner thread). Short: renames and a
        few fsyncs on disk. Drops the pass if the log changed in a way it cannot absorb."""
        with self._lock:
            if self._state != _RAN:
                raise RuntimeError(f"compaction job is {self._state}, not ready to install")
            self._state = _DONE
        stats = self.stats
        log_ = self._log
        try:
            reason = self._conflict()
            if reason is not None:
                stats.aborted = reason
                self._abandon_outputs()
                return stats
            for result in self._results:
                stats.segments_before += len(result.old)
                stats.segments_after += 1
                stats.bytes_before += sum(s.size for s in result.old)
            if self._directory is None:
                for result in self._results:
                    assert isinstance(result.output, _MemoryOutput)
                    new = result.output.segment
                    _inherit_append_times(new, result.old)
                    log_.replace_segments(result.old, new)
                    stats.bytes_after += new.size
            elif self._results:
                self._install_disk(self._directory)
            stats.installed = True
            return stats
        except BaseException:
            if not self._committed:
                self._abandon_outputs()
            else:
                log.error(
                    "compaction swap of %s failed after its commit point; "
                    "the swap completes when the log is next opened",
                    self._directory,
                )
            raise
        finally:
            _release(log_)

    def _conflict(self) -> str | None:
        log_ = self._log
        if self._directory is not None and getattr(log_, "closed", False):
            return "log closed"
        for result in self._results:
            if log_.find_segments(result.old) is None:
                return "segments changed since the plan"
        return None

    def _install_disk(self, directory: Path) -> None:
        log_ = self._log
        staging = directory / STAGING_DIR
        fds: dict[int, int] = {}
        try:
            for result in self._results:
                base = result.old[0].base_offset
                fds[base] = os.open(data_path(staging, base), os.O_RDWR | os.O_APPEND)
            write_swap_marker(
                directory,
                [(r.old[0].base_offset, [s.base_offset for s in r.old]) for r in self._results],
            )
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            raise
        self._committed = True  # from here on, a failure is finished by recovery
        _step("committed")
        for result in self._results:
            for old in result.old[1:]:
                old.delete()
        _step("replaced-deleted")
        for result in self._results:
            base = result.old[0].base_offset
            for suffix in SEGMENT_SUFFIXES:
                os.replace(segment_file(staging, base, suffix), segment_file(directory, base, suffix))
                _step(f"moved{suffix}")
            result.old[0].close()  # its files were just replaced: close, don't unlink
        sync_directory(directory)
        _step("moved")
        interval = log_.config.index_interval_bytes
        for result in self._results:
            output = result.output
            assert isinstance(output, _DiskOutput)
            base = result.old[0].base_offset
            path = data_path(directory, base)
            new = DiskSegment(
                directory,
                base,
                fds.pop(base),
                size=output.size,
                next_offset=output.next_offset,
                max_timestamp=output.max_timestamp,
                indexes=SegmentIndexes.cold(path, base, interval),
            )
            new.set_aborted(output.aborted)
            _inherit_append_times(new, result.old)
            log_.replace_segments(result.old, new)
            self.stats.bytes_after += new.size
        (directory / SWAP_MARKER).unlink()
        sync_directory(directory)
        shutil.rmtree(staging, ignore_errors=True)


def _inherit_append_times(new: Segment, old: Sequence[Segment]) -> None:
    if isinstance(new, MemorySegment | DiskSegment):
        new.first_append_ms = old[0].first_append_ms
        new.last_append_ms = max(s.last_append_ms for s in old)


def _release(log_: SegmentedLog) -> None:
    with _busy_lock:
        _busy.discard(log_)


# ------------------------------------------------------------------ entry points


def plan_compaction(
    log_: PartitionLog,
    *,
    now_ms: int,
    delete_retention_ms: int,
    min_compaction_lag_ms: int = 0,
    last_stable_offset: int | None = None,
) -> CompactionJob | None:
    """A job for the log's closed segments, or None when there is nothing to clean (no
    closed segment old enough), another job holds the log, or the log is not a
    segmented log.

    ``min_compaction_lag_ms`` (the topic's min.compaction.lag.ms): a closed segment
    holding a record younger than that, and every segment after it, is only read (its
    keys supersede older records) and never rewritten, as in Kafka.

    ``last_stable_offset`` (the partition's LSO; None: no open transaction): as in
    Kafka, a segment reaching it or beyond is only read, never rewritten, and
    transactional records at or past it never supersede others.

    Cheap; call it on the thread that owns the log (the broker's event loop)."""
    if not isinstance(log_, SegmentedLog):
        return None
    segments = log_.segments
    if len(segments) < 2 or log_ in _busy:
        return None
    closed = segments[:-1]
    if min_compaction_lag_ms > 0:
        newest_allowed = now_ms - min_compaction_lag_ms
        young = next((i for i, seg in enumerate(closed) if seg.max_timestamp > newest_allowed), len(closed))
        closed = closed[:young]
        if not closed:
            return None
    if last_stable_offset is not None:
        unstable = next((i for i, seg in enumerate(closed) if seg.next_offset > last_stable_offset), len(closed))
        closed = closed[:unstable]
        if not closed:
            return None
    rewritten = {id(segment) for segment in closed}
    directory: Path | None = None
    sources: dict[int, _Source] = {}
    if isinstance(log_, MemoryLog):
        for segment in segments:
            assert isinstance(segment, MemorySegment)
            sources[id(segment)] = _MemorySource(segment.batches(), f"segment {segment.base_offset}")
    else:
        if not isinstance(log_, DiskLog) or log_.closed:
            return None
        directory = log_.directory
        for segment in segments:
            if not isinstance(segment, DiskSegment):
                return None
            sources[id(segment)] = _FileSource(segment.path, segment.size)
    tail = [sources.pop(id(segment)) for segment in segments if id(segment) not in rewritten]
    with _busy_lock:
        if log_ in _busy:
            return None
        _busy.add(log_)
    groups = _group_segments(closed, min(log_.config.segment_bytes, INT32_MAX))
    stable_end = log_.log_end_offset if last_stable_offset is None else last_stable_offset
    aborted = log_.aborted_txns(segments[0].base_offset, stable_end)
    return CompactionJob(
        log_,
        groups,
        sources,
        tail,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        directory=directory,
        aborted=aborted,
        stable_end=stable_end,
    )


def compact(
    log_: PartitionLog, *, now_ms: int, delete_retention_ms: int, last_stable_offset: int | None = None
) -> CompactionStats:
    """Plan, run and install one pass on the calling thread (tests, tools)."""
    job = plan_compaction(
        log_, now_ms=now_ms, delete_retention_ms=delete_retention_ms, last_stable_offset=last_stable_offset
    )
    if job is None:
        return CompactionStats(aborted="nothing to compact")
    job.run()
    return job.install()


__all__ = [
    "CompactionCancelled",
    "CompactionError",
    "CompactionJob",
    "CompactionStats",
    "compact",
    "plan_compaction",
]
