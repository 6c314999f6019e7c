"""The aborted-transaction index behind the log interface (memory and disk alike),
and, for disk logs, its ``.txnindex`` files through recovery."""

from __future__ import annotations

import random
from pathlib import Path

from log_env import LogEnv
from txn_writer import TxnWriter

from slipstream.log.api import AbortedTxn, LogConfig
from slipstream.log.disk.disk_log import DiskLog


def test_empty_and_simple_ranges(env: LogEnv) -> None:
    log = env.open()
    assert log.aborted_txns(0, 10) == []
    w = TxnWriter(log)
    w.data(1, 2)  # 0-1
    w.data(2)  # 2
    w.end(1, commit=False)  # marker 3
    w.end(2, commit=True)  # marker 4
    w.data(1)  # 5
    w.end(1, commit=False)  # marker 6
    first, second = AbortedTxn(1, 0, 3, 2), AbortedTxn(1, 5, 6, 7)
    assert w.entries == [first, second]
    assert log.aborted_txns(0, 7) == [first, second]
    assert log.aborted_txns(0, 1) == [first]
    assert log.aborted_txns(4, 5) == []
    assert log.aborted_txns(4, 6) == [second]
    assert log.aborted_txns(7, 9) == []
    assert log.aborted_txns(3, 3) == []  # an empty range


def test_entries_follow_rolls_reopen_and_retention(env: LogEnv) -> None:
    config = LogConfig(segment_bytes=300, index_interval_bytes=0)
    log = env.open(config)
    w = TxnWriter(log)
    for round_ in range(6):
        w.data(1, 2)
        w.data(2)
        w.end(1, commit=round_ % 2 == 1)
        w.end(2, commit=False)
    assert log.segment_count > 3  # type: ignore[attr-defined]
    end = log.log_end_offset
    assert log.aborted_txns(0, end) == w.entries
    log = env.reopen(config)
    assert log.aborted_txns(0, end) == w.entries
    for start in range(end):
        assert log.aborted_txns(start, end) == w.expected(start, end)
    cut = log.segments[2].base_offset  # type: ignore[attr-defined]
    log.delete_records_before(cut)
    got = log.aborted_txns(cut, end)
    # entries go with their segments; those of transactions begun at or after the cut
    # were made while a kept segment was active
    assert set(got) <= set(w.expected(cut, end))
    assert [t for t in w.entries if t.first_offset >= cut] == [t for t in got if t.first_offset >= cut]
    assert len([t for t in w.entries if t.first_offset >= cut]) >= 4


def test_random_transactions_match_a_model(env: LogEnv) -> None:
    rng = random.Random(7)
    log = env.open(LogConfig(segment_bytes=700, index_interval_bytes=0))
    w = TxnWriter(log)
    for _ in range(150):
        pid = rng.randrange(4)
        roll = rng.random()
        if roll < 0.55:
            w.data(pid, rng.randint(1, 3), transactional=pid != 3)
        elif pid in w.open:
            w.end(pid, commit=roll < 0.75)
    end = log.log_end_offset
    assert w.entries
    for start in range(0, end, 3):
        for stop in range(start + 1, end + 1, 5):
            assert log.aborted_txns(start, stop) == w.expected(start, stop), (start, stop)


def _disk_log_with_aborts(path: Path) -> tuple[DiskLog, list[AbortedTxn]]:
    log = DiskLog.open(path, LogConfig(segment_bytes=300, index_interval_bytes=0))
    w = TxnWriter(log)
    for round_ in range(4):
        w.data(1, 2)
        w.data(2)
        w.end(1, commit=round_ == 2)
        w.end(2, commit=False)
    log.flush()
    return log, w.entries


def test_missing_or_torn_txn_index_files_are_rebuilt(tmp_path: Path) -> None:
    log, entries = _disk_log_with_aborts(tmp_path)
    end = log.log_end_offset
    log.close()
    files = sorted(tmp_path.glob("*.txnindex"))
    assert len(files) == len(list(tmp_path.glob("*.log"))) > 2
    assert sum(f.stat().st_size for f in files) == 34 * len(entries)
    for damage in ("missing", "torn"):
        victim = next(f for f in files if f.stat().st_size)
        if damage == "missing":
            victim.unlink()
        else:
            victim.write_bytes(victim.read_bytes()[:-5])
        log = DiskLog.open(tmp_path, LogConfig(segment_bytes=300))
        assert log.aborted_txns(0, end) == entries
        log.close()
        assert sum(f.stat().st_size for f in tmp_path.glob("*.txnindex")) == 34 * len(entries)


def test_entry_without_its_marker_is_dropped(tmp_path: Path) -> None:
    log, entries = _disk_log_with_aborts(tmp_path)
    end = log.log_end_offset
    # a crash after the entry was written but before its marker
    log.add_aborted_txn(AbortedTxn(9, end - 1, end, end + 1))
    log.close()
    log = DiskLog.open(tmp_path, LogConfig(segment_bytes=300))
    assert log.aborted_txns(0, end + 5) == entries
    log.close()


def test_compaction_keeps_the_entries_of_merged_segments(env: LogEnv) -> None:
    from slipstream.log.compaction import compact

    config = LogConfig(segment_bytes=400, index_interval_bytes=0)
    log = env.open(config)
    w = TxnWriter(log)
    for round_ in range(6):
        w.data(1, 2)
        w.data(5, 1, transactional=False)
        w.end(1, commit=round_ % 3 == 0)
    before = log.segment_count  # type: ignore[attr-defined]
    end = log.log_end_offset
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0)
    log.update_config(config)  # closed segments now fit in one
    stats = compact(log, now_ms=0, delete_retention_ms=0)
    assert stats.installed and log.segment_count < before  # type: ignore[attr-defined]
    assert log.aborted_txns(0, end) == w.entries and len(w.entries) == 4
    log = env.reopen(config)
    assert log.aborted_txns(0, end) == w.entries
