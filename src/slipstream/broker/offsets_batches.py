"""Encode coordinator records for ``__consumer_offsets`` as batches within its size limit.

Kafka's coordinator runtime refuses a write whose records cannot fit one batch of the
offsets topic's ``max.message.bytes`` (RecordTooLargeException, answered by the group
APIs as UNKNOWN_SERVER_ERROR; see coordinator/append_errors.py). One write here may
carry many requests' records (group-committed OffsetCommits), so records are packed
into as many batches as needed; only a record that alone cannot fit one batch makes
the write fail, before anything is written or replayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..coordinator import Record
from ..protocol.record_batch import HEADER_SIZE
from ..protocol.records import ProducerRecord, build_batch

# Per-record framing beyond key and value: length, attributes, deltas, key/value
# lengths and header count, each at most a 5- or 10-byte varint.
_RECORD_OVERHEAD = 40


class RecordTooLarge(ValueError):
    """A record that does not fit one batch of the offsets topic."""


def encode_bounded(
    records: Sequence[ProducerRecord], max_batch_bytes: int, **batch_options: Any
) -> list[bytearray]:
    """``records`` as batches (``build_batch`` with ``batch_options``), each at most
    ``max_batch_bytes``; raises RecordTooLarge."""
    batches: list[bytearray] = []
    group: list[ProducerRecord] = []
    size = HEADER_SIZE
    for record in records:
        cost = _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
        if HEADER_SIZE + cost > max_batch_bytes:
            raise RecordTooLarge(
                f"a record of about {cost} bytes exceeds the offsets topic's "
                f"max.message.bytes={max_batch_bytes}"
            )
        if group and size + cost > max_batch_bytes:
            batches.append(bytearray(build_batch(group, **batch_options)))
            group, size = [], HEADER_SIZE
        group.append(record)
        size += cost
    if group:
        batches.append(bytearray(build_batch(group, **batch_options)))
    return batches


def batches_by_producer(records: list[Record], now: int, max_batch_bytes: int) -> list[bytearray]:
    """Batches per run of records of the same producer: the coordinator's own records in
    plain batches, a TxnOffsetCommit's in its producer's transactional batches, each
    within the offsets topic's max.message.bytes (RecordTooLarge if a record cannot fit)."""
    out: list[bytearray] = []
    start = 0
    while start < len(records):
        producer = records[start].producer
        end = start + 1
        while end < len(records) and records[end].producer == producer:
            end += 1
        run = [ProducerRecord(r.key, r.value, timestamp_ms=now) for r in records[start:end]]
        if producer is None:
            out.extend(encode_bounded(run, max_batch_bytes))
        else:
            out.extend(
                encode_bounded(
                    run, max_batch_bytes, producer_id=producer[0], producer_epoch=producer[1], is_transactional=True
                )
            )
        start = end
    return out
