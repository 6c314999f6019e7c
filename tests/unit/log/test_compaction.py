"""Log compaction, on the memory and the disk log (plus disk crash recovery and one
end-to-end run through the broker with confluent-kafka)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from log_env import LogEnv

from slipstream.log import compaction
from slipstream.log.api import LogConfig, PartitionLog
from slipstream.log.compaction import compact, plan_compaction
from slipstream.log.compaction_filter import CompactionStats
from slipstream.log.disk import compaction_space
from slipstream.log.disk.disk_log import DiskLog
from slipstream.log.disk.swap import STAGING_DIR, SWAP_MARKER
from slipstream.log.segmented import SegmentedLog
from slipstream.protocol import compression
from slipstream.protocol.record_batch import DELETE_HORIZON_MASK, BatchHeader, parse_header
from slipstream.protocol.records import (
    LOG_APPEND_TIME,
    ProducerRecord,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
)

BIG = 1 << 30
DAY = 24 * 3600 * 1000
# Segments roll by time: appends at one ``now`` share a segment, a later ``now`` rolls.
CONFIG = LogConfig(segment_ms=1)

KV = tuple[bytes | None, bytes | None]


class Writer:
    """Appends batches of (key, value) records, one segment per ``segment()`` call."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.now = 0
        self.ts = 1000

    def segment(self) -> Writer:
        self.now += 10
        return self

    def batch(self, *records: KV, **options: Any) -> int:
        specs = []
        for key, value in records:
            specs.append(ProducerRecord(key, value, timestamp_ms=self.ts))
            self.ts += 1
        raw = build_batch(specs, **options)
        info = self.log.append([bytearray(raw)], now_ms=self.now, log_append_time=False)
        return info.base_offset


def batches(log: PartitionLog, offset: int | None = None) -> list[bytes]:
    result = log.read(log.log_start_offset if offset is None else offset, BIG)
    data = b"".join(bytes(c) for c in result.chunks)
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        size = parse_header(data, pos).size
        out.append(data[pos : pos + size])
        pos += size
    return out


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for batch in batches(log):
        _, recs = decode_batch(batch)  # checks the CRC too
        out.extend((r.offset, r.key, r.value) for r in recs)
    return out


def decoded(log: PartitionLog) -> list[tuple[BatchHeader, list[Record]]]:
    return [decode_batch(b) for b in batches(log)]


def segment_count(log: PartitionLog) -> int:
    assert isinstance(log, SegmentedLog)
    return log.segment_count


def run(log: PartitionLog, now: int = 10_000, retention: int = DAY) -> CompactionStats:
    stats = compact(log, now_ms=now, delete_retention_ms=retention)
    assert stats.aborted is None or stats.aborted == "nothing to compact"
    return stats


def test_latest_value_per_key_survives_with_original_offsets(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"a", b"a1"), (b"b", b"b1"))  # 0, 1
    w.batch((b"c", b"c1"))  # 2
    w.segment().batch((b"a", b"a2"), (b"c", b"c2"))  # 3, 4
    w.segment().batch((b"b", b"b2"))  # 5
    w.segment().batch((b"d", b"d1"))  # 6: the active segment
    assert segment_count(log) == 4
    before = (log.log_start_offset, log.log_end_offset)

    stats = run(log)

    assert stats.installed and stats.records_removed == 3
    assert records(log) == [(3, b"a", b"a2"), (4, b"c", b"c2"), (5, b"b", b"b2"), (6, b"d", b"d1")]
    assert (log.log_start_offset, log.log_end_offset) == before
    assert segment_count(log) == 2  # the three closed segments merged into one
    # The emptied batches are gone; the partly emptied one keeps its offset range.
    headers = [h for h, _ in decoded(log)]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(3, 4), (5, 5), (6, 6)]
    log = env.reopen(CONFIG)
    assert records(log)[0] == (3, b"a", b"a2")
    assert (log.log_start_offset, log.log_end_offset) == before


def test_older_values_go_when_the_latest_is_in_the_active_segment(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"k", b"old"), (b"other", b"x"))  # 0, 1
    w.segment().batch((b"k", b"new"))  # 2: active
    run(log)
    assert records(log) == [(1, b"other", b"x"), (2, b"k", b"new")]
    assert (log.log_start_offset, log.log_end_offset) == (0, 3)
    w.segment().batch((b"other", b"y"))  # 3: now the whole first segment is superseded
    run(log)
    assert records(log) == [(2, b"k", b"new"), (3, b"other", b"y")]
    assert log.log_start_offset == 0  # the empty first segment keeps the log start
    assert log.read(0, 1).chunks  # reading from the log start finds the next batch
    log = env.reopen(CONFIG)
    assert (log.log_start_offset, log.log_end_offset) == (0, 4)
    assert records(log) == [(2, b"k", b"new"), (3, b"other", b"y")]


def test_tombstones_stay_until_delete_retention_after_the_first_cleaning(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.ts = 5  # ancient record timestamps must not shorten the tombstone's life
    w.segment().batch((b"a", b"1"), (b"b", b"1"))  # 0, 1
    w.segment().batch((b"a", None), (b"c", b"1"))  # 2, 3: tombstone for a
    w.segment().batch((b"z", b"1"))  # 4: active

    stats = run(log, now=50_000, retention=1000)
    assert stats.next_delete_horizon_ms == 51_000
    assert records(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1"), (4, b"z", b"1")]
    header, recs = decoded(log)[1]
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == 51_000
    assert [r.timestamp for r in recs] == [7, 8]  # record timestamps unchanged

    stats = run(log, now=50_999, retention=1000)
    assert (2, b"a", None) in records(log) and stats.tombstones_removed == 0

    log = env.reopen(CONFIG)  # the horizon lives in the batch: it survives a restart
    stats = run(log, now=51_000, retention=5)  # the stamped horizon wins over the config
    assert stats.tombstones_removed == 1
    assert records(log) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"z", b"1")]
    assert stats.next_delete_horizon_ms is None


def test_tombstone_superseded_by_a_newer_value_goes_at_once(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"a", b"1"))
    w.segment().batch((b"a", None))
    w.segment().batch((b"a", b"2"))
    run(log)
    assert records(log) == [(2, b"a", b"2")]


def test_reads_across_gaps_give_increasing_offsets(env: LogEnv) -> None:
    log = env.open(LogConfig(segment_ms=1, index_interval_bytes=0))
    w = Writer(log)
    for round_ in range(6):
        w.segment()
        for key in range(5):
            w.batch((b"k%d" % key, b"r%d" % round_), (b"k%d" % ((key + 1) % 5), b"x"))
    run(log)
    expected = records(log)
    assert len(expected) < 60
    # A consumer fetching batch by batch from every possible offset.
    for start in range(log.log_start_offset, log.log_end_offset):
        seen: list[int] = []
        offset = start
        while offset < log.log_end_offset:
            chunks = log.read(offset, 1).chunks
            assert chunks, f"nothing readable at {offset} below the log end"
            header, recs = decode_batch(bytes(chunks[0]))
            assert header.last_offset >= offset
            seen.extend(r.offset for r in recs if r.offset >= start)
            offset = header.next_offset
        assert seen == sorted(seen) == [o for o, _, _ in expected if o >= start]
    # ListOffsets by time and max timestamp still answer with surviving records.
    first_ts = decoded(log)[0][1][0].timestamp
    assert log.offset_for_timestamp(0) == (expected[0][0], first_ts)
    found = log.max_timestamp()
    assert found is not None and found[0] == expected[-1][0]


@pytest.mark.parametrize(
    "codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
)
def test_compression_and_producer_fields_are_preserved(env: LogEnv, codec: int) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    fields = {"producer_id": 7, "producer_epoch": 3, "base_sequence": 40}
    w.segment().batch(
        (b"a", b"1"),
        (b"b", b"1"),
        (b"c", b"1"),
        compression=codec,
        partition_leader_epoch=2,
        **fields,
    )
    w.segment().batch((b"c", b"2"), compression=codec)
    run(log)
    header, recs = decoded(log)[0]
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 40)
    assert (header.base_offset, header.last_offset, header.record_count) == (0, 2, 2)
    assert header.partition_leader_epoch == 2
    assert [(r.offset, r.key, r.timestamp) for r in recs] == [(0, b"a", 1000), (1, b"b", 1001)]
    assert header.max_timestamp == 1001  # recomputed from the records left


def test_log_append_time_headers_keyless_control_and_transactional(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment()
    keyless = build_batch([ProducerRecord(None, b"nokey", timestamp_ms=1)])
    log.append([bytearray(keyless)], now_ms=w.now, log_append_time=False)  # 0
    txn = build_batch(
        [ProducerRecord(b"a", b"txn", timestamp_ms=2)],
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append([bytearray(txn)], now_ms=w.now, log_append_time=False)  # 1
    marker = build_control_batch(1, producer_id=9, producer_epoch=0, timestamp_ms=3)
    log.append([bytearray(marker)], now_ms=w.now, log_append_time=False)  # 2
    append_time = build_batch(
        [
            ProducerRecord(b"h", b"1", headers=[("trace", b"x")], timestamp_ms=4),
            ProducerRecord(b"g", b"1", timestamp_ms=5),
        ],
        timestamp_type=LOG_APPEND_TIME,
    )
    log.append([bytearray(append_time)], now_ms=w.now, log_append_time=True)  # 3, 4
    stamp = w.now
    kept = batches(log)[:3]
    w.segment().batch((b"a", b"plain"), (b"g", b"2"))  # 5, 6
    run(log)
    out = batches(log)
    # keyless kept; the committed transactional record is superseded like any other
    # (Kafka's rules), its batch kept empty as producer 9's last one (Kafka's cleaner
    # retains it so); its marker stays: the pass read its transaction's data
    assert out[0] == kept[0]
    emptied, none = decode_batch(out[1])
    assert none == [] and emptied.record_count == 0
    assert (emptied.base_offset, emptied.producer_id, emptied.is_transactional) == (1, 9, True)
    assert out[2] == kept[2]
    header, recs = decode_batch(out[3])
    assert header.is_log_append_time and header.max_timestamp == stamp
    assert [(r.offset, r.key, r.headers) for r in recs] == [(3, b"h", [("trace", b"x")])]


def test_nothing_to_do_changes_nothing(env: LogEnv) -> None:
    log = env.open(LogConfig(segment_ms=1, segment_bytes=1000))
    w = Writer(log)
    assert compact(log, now_ms=0, delete_retention_ms=0).aborted == "nothing to compact"
    for i in range(5):
        w.segment().batch((b"k%d" % i, b"v" * 400))
    first = run(log)
    assert first.installed and first.groups_cleaned == 2  # merged in pairs (segment.bytes)
    assert isinstance(log, SegmentedLog)
    layout = [(s.base_offset, s.size) for s in log.segments]
    again = run(log)
    assert again.groups_cleaned == 0 and again.records_removed == 0
    assert [(s.base_offset, s.size) for s in log.segments] == layout


def test_appends_during_compaction_are_kept(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"a", b"1"), (b"b", b"1"))
    w.segment().batch((b"b", b"2"))
    job = plan_compaction(log, now_ms=0, delete_retention_ms=DAY)
    assert job is not None
    assert plan_compaction(log, now_ms=0, delete_retention_ms=DAY) is None  # one at a time
    job.run()  # the worker's part; the log keeps taking appends meanwhile
    w.batch((b"a", b"2"))  # 3: into the active segment
    w.segment().batch((b"c", b"1"))  # 4: rolls a new segment
    assert job.install().installed
    assert records(log) == [(0, b"a", b"1"), (2, b"b", b"2"), (3, b"a", b"2"), (4, b"c", b"1")]
    assert log.log_end_offset == 5
    run(log)  # the next pass sees the newer a
    assert records(log) == [(2, b"b", b"2"), (3, b"a", b"2"), (4, b"c", b"1")]


def test_install_is_dropped_when_retention_removed_planned_segments(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"a", b"1"))
    w.segment().batch((b"a", b"2"))
    w.segment().batch((b"b", b"1"))
    job = plan_compaction(log, now_ms=0, delete_retention_ms=DAY)
    assert job is not None
    job.run()
    log.delete_records_before(1)
    stats = job.install()
    assert not stats.installed and stats.aborted == "segments changed since the plan"
    assert records(log) == [(1, b"a", b"2"), (2, b"b", b"1")]
    assert run(log).installed  # the next pass is free to go
    if isinstance(log, DiskLog):
        assert not (log.directory / STAGING_DIR).exists()


def test_cancelled_job_leaves_the_log_alone(env: LogEnv) -> None:
    log = env.open(CONFIG)
    w = Writer(log)
    w.segment().batch((b"a", b"1"))
    w.segment().batch((b"a", b"2"))
    before = batches(log)
    job = plan_compaction(log, now_ms=0, delete_retention_ms=DAY)
    assert job is not None
    job.run()
    job.cancel()
    with pytest.raises(RuntimeError):
        job.install()
    assert batches(log) == before
    assert plan_compaction(log, now_ms=0, delete_retention_ms=DAY) is not None


def test_worker_thread_runs_while_the_log_takes_appends_and_reads(env: LogEnv) -> None:
    log = env.open(LogConfig(segment_ms=1, segment_bytes=2000))
    w = Writer(log)
    for i in range(300):
        if i % 7 == 0:
            w.segment()
        w.batch((b"k%d" % (i % 13), b"v%d" % i))
    job = plan_compaction(log, now_ms=0, delete_retention_ms=DAY)
    assert job is not None
    worker = threading.Thread(target=job.run)
    worker.start()
    appended = 0
    while worker.is_alive() or appended < 50:
        if appended % 5 == 0:
            w.segment()
        w.batch((b"new%d" % appended, b"x"))
        appended += 1
        assert log.read(log.log_start_offset, 1).chunks
    worker.join()
    end = log.log_end_offset
    assert job.install().installed
    assert log.log_end_offset == end == 300 + appended
    got = records(log)
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
    assert {k for _, k, _ in got if k and k.startswith(b"new")} == {
        b"new%d" % i for i in range(appended)
    }
    latest = {b"k%d" % (i % 13): i for i in range(300)}
    assert [(o, k) for o, k, _ in got if o < 300] == sorted((o, k) for k, o in latest.items())


async def test_cleaner_policy_and_error_isolation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from slipstream.broker import cleaner as cleaner_module
    from slipstream.broker.cleaner import LogCleaner
    from slipstream.broker.config import BrokerConfig
    from slipstream.broker.topics import TopicManager
    from slipstream.log.memory import MemoryLogStore

    topics = TopicManager(BrokerConfig(storage="memory"), MemoryLogStore(), None)
    settings = {"cleanup.policy": "compact,delete", "segment.ms": "1", "delete.retention.ms": "100"}
    topics.create("c", 2, settings)
    topics.create("plain", 1, {"segment.ms": "1"})
    now = [1000]
    cleaner = LogCleaner(topics, lambda: now[0])
    logs = [topics.partition("c", 0), topics.partition("c", 1), topics.partition("plain", 0)]
    writers = [Writer(plog) for plog in logs if plog is not None]
    for w in writers:
        w.segment().batch((b"a", b"1"))
        w.segment().batch((b"a", None))
        w.segment().batch((b"b", b"1"))
        for i in range(20):  # distinct keys: a log that compaction does not shrink much
            w.batch((b"x%d" % i, b"v"))
    try:
        done = await cleaner.clean_all()
        assert [(d.topic, d.partition) for d in done] == [("c", 0), ("c", 1)]
        assert records(writers[0].log)[:2] == [(1, b"a", None), (2, b"b", b"1")]
        assert len(records(writers[2].log)) == 23  # cleanup.policy=delete: not compacted
        assert await cleaner.clean_all() == []  # nothing new, horizon not reached
        now[0] = 1100  # the tombstones' horizon (1000 + delete.retention.ms)
        done = await cleaner.clean_all()
        assert [d.stats.tombstones_removed for d in done] == [1, 1]
        writers[0].segment().batch((b"b", b"2"))  # small growth: below the dirty ratio
        assert await cleaner.clean_all() == []
        for i in range(20):
            writers[0].segment().batch((b"b", b"%d" % i))
        real_plan = cleaner_module.plan_compaction

        def failing_plan(plog: PartitionLog, **kw: int) -> compaction.CompactionJob | None:
            if plog is writers[0].log:
                raise OSError("disk on fire")
            return real_plan(plog, **kw)

        monkeypatch.setattr(cleaner_module, "plan_compaction", failing_plan)
        done = await cleaner.clean_all(force=True)
        assert [(d.topic, d.partition) for d in done] == [("c", 1)]
        assert "compaction of c-0 failed" in caplog.text
    finally:
        cleaner.close()
        topics.close()


def test_min_compaction_lag_keeps_young_segments_out_of_the_pass(env: LogEnv) -> None:
    def fill(log: PartitionLog) -> None:
        w = Writer(log)
        w.segment().batch((b"a", b"old"))  # 0, timestamp 1000
        w.ts = 5000
        w.segment().batch((b"a", b"young"))  # 1, timestamp 5000: within a 1 s lag at 5500
        w.segment().batch((b"a", b"new"))  # 2, in the active segment

    no_lag = env.open(CONFIG, topic="no-lag")
    fill(no_lag)
    compaction.compact(no_lag, now_ms=5500, delete_retention_ms=DAY)
    assert records(no_lag) == [(2, b"a", b"new")]

    lagged = env.open(CONFIG, topic="lagged")
    fill(lagged)
    job = compaction.plan_compaction(lagged, now_ms=5500, delete_retention_ms=DAY, min_compaction_lag_ms=1000)
    assert job is not None
    job.run()
    assert job.install().installed
    # The old record goes (a newer one exists); the young one stays though superseded.
    assert records(lagged) == [(1, b"a", b"young"), (2, b"a", b"new")]

    only_young = env.open(CONFIG, topic="only-young")
    w = Writer(only_young)
    w.ts = 5000
    w.segment().batch((b"a", b"young"))
    w.segment().batch((b"a", b"new"))
    assert compaction.plan_compaction(
        only_young, now_ms=5500, delete_retention_ms=DAY, min_compaction_lag_ms=1000
    ) is None


async def test_cleaner_follows_the_topics_dirty_ratio_and_max_lag() -> None:
    from slipstream.broker.cleaner import LogCleaner
    from slipstream.broker.config import BrokerConfig
    from slipstream.broker.topics import TopicManager
    from slipstream.log.memory import MemoryLogStore

    topics = TopicManager(BrokerConfig(storage="memory"), MemoryLogStore(), None)
    base = {"cleanup.policy": "compact", "segment.ms": "1"}
    topics.create("eager", 1, {**base, "min.cleanable.dirty.ratio": "0.01"})
    topics.create("lagged", 1, {**base, "min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "60000"})
    topics.create("lazy", 1, {**base, "min.cleanable.dirty.ratio": "0.99"})
    now = [1000]
    cleaner = LogCleaner(topics, lambda: now[0])
    writers = {name: Writer(plog) for name in ("eager", "lagged", "lazy")
               if (plog := topics.partition(name, 0)) is not None}
    for w in writers.values():
        for i in range(30):
            w.segment().batch((b"k%d" % i, b"v"))
    try:
        assert len(await cleaner.clean_all()) == 3  # first pass after start: everything
        for w in writers.values():  # a little more: dirty ratio about 0.03
            w.segment().batch((b"k0", b"v2"))
        done = await cleaner.clean_all()
        assert [d.topic for d in done] == ["eager"]
        now[0] += 59_000
        assert await cleaner.clean_all() == []
        now[0] += 2_000  # the records appended after the last pass waited max.compaction.lag.ms
        done = await cleaner.clean_all()
        assert [d.topic for d in done] == ["lagged"]
    finally:
        cleaner.close()
        topics.close()


# ------------------------------------------------------------------ disk: crash safety


def _disk_log(tmp_path: Path) -> tuple[DiskLog, list[tuple[int, bytes | None, bytes | None]]]:
    log = DiskLog.open(tmp_path, CONFIG)
    w = Writer(log)
    for round_ in range(3):
        w.segment().batch((b"a", b"%d" % round_), (b"b", b"%d" % round_))
        w.batch((b"c%d" % round_, b"x"))
    w.segment().batch((b"end", b"1"))
    return log, records(log)


def _files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


@pytest.mark.parametrize(
    "crash_at",
    ["staged", "committed", "replaced-deleted", "moved.index", "moved.timeindex", "moved.log"],
)
def test_crash_during_the_swap_recovers_old_or_new(
    tmp_path: Path, crash_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, old = _disk_log(tmp_path)
    job = plan_compaction(log, now_ms=0, delete_retention_ms=DAY)
    assert job is not None
    job.run()
    assert (tmp_path / STAGING_DIR).is_dir()

    class Crash(Exception):
        pass

    def step(name: str) -> None:
        if name == crash_at:
            raise Crash(name)

    monkeypatch.setattr(compaction_space, "_step", step)
    if crash_at != "staged":  # "staged": the worker finished, the swap never started
        with pytest.raises(Crash):
            job.install()
    # The process dies here: reopen from what is on disk.
    reopened = DiskLog.open(tmp_path, CONFIG)
    got = records(reopened)
    new = [
        (o, k, v)
        for o, k, v in old
        if (k, o) in {(b"a", 6), (b"b", 7)} or (k != b"a" and k != b"b")
    ]
    assert got == (old if crash_at == "staged" else new)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (0, 10)
    names = _files(tmp_path)
    assert STAGING_DIR not in names and SWAP_MARKER not in names
    logs = sorted(n for n in names if n.endswith(".log"))
    expected_logs = 4 if crash_at == "staged" else 2
    assert len(logs) == expected_logs
    for name in logs:  # every segment has both indexes
        stem = name[: -len(".log")]
        assert {stem + ".index", stem + ".timeindex"} <= names
    assert compaction.compact(reopened, now_ms=0, delete_retention_ms=DAY).installed
    assert records(reopened) == new
    reopened.close()


def test_recovery_discards_a_torn_marker_and_stray_files(tmp_path: Path) -> None:
    log, old = _disk_log(tmp_path)
    log.close()
    staging = tmp_path / STAGING_DIR
    staging.mkdir()
    (staging / "00000000000000000000.log").write_bytes(b"partial")
    (tmp_path / (SWAP_MARKER + ".tmp")).write_bytes(b"{")
    reopened = DiskLog.open(tmp_path, CONFIG)
    assert records(reopened) == old
    assert not staging.exists() and not (tmp_path / (SWAP_MARKER + ".tmp")).exists()
    reopened.close()


def test_compacted_segments_reopen_with_gaps_and_without_indexes(tmp_path: Path) -> None:
    log, _ = _disk_log(tmp_path)
    run(log)
    compacted = records(log)
    log.close()
    for index in tmp_path.glob("*.index"):
        os.unlink(index)  # forces the full scan of sealed segments, which must allow gaps
    reopened = DiskLog.open(tmp_path, CONFIG)
    assert records(reopened) == compacted
    assert reopened.log_end_offset == 10
    reopened.close()


# ------------------------------------------------------------------ end to end


def _produce(bootstrap: str, topic: str, messages: Sequence[tuple[bytes, bytes | None]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    for key, value in messages:
        producer.produce(topic, value, key=key)
        producer.flush(10)  # one batch per message: the small segments roll often


def _consume(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compaction-e2e",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is None:
                if out and out[-1][0] == end - 1:
                    break
                continue
            assert msg.error() is None, msg.error()
            offset = msg.offset()
            assert offset is not None
            out.append((offset, msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


@pytest.mark.timeout(60)
async def test_end_to_end_with_confluent_kafka() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from slipstream.broker.broker import Broker

    async with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        topic = NewTopic(
            "compacted", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "300"}
        )
        await asyncio.to_thread(lambda: admin.create_topics([topic])["compacted"].result(10))
        messages: list[tuple[bytes, bytes | None]] = [
            (b"key-%d" % (i % 5), b"value-%d" % i) for i in range(40)
        ]
        messages.append((b"key-3", None))  # a tombstone: kept for delete.retention.ms
        await asyncio.to_thread(_produce, bootstrap, "compacted", messages)
        assert broker.state is not None and broker.cleaner is not None
        plog = broker.state.topics.partition("compacted", 0)
        assert plog is not None
        segments_before, size_before = segment_count(plog), plog.size_bytes

        done = await broker.cleaner.clean_all(force=True)

        assert [(d.topic, d.stats.installed) for d in done] == [("compacted", True)]
        assert plog.size_bytes < size_before
        # Groups are formed by the segments' sizes before cleaning (as Kafka does), so
        # the now small segments merge in the next pass.
        await broker.cleaner.clean_all(force=True)
        assert segment_count(plog) < segments_before
        assert not broker.cleaner.needs_cleaning(plog, broker.state.clock())
        got = await asyncio.to_thread(_consume, bootstrap, "compacted", 41)
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for offset, (key, value) in enumerate(messages):
            latest[key] = (offset, value)
        assert got == sorted((o, k, v) for k, (o, v) in latest.items())
        assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
        assert (plog.log_start_offset, plog.log_end_offset) == (0, 41)
