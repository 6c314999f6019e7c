"""Reads for sending on disk: large spans come back as FileRegions of a shared
descriptor that outlives the segment (closed, deleted by retention), closed when the
last region goes; small ones as bytes."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
from log_batches import make_batch

from slipstream.log.api import LogConfig
from slipstream.log.disk import segment as segment_module
from slipstream.log.disk.disk_log import DiskLog
from slipstream.protocol.file_region import FileRegion

BIG = 1 << 30
VALUE = b"x" * 1000
ONE = len(make_batch([0], value=VALUE))


def filled(directory: Path, batches: int, config: LogConfig | None = None) -> DiskLog:
    log = DiskLog.open(directory, config or LogConfig())
    for i in range(batches):
        log.append([make_batch([1000 + i], value=VALUE)], now_ms=0, log_append_time=False)
    return log


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_large_read_is_a_region_a_small_one_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_module, "REGION_MIN_BYTES", 3 * ONE)
    log = filled(tmp_path, 5)
    small = log.read_regions(0, 2 * ONE)
    assert [type(c) for c in small.chunks] == [bytes] and small.size == 2 * ONE
    large = log.read_regions(1, BIG)
    [region] = large.chunks
    assert isinstance(region, FileRegion)
    assert (region.offset, len(region), large.size) == (ONE, 4 * ONE, 4 * ONE)
    assert region.read() == b"".join(bytes(c) for c in log.read(1, BIG).chunks)
    assert region.read(ONE, 10) == region.read()[ONE : ONE + 10]
    assert region.read(4 * ONE) == b""
    log.close()


def test_a_region_outlives_its_deleted_segment_and_closes_when_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_module, "REGION_MIN_BYTES", 0)
    log = filled(tmp_path, 6, LogConfig(segment_bytes=3 * ONE, retention_bytes=3 * ONE))
    first = log.read_regions(0, BIG).chunks[0]
    assert isinstance(first, FileRegion)
    expected = first.read()
    fd = first.file.fileno()
    assert log.enforce_retention(0) == 1  # the first segment is deleted
    assert not any(p.name.startswith("00000000000000000000") for p in tmp_path.iterdir())
    assert first.read() == expected  # still readable: its descriptor holds the file
    # Another region of the same segment shares the descriptor; closing the log keeps it.
    log.close()
    assert is_open(fd)
    del first
    gc.collect()  # (CPython frees it at once; collect makes the test independent of that)
    assert not is_open(fd)


def test_regions_of_one_segment_share_one_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_module, "REGION_MIN_BYTES", 0)
    log = filled(tmp_path, 4)
    a = log.read_regions(0, 2 * ONE).chunks[0]
    b = log.read_regions(2, 2 * ONE).chunks[0]
    assert isinstance(a, FileRegion) and isinstance(b, FileRegion)
    assert a.file is b.file
    fd = a.file.fileno()
    log.close()
    del a
    assert is_open(fd)  # b still holds it
    del b
    gc.collect()
    assert not is_open(fd)
