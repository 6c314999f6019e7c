"""Disk-only behaviour: files, restart, crash recovery, bounded reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_batches import make_batch, split

from slipstream.log.api import LogConfig
from slipstream.log.disk import segment as segment_module
from slipstream.log.disk.checkpoint import read_offset, write_offset
from slipstream.log.disk.disk_log import DiskLog
from slipstream.log.disk.recovery import LOG_START_FILE
from slipstream.log.disk.segment import DiskSegment
from slipstream.log.disk.store import DiskLogStore
from slipstream.protocol.record_batch import parse_header

BIG = 1 << 30
ONE = len(make_batch([0]))


def read_all(log: DiskLog, offset: int | None = None) -> bytes:
    result = log.read(log.log_start_offset if offset is None else offset, BIG)
    return b"".join(bytes(c) for c in result.chunks)


def disk_segments(log: DiskLog) -> list[DiskSegment]:
    out = []
    for segment in log.segments:
        assert isinstance(segment, DiskSegment)
        out.append(segment)
    return out


def build(directory: Path, config: LogConfig, n: int, records: int = 1) -> list[bytes]:
    log = DiskLog.open(directory, config)
    batches = []
    for i in range(n):
        batch = make_batch([1000 + i] * records, value=b"%d" % i)
        log.append([batch], now_ms=0, log_append_time=False)
        batches.append(bytes(batch))
    log.close()
    return batches


def test_files_and_reopen(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10, index_interval_bytes=0)
    batches = build(tmp_path, config, 10)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "00000000000000000000.log" in names
    assert "00000000000000000003.index" in names
    assert "00000000000000000009.timeindex" in names
    log = DiskLog.open(tmp_path, config)
    segments = disk_segments(log)
    assert [s.base_offset for s in segments] == [0, 3, 6, 9]
    # sealed segments keep no index in memory; the active one does
    assert not any(s.indexes.offsets.loaded for s in segments[:-1])
    assert segments[-1].indexes.offsets.loaded
    assert read_all(log) == b"".join(batches)
    for offset in range(10):
        assert log.read(offset, 1).chunks[0] == batches[offset]
        assert log.offset_for_timestamp(1000 + offset) == (offset, 1000 + offset)
    assert log.append([make_batch([5])], now_ms=0, log_append_time=False).base_offset == 10
    log.close()
    log.close()  # idempotent


def test_sequential_small_reads_cover_everything(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=200)
    batches = build(tmp_path, config, 60, records=2)
    log = DiskLog.open(tmp_path, config)
    got = b""
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, 150)
        data = b"".join(bytes(c) for c in result.chunks)
        got += data
        offset = parse_header(split(data)[-1]).next_offset
    assert got == b"".join(batches)
    log.close()


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def _restore(directory: Path, files: dict[str, bytes], changed: str, data: bytes) -> None:
    """Back to the snapshot with ``changed`` replaced by ``data``. Only the last segment
    is touched by recovery and the appends of a check (its indexes are rebuilt on every
    open), so only files created since the snapshot need to go."""
    for p in directory.iterdir():
        if p.name not in files:
            p.unlink()
    (directory / changed).write_bytes(data)


def _check_recovered(directory: Path, config: LogConfig, kept: list[bytes]) -> None:
    log = DiskLog.open(directory, config)
    end = parse_header(kept[-1]).next_offset
    assert log.log_end_offset == end
    assert read_all(log) == b"".join(kept)
    assert log.append([make_batch([1])], now_ms=0, log_append_time=False).base_offset == end
    log.close()
    log = DiskLog.open(directory, config)
    assert log.log_end_offset == end + 1
    assert split(read_all(log))[:-1] == kept
    log.close()


@pytest.mark.parametrize("segment_bytes", [4 * ONE + 60, ONE + 10])
def test_crash_recovery_truncated_or_garbled_last_batch(tmp_path: Path, segment_bytes: int) -> None:
    # segment_bytes: the last batch shares its segment, or has one of its own
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=0)
    batches = build(tmp_path, config, 5)
    log = DiskLog.open(tmp_path, config)
    last = make_batch([2000, 2001, 2002], value=b"last")
    log.append([last], now_ms=0, log_append_time=False)
    batches.append(bytes(last))
    log.close()
    files = _snapshot(tmp_path)
    data_name = max(n for n in files if n.endswith(".log"))
    data = files[data_name]
    start = len(data) - len(last)
    assert data[start:] == bytes(last)
    for cut in range(start, len(data)):
        _restore(tmp_path, files, data_name, data[:cut])
        _check_recovered(tmp_path, config, batches[:-1])
    for pos in range(start, len(data)):
        garbled = bytearray(data)
        garbled[pos] ^= 0xFF
        _restore(tmp_path, files, data_name, bytes(garbled))
        # The partition leader epoch (bytes 12-15) is covered neither by the CRC nor by
        # the offset checks: damage there is undetectable and harmless.
        if 12 <= pos - start < 16:
            log = DiskLog.open(tmp_path, config)
            assert log.log_end_offset == parse_header(bytes(last)).next_offset
            log.close()
            continue
        _check_recovered(tmp_path, config, batches[:-1])


def test_garbage_after_the_last_batch_is_truncated(tmp_path: Path) -> None:
    config = LogConfig()
    batches = build(tmp_path, config, 3)
    data = tmp_path / "00000000000000000000.log"
    with data.open("ab") as f:
        f.write(b"\x00" * 100)
    _check_recovered(tmp_path, config, batches)
    assert data.stat().st_size == sum(map(len, batches)) + ONE


def test_missing_or_bad_indexes_are_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10, index_interval_bytes=0)
    batches = build(tmp_path, config, 10)
    for p in tmp_path.glob("*.index"):
        p.unlink()
    (tmp_path / "00000000000000000003.timeindex").unlink()
    with (tmp_path / "00000000000000000006.timeindex").open("ab") as f:
        f.write(b"\x01\x02\x03")  # not a whole entry
    log = DiskLog.open(tmp_path, config)
    assert read_all(log) == b"".join(batches)
    for offset in range(10):
        assert log.read(offset, 1).chunks[0] == batches[offset]
        assert log.offset_for_timestamp(1000 + offset) == (offset, 1000 + offset)
    log.close()
    for base in (0, 3, 6, 9):
        assert (tmp_path / f"{base:020d}.index").stat().st_size == 3 * 8 or base == 9
    assert (tmp_path / "00000000000000000006.timeindex").stat().st_size == 3 * 12


def test_index_pointing_elsewhere_is_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10, index_interval_bytes=0)
    batches = build(tmp_path, config, 7)
    index = tmp_path / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    raw[-1] ^= 0x01  # last entry's position off by one
    index.write_bytes(bytes(raw))
    log = DiskLog.open(tmp_path, config)
    assert read_all(log) == b"".join(batches)
    assert log.read(2, 1).chunks[0] == batches[2]
    log.close()
    assert index.read_bytes() != bytes(raw)


def test_torn_earlier_segment_without_index_is_repaired(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10)
    batches = build(tmp_path, config, 7)
    first = tmp_path / "00000000000000000000.log"
    first.write_bytes(first.read_bytes()[: 2 * ONE + 5])
    (tmp_path / "00000000000000000000.index").unlink()
    log = DiskLog.open(tmp_path, config)
    assert split(read_all(log)) == batches[:2] + batches[3:]
    assert log.read(2, 1).chunks[0] == batches[3]  # offset 2 is gone: next batch
    log.close()


def test_torn_tail_of_a_sealed_segment_with_its_indexes_is_repaired(tmp_path: Path) -> None:
    """The indexes are intact but the data after their last entry is torn: the header walk
    must notice and send the segment through full validation."""
    config = LogConfig(segment_bytes=3 * ONE + 10, index_interval_bytes=0)
    batches = build(tmp_path, config, 7)
    first = tmp_path / "00000000000000000000.log"
    first.write_bytes(first.read_bytes()[: 2 * ONE + 5])  # batch 2 torn after 5 bytes
    log = DiskLog.open(tmp_path, config)
    assert split(read_all(log)) == batches[:2] + batches[3:]
    assert log.read(2, 1).chunks[0] == batches[3]  # offset 2 is gone: next batch
    assert log.offset_for_timestamp(1002) == (3, 1003)
    log.close()
    assert first.stat().st_size == 2 * ONE  # the torn bytes were cut
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 2 * 8


@pytest.mark.parametrize("damage", ["time index short one entry", "time index empty", "offset index empty"])
def test_sealed_segment_whose_indexes_disagree_is_revalidated(tmp_path: Path, damage: str) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10, index_interval_bytes=0)
    batches = build(tmp_path, config, 7)
    index = tmp_path / "00000000000000000003.index"
    timeindex = tmp_path / "00000000000000000003.timeindex"
    if damage == "time index short one entry":
        timeindex.write_bytes(timeindex.read_bytes()[:-12])
    elif damage == "time index empty":
        timeindex.write_bytes(b"")
    else:
        index.write_bytes(b"")
    log = DiskLog.open(tmp_path, config)
    assert read_all(log) == b"".join(batches)
    for offset in range(7):
        assert log.read(offset, 1).chunks[0] == batches[offset]
        assert log.offset_for_timestamp(1000 + offset) == (offset, 1000 + offset)
    log.close()
    # Rebuilt from the data: one entry per batch in both.
    assert index.stat().st_size == 3 * 8
    assert timeindex.stat().st_size == 3 * 12


def test_log_start_checkpoint(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10)
    build(tmp_path, config, 10)
    log = DiskLog.open(tmp_path, config)
    log.delete_records_before(4)
    assert read_offset(tmp_path / LOG_START_FILE) == 4
    log.close()
    log = DiskLog.open(tmp_path, config)
    assert log.log_start_offset == 4
    assert [s.base_offset for s in log.segments] == [3, 6, 9]
    log.close()


def test_crash_during_delete_records_finishes_on_open(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE + 10)
    build(tmp_path, config, 10)
    write_offset(tmp_path / LOG_START_FILE, 7)  # checkpoint written, segments not yet gone
    log = DiskLog.open(tmp_path, config)
    assert log.log_start_offset == 7
    assert [s.base_offset for s in log.segments] == [6, 9]
    assert not (tmp_path / "00000000000000000000.log").exists()
    log.close()


def test_checkpoint_beyond_the_end_restarts_the_log_there(tmp_path: Path) -> None:
    build(tmp_path, LogConfig(), 3)
    write_offset(tmp_path / LOG_START_FILE, 100)
    log = DiskLog.open(tmp_path, LogConfig())
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (100, 100, 0)
    assert log.append([make_batch([1])], now_ms=0, log_append_time=False).base_offset == 100
    log.close()
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["00000000000000000100.log"]


def test_leftover_files_are_cleaned(tmp_path: Path) -> None:
    build(tmp_path, LogConfig(), 2)
    (tmp_path / "00000000000000000099.index").write_bytes(b"")
    (tmp_path / "00000000000000000099.timeindex").write_bytes(b"")
    (tmp_path / "log-start-offset.tmp").write_bytes(b"junk")
    log = DiskLog.open(tmp_path, LogConfig())
    assert log.log_end_offset == 2
    log.close()
    leftovers = {"00000000000000000099.index", "00000000000000000099.timeindex"}
    assert not leftovers & {p.name for p in tmp_path.iterdir()}
    assert not list(tmp_path.glob("*.tmp"))


def test_reads_and_recovery_use_bounded_buffers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = LogConfig(index_interval_bytes=4096)
    log = DiskLog.open(tmp_path, config)
    value = b"x" * 1000
    for _ in range(3000):  # ~3 MB in one segment
        log.append([make_batch([1], value=value)], now_ms=0, log_append_time=False)
    sizes: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        sizes.append(n)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting_pread)
    result = log.read(1500, 5000)
    assert 4000 < result.size <= 5000
    assert max(sizes) <= 5000
    sizes.clear()
    log.close()
    log = DiskLog.open(tmp_path, config)
    assert log.log_end_offset == 3000
    assert max(sizes) <= 1 << 20
    log.close()


def test_failed_write_leaves_no_partial_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = DiskLog.open(tmp_path, LogConfig())
    log.append([make_batch([1])], now_ms=0, log_append_time=False)
    real_write = os.write

    def half_then_fail(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 20:
            return real_write(fd, memoryview(data)[:20])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_module.os, "write", half_then_fail)
    with pytest.raises(OSError):
        log.append([make_batch([2])], now_ms=0, log_append_time=False)
    monkeypatch.setattr(segment_module.os, "write", real_write)
    assert (tmp_path / "00000000000000000000.log").stat().st_size == ONE
    assert log.append([make_batch([3])], now_ms=0, log_append_time=False).base_offset == 1
    log.close()
    log = DiskLog.open(tmp_path, LogConfig())
    assert log.log_end_offset == 2
    log.close()


def test_store_cleans_interrupted_removals(tmp_path: Path) -> None:
    store = DiskLogStore(tmp_path)
    store.open("a-b", 2, LogConfig())
    store.close()
    (tmp_path / "a-b-2.0123-delete").mkdir()
    (tmp_path / "not-a-partition").mkdir()
    store = DiskLogStore(tmp_path)
    assert store.existing() == [("a-b", 2)]
    assert not (tmp_path / "a-b-2.0123-delete").exists()
    with pytest.raises(ValueError):
        store.open("../x", 0, LogConfig())
    store.remove("a-b", 2)
    store.remove("a-b", 2)  # already gone: fine
    assert store.existing() == []
    store.close()


def test_flush_and_config_update(tmp_path: Path) -> None:
    log = DiskLog.open(tmp_path, LogConfig(index_interval_bytes=1 << 20))
    log.append([make_batch([1])], now_ms=0, log_append_time=False)
    log.flush()
    log.update_config(LogConfig(index_interval_bytes=0))
    for i in range(3):
        log.append([make_batch([2 + i])], now_ms=0, log_append_time=False)
    log.flush()
    assert disk_segments(log)[-1].indexes.offsets.count == 3
    log.close()


def test_recovery_of_a_batch_larger_than_the_scan_window(tmp_path: Path) -> None:
    config = LogConfig()
    log = DiskLog.open(tmp_path, config)
    batches = [make_batch([1], value=b"a" * 100), make_batch([2], value=b"b" * (3 << 19))]
    batches.append(make_batch([3]))
    log.append(batches, now_ms=0, log_append_time=False)
    log.close()
    data = tmp_path / "00000000000000000000.log"
    raw = data.read_bytes()
    _check_recovered(tmp_path, config, [bytes(b) for b in batches])
    data.write_bytes(raw[: len(batches[0]) + len(batches[1]) - 1])  # torn big batch
    for p in tmp_path.glob("*index"):
        p.unlink()
    _check_recovered(tmp_path, config, [bytes(batches[0])])


def test_flush_from_another_thread_while_appending(tmp_path: Path) -> None:
    import threading

    log = DiskLog.open(tmp_path, LogConfig(segment_bytes=20 * ONE))
    errors: list[BaseException] = []
    stop = threading.Event()

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(200):
            log.append([make_batch([i])], now_ms=i, log_append_time=False)
            if i % 50 == 49:
                log.enforce_retention(10**12)  # deletes (closes) segments under the flusher
    finally:
        stop.set()
        thread.join()
    assert errors == []
    log.close()
    log = DiskLog.open(tmp_path, LogConfig(segment_bytes=20 * ONE))
    assert log.log_end_offset == 200
    log.close()
