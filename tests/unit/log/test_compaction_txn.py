"""Compaction and transactions (Kafka's cleaner rules, see log/txn_cleaning.py), on
memory and disk logs: aborted data goes, committed transactional records compact like
any others, markers outlive their data by delete.retention.ms, and nothing at or past
the LSO is rewritten or lets older records go."""

from __future__ import annotations

from log_env import LogEnv
from txn_writer import TxnWriter

from slipstream.log.api import LogConfig, PartitionLog
from slipstream.log.compaction import compact
from slipstream.log.compaction_filter import CompactionStats
from slipstream.protocol.record_batch import split_batches
from slipstream.protocol.records import decode_batch

CONFIG = LogConfig(segment_ms=1)
RETENTION = 1000


def contents(log: PartitionLog) -> list[tuple[int, str]]:
    """(offset, what) of every record: a value, or COMMIT/ABORT for a marker."""
    data = b"".join(bytes(c) for c in log.read(log.log_start_offset, 1 << 30).chunks)
    out = []
    for raw in split_batches(memoryview(data)):
        header, records = decode_batch(raw)
        for r in records:
            if header.is_control:
                out.append((r.offset, "ABORT" if r.control_type == 0 else "COMMIT"))
            else:
                out.append((r.offset, (r.key or b"").decode() + "=" + (r.value or b"").decode()))
    return out


def run(log: PartitionLog, now: int, lso: int | None = None) -> CompactionStats:
    stats = compact(log, now_ms=now, delete_retention_ms=RETENTION, last_stable_offset=lso)
    assert stats.aborted is None, stats.aborted
    return stats


def test_aborted_data_goes_and_markers_follow_after_the_retention(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = TxnWriter(log)
    w.roll().data(-1, key=b"a", value=b"plain")  # 0
    w.data(7, key=b"a", value=b"aborted")  # 1: aborted, must not supersede a=plain
    w.data(8, key=b"b", value=b"committed")  # 2
    w.end(7, commit=False)  # 3
    w.end(8, commit=True)  # 4
    w.roll().data(-1, key=b"c", value=b"1")  # 5
    w.roll().data(-1, key=b"c", value=b"2")  # 6: the active segment
    first = run(log, now=100)
    assert first.aborted_batches_removed == 1
    # both markers stay: their transactions' data was read in this pass
    assert contents(log) == [(0, "a=plain"), (2, "b=committed"), (3, "ABORT"), (4, "COMMIT"), (6, "c=2")]
    second = run(log, now=200)  # the ABORT marker's data is gone: it gets a horizon
    assert second.next_delete_horizon_ms == 200 + RETENTION and second.markers_removed == 0
    assert [o for o, _ in contents(log)] == [0, 2, 3, 4, 6]
    assert run(log, now=200 + RETENTION - 1).markers_removed == 0
    third = run(log, now=200 + RETENTION)
    assert third.markers_removed == 1
    # the COMMIT marker stays while its data does
    assert contents(log) == [(0, "a=plain"), (2, "b=committed"), (4, "COMMIT"), (6, "c=2")]
    # the committed record is superseded like any other, then its marker goes too
    w.roll().data(-1, key=b"b", value=b"newer")  # 7
    w.roll().data(-1, key=b"d", value=b"x")  # 8
    run(log, now=3000)  # b=committed goes; its marker is kept once more
    assert [o for o, _ in contents(log)] == [0, 4, 6, 7, 8]
    run(log, now=3000)  # stamped
    run(log, now=3000 + RETENTION)
    final = [(0, "a=plain"), (6, "c=2"), (7, "b=newer"), (8, "d=x")]
    assert contents(log) == final
    log = env.reopen(CONFIG)
    assert contents(log) == final


def test_nothing_is_rewritten_at_or_past_the_lso(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = TxnWriter(log)
    w.roll().data(-1, key=b"a", value=b"old")  # 0
    w.data(-1, key=b"z", value=b"1")  # 1
    w.roll().data(-1, key=b"z", value=b"2")  # 2: supersedes offset 1
    lso = w.data(9, key=b"a", value=b"open")  # 3: an open transaction
    w.roll().data(-1, key=b"z", value=b"3")  # 4
    w.roll().data(-1, key=b"q", value=b"x")  # 5: active
    run(log, now=100, lso=lso)
    # segment 0 was cleaned (z=1 superseded); a=old stays: the open transaction's
    # record may yet be aborted; the segment holding the LSO and later ones are untouched
    assert contents(log) == [(0, "a=old"), (2, "z=2"), (3, "a=open"), (4, "z=3"), (5, "q=x")]
    w.end(9, commit=True)  # 6
    w.roll().data(-1, key=b"q", value=b"y")  # 7
    run(log, now=200)
    assert contents(log) == [(3, "a=open"), (4, "z=3"), (6, "COMMIT"), (7, "q=y")]
