"""Incremental fetch sessions (KIP-227): the cache on its own, and Fetch requests in sessions.

The protocol tests speak Fetch through slipstream's own connection layer at exact
versions (v12 names topics, v13+ uses topic ids) against the async embedded broker.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from broker_helpers import raw_connection

from slipstream.broker.appends import append as append_records
from slipstream.broker.broker import Broker
from slipstream.broker.fetch_sessions import FetchSessionCache
from slipstream.protocol.apis.fetch import SPEC as FETCH
from slipstream.protocol.apis.fetch import (
    FetchRequest,
    FetchRequestForgottenTopic,
    FetchRequestPartition,
    FetchRequestTopic,
    FetchResponse,
)
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.records import ProducerRecord, build_batch

# ---------------------------------------------------------------------------- the cache


def test_cache_evicts_only_idle_sessions_when_full() -> None:
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000)
    a = cache.create(0, uses_topic_ids=False)
    b = cache.create(10, uses_topic_ids=False)
    assert a is not None and b is not None and a.id != b.id and 0 not in (a.id, b.id)
    assert cache.create(500, uses_topic_ids=False) is None  # both used within eviction_ms
    assert cache.get(a.id, 900) is a  # using a makes b the least recently used
    c = cache.create(1500, uses_topic_ids=False)
    assert c is not None and len(cache) == 2
    assert cache.get(b.id, 1500) is None and cache.get(a.id, 1500) is a


def test_cache_with_no_slots_serves_sessionless() -> None:
    assert FetchSessionCache(max_sessions=0).create(0, uses_topic_ids=True) is None


def test_session_reports_only_changes_and_rotates_partitions_with_data() -> None:
    session = FetchSessionCache().create(0, uses_topic_ids=False)
    assert session is not None
    session.upsert(("t", 0), 0, 100)
    session.upsert(("t", 1), 0, 100)
    first = dict(has_records=False, error=0, high_watermark=5, log_start_offset=0)
    assert session.must_report(("t", 0), **first)  # never reported before
    assert not session.must_report(("t", 0), **first)
    assert session.must_report(("t", 0), **{**first, "high_watermark": 6})
    assert session.must_report(("t", 0), **{**first, "high_watermark": 6, "error": 1})
    assert session.must_report(("t", 0), has_records=True, error=0, high_watermark=6,
                               log_start_offset=0)
    assert list(session.partitions) == [("t", 1), ("t", 0)]  # t-0 returned data: to the back
    session.next_epoch = 0x7FFFFFFF
    session.advance_epoch()
    assert session.next_epoch == 1


# ---------------------------------------------------------------------------- Fetch in sessions


def fetch(
    topics: list[tuple[str | uuid.UUID, list[tuple[int, int]]]],
    *,
    session_id: int,
    epoch: int,
    forgotten: list[tuple[str | uuid.UUID, list[int]]] = (),  # type: ignore[assignment]
    max_wait_ms: int = 0,
) -> FetchRequest:
    def topic_fields(key: str | uuid.UUID) -> dict[str, Any]:
        return {"topic_id": key} if isinstance(key, uuid.UUID) else {"topic": key}

    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchRequestTopic(
                **topic_fields(key),
                partitions=[
                    FetchRequestPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                    for p, o in parts
                ],
            )
            for key, parts in topics
        ],
        forgotten_topics_data=[
            FetchRequestForgottenTopic(**topic_fields(key), partitions=ps) for key, ps in forgotten
        ],
    )


def seen(response: FetchResponse, version: int) -> dict[tuple[Any, int], tuple[int, int, bool]]:
    """(topic, partition) -> (error, high watermark, has records)."""
    return {
        (t.topic_id if version >= 13 else t.topic, p.partition_index): (
            p.error_code,
            p.high_watermark,
            bool(p.records),
        )
        for t in response.responses
        for p in t.partitions
    }


async def append(b: Broker, topic: str, partition: int, n: int) -> None:
    batch = build_batch([ProducerRecord(None, b"x%d" % i) for i in range(n)])
    await append_records(b.state, topic, partition, memoryview(bytearray(batch)), acks=1)


@pytest.mark.parametrize("version", [12, 13, 16])
async def test_incremental_fetch_answers_only_what_changed(version: int) -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 3, {})
        key: str | uuid.UUID = b.state.topics.topics["t"].topic_id if version >= 13 else "t"
        await append(b, "t", 0, 2)
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:

            async def send(req: FetchRequest) -> FetchResponse:
                return await conn.request(FETCH, req, version=version)

            full = await send(fetch([(key, [(0, 0), (1, 0), (2, 0)])], session_id=0, epoch=0))
            assert full.error_code == 0 and full.session_id != 0
            sid = full.session_id
            assert seen(full, version) == {
                (key, 0): (0, 2, True), (key, 1): (0, 0, False), (key, 2): (0, 0, False)
            }
            # the client moved t-0 to offset 2; nothing new anywhere: an empty answer
            quiet = await send(fetch([(key, [(0, 2)])], session_id=sid, epoch=1, max_wait_ms=50))
            assert quiet.error_code == 0 and quiet.session_id == sid and seen(quiet, version) == {}
            # new data on t-1 only: only t-1 comes back (the request lists no partitions)
            await append(b, "t", 1, 3)
            news = await send(fetch([], session_id=sid, epoch=2))
            assert seen(news, version) == {(key, 1): (0, 3, True)}
            # forget t-2, then write to it: it is not reported
            await append(b, "t", 2, 1)
            forgot = await send(
                fetch([(key, [(1, 3)])], session_id=sid, epoch=3, forgotten=[(key, [2])],
                      max_wait_ms=50)
            )
            assert seen(forgot, version) == {}
            # wrong epochs and unknown sessions are refused without touching the session
            stale = await send(fetch([], session_id=sid, epoch=3))
            assert stale.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH and stale.session_id == 0
            unknown = await send(fetch([], session_id=sid + 1, epoch=1))
            assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            again = await send(fetch([], session_id=sid, epoch=4))
            assert again.error_code == 0 and seen(again, version) == {}
            # epoch -1 closes the session and is answered as a sessionless full fetch
            closing = await send(fetch([(key, [(2, 0)])], session_id=sid, epoch=-1))
            assert closing.session_id == 0 and seen(closing, version) == {(key, 2): (0, 1, True)}
            gone = await send(fetch([], session_id=sid, epoch=5))
            assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_session_reports_errors_and_topic_id_mixups() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            opened: FetchResponse = await conn.request(
                FETCH, fetch([("t", [(0, 0)])], session_id=0, epoch=0), version=12
            )
            sid = opened.session_id
            assert sid != 0
            # a session opened with names cannot continue with topic ids
            mixed: FetchResponse = await conn.request(
                FETCH, fetch([], session_id=sid, epoch=1), version=13
            )
            assert mixed.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
            # an out-of-range position is an error, reported although nothing else changed
            bad: FetchResponse = await conn.request(
                FETCH, fetch([("t", [(0, 99)])], session_id=sid, epoch=1), version=12
            )
            assert seen(bad, 12) == {("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, 0, False)}


async def test_sessionless_fetch_is_unchanged_and_full_cache_answers_without_a_session() -> None:
    async with Broker(
        storage="memory", port=0, max_incremental_fetch_session_cache_slots=1
    ) as b:
        b.state.topics.create("t", 1, {})
        await append(b, "t", 0, 1)
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            plain: FetchResponse = await conn.request(
                FETCH, fetch([("t", [(0, 0)])], session_id=0, epoch=-1), version=12
            )
            assert plain.session_id == 0 and seen(plain, 12) == {("t", 0): (0, 1, True)}
            first: FetchResponse = await conn.request(
                FETCH, fetch([("t", [(0, 0)])], session_id=0, epoch=0), version=12
            )
            assert first.session_id != 0
            # the one slot is taken by a session used just now: served in full, no session
            second: FetchResponse = await conn.request(
                FETCH, fetch([("t", [(0, 0)])], session_id=0, epoch=0), version=12
            )
            assert second.session_id == 0 and seen(second, 12) == {("t", 0): (0, 1, True)}


def test_kafka_python_consumes_through_an_incremental_session() -> None:
    from kafka import KafkaConsumer, KafkaProducer

    with Broker(storage="memory", port=0) as b:
        b.state.topics.create("s", 3, {})
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        for i in range(30):
            producer.send("s", b"v%d" % i, partition=i % 3)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            "s", bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest",
            group_id=None, consumer_timeout_ms=2000, fetch_max_wait_ms=50,
        )
        try:
            values = sorted(int(m.value[1:]) for m in consumer)
        finally:
            consumer.close()
        assert values == list(range(30))
        sessions = b.state.fetch_sessions.sessions()
        assert len(sessions) == 1 and sessions[0].next_epoch > 2  # incremental fetches ran
        assert sorted(p for _, p in sessions[0].partitions) == [0, 1, 2]
