"""The aborted-transaction index: a ``.txnindex`` file next to each disk segment.

Entries use Kafka's layout (34 bytes: version int16 = 0, producer id, first offset,
last offset, last stable offset, all int64 big-endian), appended as ABORT markers are
written. Every segment has the file (empty when it holds no abort), so a missing
file means a lost one. Recovery (:func:`load_aborted_indexes`): a missing or torn
file makes the index of every segment be rebuilt from the log's batches; entries at
or past the log end (a crash between an entry and its marker) are dropped.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from slipstream.log.api import AbortedTxn
from slipstream.protocol.record_batch import BatchHeader
from slipstream.protocol.records import CONTROL_ABORT, decode_batch

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
SUFFIX = ".txnindex"
# Below every real timestamp: timestamp_candidates() then yields every batch.
_ANY_TIMESTAMP = -(1 << 63)


def txn_index_path(data_file: Path) -> Path:
    return data_file.with_suffix(SUFFIX)


def encode(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(0, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def read_entries(path: Path) -> list[AbortedTxn] | None:
    """The file's entries; None when it is missing, torn or of an unknown version."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) % ENTRY_SIZE:
        return None
    entries = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
        if version != 0 or first > last:
            return None
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def write_entries(path: Path, entries: Sequence[AbortedTxn]) -> None:
    """Replace the file whole (temporary file, fsync, rename)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(b"".join(encode(txn) for txn in entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class IndexedSegment(Protocol):
    """What recovery needs of a segment (DiskSegment provides it)."""

    @property
    def path(self) -> Path: ...

    @property
    def aborted(self) -> list[AbortedTxn]: ...

    def set_aborted(self, entries: list[AbortedTxn]) -> None: ...

    def timestamp_candidates(self, timestamp_ms: int) -> Iterator[tuple[int, BatchHeader]]: ...

    def batch_at(self, position: int, header: BatchHeader) -> bytes | memoryview: ...


def rebuild_aborted(segments: Sequence[IndexedSegment]) -> list[list[AbortedTxn]]:
    """Every segment's entries, replayed from the batches: transactional data opens a
    producer's transaction, a marker closes it, an ABORT marker makes an entry in the
    segment holding it. A marker whose transaction started before the log start (its
    data deleted) makes none."""
    open_txns: dict[int, int] = {}
    result: list[list[AbortedTxn]] = []
    for segment in segments:
        entries: list[AbortedTxn] = []
        for position, header in segment.timestamp_candidates(_ANY_TIMESTAMP):
            pid = header.producer_id
            if pid < 0 or not header.is_transactional:
                continue
            if not header.is_control:
                open_txns.setdefault(pid, header.base_offset)
                continue
            first = open_txns.pop(pid, None)
            if first is None or not _is_abort(segment.batch_at(position, header)):
                continue
            following = next(iter(open_txns.values()), None)
            lso = header.base_offset + 1 if following is None else following
            entries.append(AbortedTxn(pid, first, header.base_offset, lso))
        result.append(entries)
    return result


def _is_abort(batch: bytes | memoryview) -> bool:
    try:
        # a marker's records are a few bytes: anything expanding further is not one
        _, records = decode_batch(batch, verify_crc=False, max_uncompressed=1 << 16)
    except Exception:  # an unreadable marker is treated as a commit: its data stays visible
        return False
    return bool(records) and records[0].control_type == CONTROL_ABORT


def load_aborted_indexes(segments: Sequence[IndexedSegment], log_end_offset: int) -> bool:
    """Load every segment's index at open; returns True when they had to be rebuilt."""
    loaded = [read_entries(txn_index_path(s.path)) for s in segments]
    rebuilt = any(entries is None for entries in loaded)
    if rebuilt:
        fresh = rebuild_aborted(segments)
        for segment, rebuilt_entries in zip(segments, fresh, strict=True):
            write_entries(txn_index_path(segment.path), rebuilt_entries)
            segment.set_aborted(rebuilt_entries)
        return True
    for segment, entries in zip(segments, loaded, strict=True):
        assert entries is not None
        kept = [txn for txn in entries if txn.last_offset < log_end_offset]
        if len(kept) != len(entries):
            write_entries(txn_index_path(segment.path), kept)
        segment.set_aborted(kept)
    return False
