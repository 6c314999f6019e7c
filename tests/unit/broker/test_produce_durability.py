"""acks=all and the durability barrier: a failed barrier is a retriable storage error,
and an idempotent retry of the same batch is answered only once it is durable."""

from __future__ import annotations

from pathlib import Path

import pytest
from txn_helpers import txn_batch

from slipstream.broker.broker import Broker
from slipstream.log.disk.disk_log import DiskLog
from slipstream.protocol.errors import ErrorCode, KafkaError

PID = 7


async def test_failed_barrier_is_a_storage_error_and_the_retry_waits_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Broker(storage="disk", data_dir=str(tmp_path), durability="fsync", port=0) as b:
        b.state.topics.create("t", 1)
        real_flush = DiskLog.flush
        flushes: list[bool] = []

        def flaky_flush(self: DiskLog) -> None:
            flushes.append(True)
            if len(flushes) == 1:
                raise OSError("disk on fire")
            real_flush(self)

        monkeypatch.setattr(DiskLog, "flush", flaky_flush)
        with pytest.raises(KafkaError) as failed:
            await b.state.append("t", 0, txn_batch(PID, 0, transactional=False), acks=-1, transactional=False)
        assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        # The producer retries the same batch: recognised as a duplicate, answered with
        # the original offsets, but only after a barrier that succeeded.
        info = await b.state.append("t", 0, txn_batch(PID, 0, transactional=False), acks=-1, transactional=False)
        assert (info.base_offset, info.last_offset) == (0, 1)
        assert len(flushes) == 2
        plog = b.state.topics.partition("t", 0)
        assert plog is not None and plog.log_end_offset == 2  # written once
