"""Which Fetch answers leave their batches in the segment files: on a connection that
sends file regions, an answer of at least REGION_ANSWER_MIN_BYTES; a smaller one is read
into memory, and so is every answer on a connection that cannot send regions. The
bytes on the wire are the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_connections import request_frame

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.broker.dispatch import Buffers, Dispatcher
from slipstream.broker.handlers import fetch as fetch_handler
from slipstream.log.disk import segment as segment_module
from slipstream.protocol.apis import fetch
from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.records import ProducerRecord, build_batch

BATCH = build_batch([ProducerRecord(None, b"v" * 40_000, timestamp_ms=0)])


def fetch_frame() -> bytearray:
    request = fetch.FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 30, isolation_level=0, session_epoch=-1,
        topics=[fetch.FetchRequestTopic(topic="t", partitions=[
            fetch.FetchRequestPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in (0, 1)
        ])],
    )
    return bytearray(request_frame(fetch.SPEC, 12, 7, request)[4:])


def wire(parts: Buffers) -> bytes:
    return b"".join(p.read() if isinstance(p, FileRegion) else bytes(p) for p in parts)


@pytest.mark.parametrize("answer_min_bytes", [0, 2 * 4 * len(BATCH), 2 * 4 * len(BATCH) + 1])
async def test_regions_only_for_a_large_enough_answer_on_a_connection_that_sends_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer_min_bytes: int
) -> None:
    monkeypatch.setattr(segment_module, "REGION_MIN_BYTES", 0)
    monkeypatch.setattr(fetch_handler, "REGION_ANSWER_MIN_BYTES", answer_min_bytes)
    async with Broker(port=0, storage="disk", data_dir=str(tmp_path)) as b:
        assert b.state is not None and b.groups is not None and b.transactions is not None
        b.state.topics.create("t", 2, {})
        for partition in (0, 1):
            for _ in range(4):
                await append(b.state, "t", partition, memoryview(bytearray(BATCH)), acks=1)
        dispatcher = Dispatcher(b.state, b.groups, b.transactions)
        with_regions = await dispatcher.dispatch(fetch_frame(), "127.0.0.1:1", file_regions=True)
        without = await dispatcher.dispatch(fetch_frame(), "127.0.0.1:1")
        assert with_regions is not None and without is not None
        regions = [p for p in with_regions if isinstance(p, FileRegion)]
        large_enough = 2 * 4 * len(BATCH) >= answer_min_bytes
        assert len(regions) == (2 if large_enough else 0)  # one per partition (one segment each)
        assert not any(isinstance(p, FileRegion) for p in without)
        assert wire(with_regions) == wire(without)
        assert len(wire(without)) > 2 * 4 * len(BATCH)
