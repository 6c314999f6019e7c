"""A retried batch is still recognised after compaction emptied it and the broker restarted.

The broker rebuilds idempotent-producer state from the batch headers in the log; the
cleaner keeps each producer's last batch (empty when all its records were superseded),
so the retry gets its original offsets instead of being written a second time.
"""

from __future__ import annotations

from pathlib import Path

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.log.compaction import compact
from slipstream.protocol.records import ProducerRecord, build_batch

PID = 11


def batch(keys: list[bytes], *, pid: int = -1, seq: int = -1) -> memoryview:
    raw = build_batch(
        [ProducerRecord(k, b"v") for k in keys], producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq
    )
    return memoryview(bytearray(raw))


async def test_retry_of_a_compacted_away_batch_is_a_duplicate_after_restart(tmp_path: Path) -> None:
    async with Broker(storage="disk", data_dir=str(tmp_path), port=0) as b:
        # segment.bytes=1: every batch rolls a new segment, so all but the last are closed
        b.state.topics.create("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1"})
        first = await append(b.state, "c", 0, batch([b"k0", b"k1"], pid=PID, seq=0), acks=1)
        await append(b.state, "c", 0, batch([b"k0", b"k1"]), acks=1)  # supersedes both
        await append(b.state, "c", 0, batch([b"tail"]), acks=1)
        plog = b.state.topics.partition("c", 0)
        assert plog is not None
        stats = compact(plog, now_ms=b.state.clock(), delete_retention_ms=0)
        assert stats.records_removed == 2
        assert plog.log_end_offset == 5
    async with Broker(storage="disk", data_dir=str(tmp_path), port=0) as b:
        retry = await append(b.state, "c", 0, batch([b"k0", b"k1"], pid=PID, seq=0), acks=1)
        assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
        plog = b.state.topics.partition("c", 0)
        assert plog is not None and plog.log_end_offset == 5  # not written again
        nxt = await append(b.state, "c", 0, batch([b"k2"], pid=PID, seq=2), acks=1)
        assert nxt.base_offset == 5
