"""read_committed on the wire: Fetch stops at the LSO and lists aborted transactions,
ListOffsets answers the LSO; read_uncommitted is unchanged. Raw protocol requests
against the embedded broker, memory and disk storage (disk reads hand out chunks of
several batches, which the LSO cut must split), and disk storage whose every read is a
file region (sent with sendfile; the cut reads what it must look into)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from broker_helpers import raw_connection
from txn_helpers import txn_batch

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.broker.handlers import fetch as fetch_handler
from slipstream.broker.txn_markers import TxnMarker, write_txn_markers
from slipstream.log.disk import segment as segment_module
from slipstream.protocol.apis import fetch as f
from slipstream.protocol.apis import list_offsets as lo
from slipstream.protocol.record_batch import split_batches
from slipstream.protocol.records import ProducerRecord, build_batch, decode_batch

A, B = 21, 22
UNCOMMITTED, COMMITTED = 0, 1


def plain(n: int = 2) -> memoryview:
    return memoryview(bytearray(build_batch([ProducerRecord(b"k", b"plain", timestamp_ms=1000) for _ in range(n)])))


@pytest.fixture(params=["memory", "disk", "disk-regions"])
def storage(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    if request.param == "memory":
        return {"storage": "memory"}
    if request.param == "disk-regions":
        monkeypatch.setattr(segment_module, "REGION_MIN_BYTES", 0)
        monkeypatch.setattr(fetch_handler, "REGION_ANSWER_MIN_BYTES", 0)
    return {"storage": "disk", "data_dir": str(tmp_path)}


async def fetch(b: Broker, offset: int, isolation: int, *, version: int = 12, max_wait_ms: int = 0,
                min_bytes: int = 0) -> f.FetchResponsePartition:
    request = f.FetchRequest(
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, isolation_level=isolation, session_epoch=-1,
        topics=[f.FetchRequestTopic(topic="t", partitions=[
            f.FetchRequestPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        ])],
    )
    async with raw_connection(f"127.0.0.1:{b.port}") as conn:
        response = await conn.request(f.SPEC, request, version=version)
    return response.responses[0].partitions[0]


def offsets_of(part: f.FetchResponsePartition) -> list[tuple[int, bool]]:
    """(base offset, is control) of each returned batch."""
    records = part.records
    data = b"".join(bytes(c) for c in records) if isinstance(records, list) else bytes(records or b"")
    return [(h.base_offset, h.is_control) for h in (decode_batch(x)[0] for x in split_batches(memoryview(data)))]


async def list_latest(b: Broker, isolation: int, timestamp: int = -1) -> int:
    request = lo.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        lo.ListOffsetsRequestTopic(name="t", partitions=[lo.ListOffsetsRequestPartition(partition_index=0,
                                                                                       timestamp=timestamp)])
    ])
    async with raw_connection(f"127.0.0.1:{b.port}") as conn:
        response = await conn.request(lo.SPEC, request, version=7)
    return int(response.topics[0].partitions[0].offset)


async def end(b: Broker, pid: int, commit: bool) -> None:
    assert await write_txn_markers(b.state, TxnMarker(pid, 0, commit, 0, (("t", 0),))) == {("t", 0): 0}


async def test_read_committed_stops_at_the_lso_and_lists_aborts(storage: dict[str, Any]) -> None:
    async with Broker(port=0, **storage) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(A, 0), acks=1, transactional=True)  # 0-1
        await append(b.state, "t", 0, plain(), acks=1)  # 2-3
        await append(b.state, "t", 0, txn_batch(B, 0), acks=1, transactional=True)  # 4-5
        await end(b, A, commit=False)  # 6
        await append(b.state, "t", 0, plain(1), acks=1)  # 7

        committed = await fetch(b, 0, COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (8, 4)
        assert offsets_of(committed) == [(0, False), (2, False)]
        assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions or []] == [(A, 0)]

        uncommitted = await fetch(b, 0, UNCOMMITTED)
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (8, 4)
        assert offsets_of(uncommitted) == [(0, False), (2, False), (4, False), (6, True), (7, False)]
        assert uncommitted.aborted_transactions is None

        at_lso = await fetch(b, 4, COMMITTED)
        assert offsets_of(at_lso) == [] and at_lso.aborted_transactions == []
        assert await list_latest(b, COMMITTED) == 4
        assert await list_latest(b, UNCOMMITTED) == 8
        assert await list_latest(b, COMMITTED, timestamp=0) == 0  # a lookup below the LSO

        await end(b, B, commit=True)  # 8
        after = await fetch(b, 0, COMMITTED)
        assert after.last_stable_offset == after.high_watermark == 9
        assert offsets_of(after) == [(0, False), (2, False), (4, False), (6, True), (7, False), (8, True)]
        assert [(t.producer_id, t.first_offset) for t in after.aborted_transactions or []] == [(A, 0)]
        past_abort = await fetch(b, 7, COMMITTED)
        assert offsets_of(past_abort) == [(7, False), (8, True)] and past_abort.aborted_transactions == []
        assert await list_latest(b, COMMITTED) == 9


async def test_timestamp_lookup_past_the_lso_finds_nothing() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(A, 0), acks=1, transactional=True)
        assert await list_latest(b, COMMITTED, timestamp=0) == -1
        assert await list_latest(b, UNCOMMITTED, timestamp=0) == 0
        assert await list_latest(b, COMMITTED, timestamp=-2) == 0  # earliest is not bounded


async def test_waiting_read_committed_fetch_wakes_on_the_marker() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(A, 0), acks=1, transactional=True)
        waiting = asyncio.create_task(fetch(b, 0, COMMITTED, max_wait_ms=10_000, min_bytes=1))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # the open transaction holds the data back
        await end(b, A, commit=True)
        part = await asyncio.wait_for(waiting, 5)
        assert offsets_of(part) == [(0, False), (2, True)]


@pytest.mark.parametrize("version", [4, 7, 12, 16])
async def test_versions_and_sessions(version: int) -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, plain(), acks=1)
        await append(b.state, "t", 0, txn_batch(A, 0), acks=1, transactional=True)
        topic = b.state.topics.get("t")
        assert topic is not None

        def request(epoch: int, session: int, offset: int) -> f.FetchRequest:
            return f.FetchRequest(
                max_wait_ms=0, min_bytes=0, isolation_level=COMMITTED, session_id=session,
                session_epoch=epoch if version >= 7 else -1,
                topics=[f.FetchRequestTopic(topic="t", topic_id=topic.topic_id, partitions=[
                    f.FetchRequestPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                ])],
            )

        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            first = await conn.request(f.SPEC, request(0, 0, 0), version=version)
            part = first.responses[0].partitions[0]
            assert offsets_of(part) == [(0, False)] and part.last_stable_offset == 2
            await end(b, A, commit=False)
            second = await conn.request(f.SPEC, request(1, first.session_id, 2), version=version)
            part = second.responses[0].partitions[0]
            assert offsets_of(part) == [(2, False), (4, True)]
            assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions or []] == [(A, 2)]


async def test_lso_never_falls_below_the_log_start() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(A, 0), acks=1, transactional=True)  # 0-1, open
        await append(b.state, "t", 0, plain(), acks=1)  # 2-3
        plog = b.state.topics.partition("t", 0)
        assert plog is not None
        assert b.state.last_stable_offset("t", 0, plog) == 0
        plog.delete_records_before(3)
        assert b.state.last_stable_offset("t", 0, plog) == 3
        part = await fetch(b, 3, COMMITTED)
        assert part.last_stable_offset == 3 and offsets_of(part) == []
        assert await list_latest(b, COMMITTED) == 3
