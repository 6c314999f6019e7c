"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

``plan_compaction`` (loop thread, cheap) snapshots the closed segments to clean;
``CompactionJob.run`` (worker thread) builds the key -> offset map and writes cleaned
segments; ``CompactionJob.install`` (loop thread) swaps them in. Which records survive
is ``compaction_filter.py``; where the batches come from and how cleaned segments are
written and swapped in is the log kind's ``CompactionSpace`` (``memory.py``,
``disk/compaction_space.py``). The rules are written down in docs/ARCHITECTURE.md
("Log compaction").
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from slipstream.log.api import AbortedTxn, PartitionLog
from slipstream.log.compaction_filter import CompactionFilter, CompactionStats
from slipstream.log.policy import INT32_MAX
from slipstream.log.segmented import (
    BatchSource,
    CleanedSegment,
    CompactionError,
    CompactionSpace,
    Segment,
    SegmentedLog,
)
from slipstream.protocol.record_batch import HEADER_SIZE, BatchHeader, compute_crc, parse_header

_INT64_MAX = (1 << 63) - 1


class CompactionCancelled(Exception):
    """The job was cancelled while its worker was running."""


def _checked(source: BatchSource) -> Generator[tuple[BatchHeader, bytes | memoryview], None, None]:
    """The source's batches, each checked whole (header fields and CRC) before use."""
    for header, batch in source.batches():
        if header.magic != 2 or header.size < HEADER_SIZE or len(batch) != header.size:
            raise CompactionError(f"{source.name}: no valid batch header at offset {header.base_offset}")
        if compute_crc(batch) != header.crc:
            raise CompactionError(f"{source.name}: CRC mismatch in the batch at offset {header.base_offset}")
        yield header, batch


@dataclass(slots=True)
class _GroupResult:
    old: list[Segment]
    cleaned: CleanedSegment


# Logs with a job planned and not yet installed or cancelled: one pass at a time per log.
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
        space: CompactionSpace,
        groups: list[list[Segment]],
        sources: dict[int, BatchSource],  # id(segment) -> its batches
        tail: list[BatchSource],
        *,
        now_ms: int,
        delete_retention_ms: int,
        aborted: Sequence[AbortedTxn] = (),
        stable_end: int | None = None,
    ) -> None:
        self._log = log
        self._space = space
        self._groups = groups
        self._sources = sources
        # Read for the latest offset of each key, never rewritten: the active segment, and
        # closed segments still within min.compaction.lag.ms.
        self._tail = tail
        self._results: list[_GroupResult] = []
        self.stats = CompactionStats()
        self._filter = CompactionFilter(
            self.stats,
            now_ms=now_ms,
            delete_retention_ms=delete_retention_ms,
            aborted=aborted,
            stable_end=stable_end if stable_end is not None else _INT64_MAX,
        )
        self._state = _PLANNED
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

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
        self._space.prepare()
        sources = [self._sources[id(s)] for group in self._groups for s in group]
        for source in [*sources, *self._tail]:
            for header, batch in _checked(source):
                self._check_cancel()
                self._filter.note(header, batch)
            self._check_cancel()
        for group in self._groups:
            self._clean_group(group)
            self._check_cancel()
        self._space.written(bool(self._results))

    def _clean_group(self, group: list[Segment]) -> None:
        cleaned: CleanedSegment | None = None
        unchanged = 0  # batches of a lone segment copied as they are, before any change
        for segment in group:
            source = self._sources[id(segment)]
            for header, batch in _checked(source):
                self._check_cancel()
                result = self._filter.keep(header, batch)
                if cleaned is None:
                    if result is batch and len(group) == 1:
                        unchanged += 1
                        continue
                    cleaned = self._space.new_segment(group[0].base_offset)
                    if unchanged:  # copy what was skipped while nothing had changed
                        replay = _checked(source)
                        for _ in range(unchanged):
                            h, b = next(replay)
                            cleaned.add(b, h)
                        replay.close()
                if result is not None:
                    cleaned.add(result, header if result is batch else parse_header(result))
        if cleaned is None:
            if len(group) > 1:  # empty segments being merged
                cleaned = self._space.new_segment(group[0].base_offset)
            else:
                return
        # Transactional batches and markers are kept, so their aborted-transaction
        # entries move with them (closed segments' entries no longer change).
        for segment in group:
            for txn in segment.aborted:
                cleaned.add_aborted(txn)
        cleaned.finish()
        self._results.append(_GroupResult(list(group), cleaned))
        self.stats.groups_cleaned += 1

    def _abandon_outputs(self) -> None:
        for result in self._results:
            with contextlib.suppress(Exception):
                result.cleaned.abandon()
        self._results.clear()
        self._space.discard()

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
            if self._results:
                stats.bytes_after += self._space.install([(r.old, r.cleaned) for r in self._results])
            stats.installed = True
            return stats
        finally:
            _release(self._log)

    def _conflict(self) -> str | None:
        reason = self._space.obstacle()
        if reason is not None:
            return reason
        for result in self._results:
            if self._log.find_segments(result.old) is None:
                return "segments changed since the plan"
        return None


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
    segmented log (or its kind has no pass to offer now, e.g. a closed disk log).

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
    space = log_.compaction_space()
    if space is None:
        return None
    rewritten = {id(segment) for segment in closed}
    sources = {id(segment): space.source(segment) for segment in segments}
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
        space,
        groups,
        sources,
        tail,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
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
    "CompactionJob",
    "compact",
    "plan_compaction",
]
