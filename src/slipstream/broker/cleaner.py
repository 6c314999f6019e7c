"""The log cleaner: compacts partitions of topics whose cleanup.policy includes compact.

A background task wakes every ``backoff_ms`` (Kafka's ``log.cleaner.backoff.ms``,
15 s) and cleans, one partition at a time, those that need it:

- never cleaned by this process yet (the first pass after start-up);
- a kept tombstone's delete horizon has passed (it can now be removed);
- bytes appended since the last pass make up at least the topic's
  ``min.cleanable.dirty.ratio`` of the log (default 0.5);
- records appended since the last pass have waited ``max.compaction.lag.ms`` (counted
  from the first pass that saw them, so within one backoff of their append).

A topic's ``min.compaction.lag.ms`` keeps the closed segments holding records younger
than that out of the pass (they are read, not rewritten).

The work of a pass (reading, decoding, writing cleaned segments) runs on the
cleaner's own worker thread; only planning and the final swap run on the event loop
(see ``slipstream.log.compaction``). Errors are logged and never stop the loop or the
broker.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..log.api import PartitionLog
from .topics import TopicManager

if TYPE_CHECKING:
    from ..log.compaction import CompactionJob
    from ..log.compaction_filter import CompactionStats

log = logging.getLogger(__name__)


def plan_compaction(
    plog: PartitionLog,
    *,
    now_ms: int,
    delete_retention_ms: int,
    min_compaction_lag_ms: int,
    last_stable_offset: int | None = None,
) -> CompactionJob | None:
    """``log.compaction.plan_compaction``, imported at the first pass instead of at start:
    serving does not need the compaction modules, and a start pays for each one loaded."""
    from ..log import compaction

    return compaction.plan_compaction(
        plog,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        min_compaction_lag_ms=min_compaction_lag_ms,
        last_stable_offset=last_stable_offset,
    )

DEFAULT_BACKOFF_MS = 15_000
DEFAULT_MIN_CLEANABLE_RATIO = 0.5


@dataclass(slots=True)
class _Cleaned:
    """What the log looked like after the last pass."""

    end_offset: int
    size: int
    next_delete_horizon_ms: int | None
    # When a check first saw records past end_offset (max.compaction.lag.ms counts from it).
    dirty_since_ms: int | None = None


@dataclass(frozen=True, slots=True)
class CleaningPolicy:
    """A topic's compaction settings (its effective configs)."""

    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO
    max_compaction_lag_ms: int = 2**63 - 1
    min_compaction_lag_ms: int = 0

    @classmethod
    def of(cls, configs: dict[str, str]) -> CleaningPolicy:
        return cls(
            float(configs.get("min.cleanable.dirty.ratio", DEFAULT_MIN_CLEANABLE_RATIO)),
            int(configs.get("max.compaction.lag.ms", 2**63 - 1)),
            int(configs.get("min.compaction.lag.ms", 0)),
        )


@dataclass(frozen=True, slots=True)
class PartitionCleaned:
    topic: str
    partition: int
    stats: CompactionStats


class LogCleaner:
    def __init__(
        self,
        topics: TopicManager,
        clock: Callable[[], int],
        *,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO,
        last_stable_offset: Callable[[str, int, PartitionLog], int] | None = None,
    ) -> None:
        self._topics = topics
        # The partition's LSO: compaction never rewrites past an open transaction.
        self._last_stable_offset = last_stable_offset
        self._clock = clock
        self.backoff_ms = backoff_ms
        self.min_cleanable_ratio = min_cleanable_ratio
        self._executor: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()  # one pass at a time (the loop and direct calls)
        self._cleaned: weakref.WeakKeyDictionary[PartitionLog, _Cleaned] = (
            weakref.WeakKeyDictionary()
        )
        self._job: CompactionJob | None = None

    async def run(self) -> None:
        """The background loop (a task of the broker)."""
        while True:
            await asyncio.sleep(self.backoff_ms / 1000)
            try:
                await self.clean_all()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the loop die
                log.exception("log cleaner pass failed")

    async def clean_all(self, *, force: bool = False) -> list[PartitionCleaned]:
        """Clean every compacted partition that needs it (all of them with ``force``);
        returns what each pass did. A failing partition is logged and skipped."""
        done: list[PartitionCleaned] = []
        async with self._lock:
            for topic, partition, plog, configs in self._topics.compacted_partitions():
                try:
                    retention = int(configs["delete.retention.ms"])
                    lso = None if self._last_stable_offset is None else self._last_stable_offset(topic, partition, plog)
                    stats = await self._clean(plog, retention, CleaningPolicy.of(configs), force, lso)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("compaction of %s-%d failed", topic, partition)
                    continue
                if stats is not None:
                    done.append(PartitionCleaned(topic, partition, stats))
                    if stats.installed and stats.groups_cleaned:
                        log.info(
                            "compacted %s-%d: %d segments (%d bytes) -> %d (%d bytes), "
                            "%d records removed",
                            topic,
                            partition,
                            stats.segments_before,
                            stats.bytes_before,
                            stats.segments_after,
                            stats.bytes_after,
                            stats.records_removed,
                        )
        return done

    def needs_cleaning(self, plog: PartitionLog, now_ms: int, policy: CleaningPolicy | None = None) -> bool:
        """Whether ``plog`` is due (``policy`` None: the cleaner's own dirty ratio only)."""
        last = self._cleaned.get(plog)
        if last is None:
            return True
        if last.next_delete_horizon_ms is not None and now_ms >= last.next_delete_horizon_ms:
            return True
        if plog.log_end_offset == last.end_offset:
            return False
        if last.dirty_since_ms is None:
            last.dirty_since_ms = now_ms
        ratio = self.min_cleanable_ratio if policy is None else policy.min_cleanable_ratio
        size = plog.size_bytes
        dirty = size - last.size
        if size > 0 and dirty / size >= ratio:
            return True
        return policy is not None and now_ms - last.dirty_since_ms >= policy.max_compaction_lag_ms

    async def _clean(
        self,
        plog: PartitionLog,
        delete_retention_ms: int,
        policy: CleaningPolicy,
        force: bool,
        last_stable_offset: int | None = None,
    ) -> CompactionStats | None:
        now = self._clock()
        if not force and not self.needs_cleaning(plog, now, policy):
            return None
        job = plan_compaction(
            plog,
            now_ms=now,
            delete_retention_ms=delete_retention_ms,
            min_compaction_lag_ms=policy.min_compaction_lag_ms,
            last_stable_offset=last_stable_offset,
        )
        if job is None:
            return None
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="slipstream-cleaner")
        self._job = job
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, job.run)
        except BaseException:
            job.cancel()  # a worker still running stops and cleans up after itself
            raise
        finally:
            self._job = None
        stats = job.install()  # on the loop: appends and reads see the old or new segments
        if stats.installed:
            self._cleaned[plog] = _Cleaned(
                plog.log_end_offset, plog.size_bytes, stats.next_delete_horizon_ms
            )
        return stats

    def close(self) -> None:
        """Stop the worker (a running pass is abandoned; its leftovers are cleaned up)."""
        if self._job is not None:
            self._job.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
