"""Which batches and records a compaction pass keeps: pure, over (header, batch) pairs.

A pass shows the filter every batch of the log once (``note``: the key -> latest offset
map, each idempotent producer's last batch), then each batch of the segments it
rewrites (``keep``). The rules, and where they differ from Kafka's cleaner, are in
docs/ARCHITECTURE.md ("Log compaction").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slipstream.log.api import AbortedTxn
from slipstream.log.record_filter import (
    RecordSpan,
    UnreadableRecords,
    delete_horizon,
    empty_batch,
    rebuild_batch,
    record_spans,
)
from slipstream.log.txn_cleaning import TxnCleaningState
from slipstream.protocol.record_batch import BatchHeader

_INT64_MAX = (1 << 63) - 1
_ABORT_TYPE = b"\x00\x00"  # a control record key's type field (int16): 0 = ABORT


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


class CompactionFilter:
    """``aborted``: the log's aborted transactions below ``stable_end`` (the LSO when the
    pass was planned); transactional data at or past it may still be aborted."""

    def __init__(
        self,
        stats: CompactionStats,
        *,
        now_ms: int,
        delete_retention_ms: int,
        aborted: Sequence[AbortedTxn],
        stable_end: int,
    ) -> None:
        self._stats = stats
        self._now = now_ms
        self._delete_retention = max(delete_retention_ms, 0)
        self._aborted = list(aborted)
        self._stable_end = stable_end
        self._latest: dict[bytes, int] = {}  # key -> the highest offset it occurs at
        # producer id -> base offset of its last batch in the log: kept, emptied if need be.
        self._last_batches: dict[int, int] = {}
        self._txns = TxnCleaningState(self._aborted)  # walked by note(), then by keep()
        self._keeping = False

    # -- the first read: every batch of the log, in offset order ------------------------

    def note(self, header: BatchHeader, batch: bytes | memoryview) -> None:
        if header.producer_id >= 0 and not header.is_control:
            self._last_batches[header.producer_id] = header.base_offset
        if header.is_control:
            return
        if self._txns.on_data(header) or (header.is_transactional and header.last_offset >= self._stable_end):
            return  # aborted, or maybe not committed yet
        try:
            _, records = record_spans(header, batch)
        except UnreadableRecords:
            return
        base = header.base_offset
        latest = self._latest
        for rec in records:
            if rec.key is not None:
                latest[rec.key] = base + rec.offset_delta

    # -- the second read: the batches of the rewritten segments, in offset order ---------

    def keep(self, header: BatchHeader, batch: bytes | memoryview) -> bytes | memoryview | None:
        """``batch`` itself when it stays as it is, the rewritten batch, or None."""
        if not self._keeping:
            self._keeping = True
            self._txns = TxnCleaningState(self._aborted)
        stats = self._stats
        if header.is_control:
            return self._keep_marker(header, batch)
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
        latest = self._latest
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
            self._note_horizon(horizon)
        if len(kept) == len(records) and horizon == delete_horizon(header):
            return batch
        stats.batches_rewritten += 1
        return rebuild_batch(header, data, kept, horizon)

    def _keep_marker(self, header: BatchHeader, batch: bytes | memoryview) -> bytes | memoryview | None:
        stats = self._stats
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
        self._note_horizon(horizon)
        return kept

    def _is_last_of_producer(self, header: BatchHeader) -> bool:
        return header.producer_id >= 0 and self._last_batches.get(header.producer_id) == header.base_offset

    def _note_horizon(self, horizon: int) -> None:
        stats = self._stats
        if stats.next_delete_horizon_ms is None or horizon < stats.next_delete_horizon_ms:
            stats.next_delete_horizon_ms = horizon
