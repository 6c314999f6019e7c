"""The compaction filter alone: batches in, the batches a pass keeps out, no log."""

from __future__ import annotations

from slipstream.log.compaction_filter import CompactionFilter, CompactionStats
from slipstream.protocol.record_batch import DELETE_HORIZON_MASK, parse_header
from slipstream.protocol.records import ProducerRecord, build_batch, decode_batch

DAY = 24 * 3600 * 1000


def _batch(base_offset: int, *pairs: tuple[bytes | None, bytes | None], **options: int) -> bytes:
    records = [ProducerRecord(k, v, timestamp_ms=1000 + base_offset + i) for i, (k, v) in enumerate(pairs)]
    return build_batch(records, base_offset=base_offset, **options)


def _filter(stats: CompactionStats, now_ms: int = 10_000) -> CompactionFilter:
    return CompactionFilter(stats, now_ms=now_ms, delete_retention_ms=DAY, aborted=(), stable_end=1 << 62)


def test_keeps_the_latest_record_of_each_key_and_the_keyless_ones() -> None:
    log = [
        _batch(0, (b"a", b"1"), (b"b", b"1")),
        _batch(2, (b"a", b"2"), (None, b"x")),
        _batch(4, (b"b", b"2")),
    ]
    stats = CompactionStats()
    cleaner = _filter(stats)
    for batch in log:
        cleaner.note(parse_header(batch), batch)
    kept = [cleaner.keep(parse_header(b), b) for b in log[:2]]  # the last batch is not rewritten

    assert kept[0] is None  # both records superseded
    assert kept[1] is log[1]  # nothing to drop: the same bytes
    assert stats.records_removed == 2 and stats.batches_removed == 1


def test_a_kept_tombstone_is_stamped_with_its_delete_horizon_and_goes_after_it() -> None:
    log = [_batch(0, (b"a", None)), _batch(1, (b"b", b"1"))]
    first = CompactionStats()
    cleaner = _filter(first, now_ms=5_000)
    for batch in log:
        cleaner.note(parse_header(batch), batch)
    stamped = cleaner.keep(parse_header(log[0]), log[0])

    assert stamped is not None and stamped is not log[0]
    header, records = decode_batch(stamped)  # a valid batch: CRC and framing
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == 5_000 + DAY
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [(0, b"a", None, 1000)]
    assert first.next_delete_horizon_ms == 5_000 + DAY

    later = CompactionStats()
    cleaner = _filter(later, now_ms=5_000 + DAY)
    cleaner.note(parse_header(stamped), stamped)
    assert cleaner.keep(parse_header(stamped), stamped) is None
    assert later.tombstones_removed == 1


def test_an_idempotent_producers_last_batch_is_kept_empty() -> None:
    options = {"producer_id": 7, "producer_epoch": 0}
    log = [_batch(0, (b"a", b"1"), base_sequence=0, **options), _batch(1, (b"a", b"2"))]
    stats = CompactionStats()
    cleaner = _filter(stats)
    for batch in log:
        cleaner.note(parse_header(batch), batch)
    emptied = cleaner.keep(parse_header(log[0]), log[0])

    assert emptied is not None
    header, records = decode_batch(emptied)
    assert records == [] and header.record_count == 0
    assert (header.producer_id, header.base_offset, header.last_offset) == (7, 0, 0)
