"""Transactional batches and markers for broker tests (imported by name)."""

from __future__ import annotations

from slipstream.protocol.records import ProducerRecord, build_batch


def txn_batch(pid: int, seq: int, n: int = 2, *, epoch: int = 0, transactional: bool = True,
              tag: str = "v") -> memoryview:
    """``n`` records ``{tag}{seq+i}`` from producer ``pid`` (a writable buffer: the broker
    stamps offsets in place)."""
    records = [ProducerRecord(f"k{seq + i}".encode(), f"{tag}{seq + i}".encode(), timestamp_ms=1000) for i in range(n)]
    raw = build_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    return memoryview(bytearray(raw))
