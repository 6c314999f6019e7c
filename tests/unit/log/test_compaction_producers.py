"""Compaction keeps each idempotent producer's last batch, emptied when all its records go.

Producer state is rebuilt from batch headers after a restart; if compaction dropped a
producer's last batch, a retry of it would be taken for a new write. Kafka's cleaner
keeps that batch as an empty one (no records, same offsets and sequences); so do we.
"""

from __future__ import annotations

from log_env import LogEnv
from test_compaction import CONFIG, Writer, decoded, records, run


def test_a_producers_last_batch_is_kept_empty_when_all_its_records_are_superseded(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"a", b"1"), (b"b", b"1"), producer_id=7, producer_epoch=3, base_sequence=0)
    w.segment().batch((b"a", b"0"), producer_id=9, producer_epoch=0, base_sequence=0)  # 9's first
    w.segment().batch((b"a", b"2"), (b"b", b"2"), producer_id=9, producer_epoch=0, base_sequence=1)
    w.segment().batch((b"z", b"tail"))
    stats = run(log)
    assert stats.batches_removed == 1  # producer 9's first batch: not its last
    kept = decoded(log)
    empty = [(h, recs) for h, recs in kept if h.producer_id == 7]
    assert len(empty) == 1
    header, recs = empty[0]
    assert recs == [] and header.record_count == 0
    assert (header.base_offset, header.last_offset_delta) == (0, 1)
    assert (header.producer_epoch, header.base_sequence, header.last_sequence) == (3, 0, 1)
    assert [h.producer_id for h, _ in kept if h.producer_id == 9] == [9]
    assert records(log) == [(3, b"a", b"2"), (4, b"b", b"2"), (5, b"z", b"tail")]
    # a second pass leaves the empty batch as it is
    again = run(log)
    assert again.batches_rewritten == 0 and again.batches_removed == 0
    assert [h.producer_id for h, _ in decoded(log)] == [7, 9, -1]
