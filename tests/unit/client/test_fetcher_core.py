"""The fetcher's buffer logic without a broker: responses are handed in, records drained.

Covers what a single in-process broker cannot easily produce: control batches,
aborted transactions under read_committed, corrupt batches, leadership errors,
partial batches, and the backpressure rule with a manual clock.
"""

from __future__ import annotations

from typing import Any

import pytest

from slipstream.client.cluster import Cluster
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.fetcher import (
    Fetcher,
    FetchError,
    PartitionState,
    complete_batches,
    is_fetchable,
)
from slipstream.protocol.apis.fetch import (
    FetchResponse,
    FetchResponseAbortedTransaction,
    FetchResponsePartition,
    FetchResponseTopic,
)
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    ProducerRecord,
    build_batch,
    build_control_batch,
)

T0 = ("t", 0)
T1 = ("t", 1)


def batch(base: int, n: int, *, pid: int = -1, txn: bool = False) -> bytes:
    return build_batch(
        [ProducerRecord(None, f"v{base + i}".encode(), timestamp_ms=1) for i in range(n)],
        base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, is_transactional=txn,
    )


def marker(offset: int, kind: int, pid: int) -> bytes:
    return build_control_batch(kind, producer_id=pid, producer_epoch=0, timestamp_ms=1, base_offset=offset)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def fetcher(*tps: tuple[str, int], clock: Clock | None = None, **settings: Any) -> Fetcher:
    f = Fetcher(Cluster("127.0.0.1:1"), ConsumerConfig(**settings), clock=clock or Clock())
    for tp in tps or (T0,):
        st = PartitionState(tp)
        st.position = st.fetch_offset = 0
        st.leader = 0
        f.core.parts[tp] = st
    return f


def feed(f: Fetcher, tp: tuple[str, int], data: bytes, *, code: int = 0, aborted: list[tuple[int, int]] | None = None,
         hw: int = 100) -> bool:
    response = FetchResponsePartition(
        partition_index=tp[1], error_code=code, high_watermark=hw, last_stable_offset=hw, log_start_offset=0,
        aborted_transactions=[FetchResponseAbortedTransaction(producer_id=p, first_offset=o) for p, o in aborted or []],
        records=memoryview(data),
    )
    st = f.core.parts[tp]
    sent = {tp: (st.epoch, st.fetch_offset if st.fetch_offset is not None else -1)}
    return f.handle_response(0, FetchResponse(responses=[FetchResponseTopic(topic=tp[0], partitions=[response])]), sent, 12)


def offsets(f: Fetcher, tp: tuple[str, int] = T0) -> list[int]:
    return [r.offset for r in f.drain(1000).get(tp, [])]


def test_control_batches_are_skipped_and_the_position_moves_past_them() -> None:
    f = fetcher()
    assert feed(f, T0, batch(0, 3) + marker(3, CONTROL_COMMIT, 5) + batch(4, 1))
    assert f.core.parts[T0].fetch_offset == 5
    assert offsets(f) == [0, 1, 2, 4]
    assert f.position(T0) == 5


def test_a_trailing_control_batch_still_advances_the_position() -> None:
    f = fetcher()
    feed(f, T0, batch(0, 2) + marker(2, CONTROL_COMMIT, 5))
    assert offsets(f) == [0, 1]
    assert f.drain(10) == {}
    assert f.position(T0) == 3 and f.buffered_bytes() == 0


@pytest.mark.parametrize(("isolation", "expected"), [
    ("read_committed", [3, 4, 6]),
    ("read_uncommitted", [0, 1, 3, 4, 6]),
])
def test_aborted_transactions_are_dropped_under_read_committed(isolation: str, expected: list[int]) -> None:
    f = fetcher(isolation_level=isolation)
    data = (
        batch(0, 2, pid=7, txn=True)          # aborted below
        + marker(2, CONTROL_ABORT, 7)
        + batch(3, 2, pid=8, txn=True)        # committed
        + marker(5, CONTROL_COMMIT, 8)
        + batch(6, 1)                          # not transactional
    )
    feed(f, T0, data, aborted=[(7, 0)])
    assert offsets(f) == expected
    assert f.position(T0) == 7


def test_records_before_the_position_are_skipped() -> None:
    f = fetcher()
    f.seek(T0, 3)
    feed(f, T0, batch(0, 5))
    assert offsets(f) == [3, 4]


def test_a_response_with_only_a_partial_batch_is_ignored() -> None:
    f = fetcher()
    assert not feed(f, T0, batch(0, 5)[:-4])
    assert f.buffered_bytes() == 0 and f.core.parts[T0].fetch_offset == 0


def test_corrupt_batch_raises_once_then_waits_for_a_seek() -> None:
    f = fetcher()
    data = bytearray(batch(0, 3))
    data[-2] ^= 0xFF  # damage a record: the CRC no longer matches
    feed(f, T0, bytes(data))
    with pytest.raises(FetchError, match="cannot be read") as err:
        f.drain(10)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE and err.value.partition == T0
    assert f.drain(10) == {}
    st = f.core.parts[T0]
    assert not is_fetchable(st, 100.0, 1 << 20, 1.0)
    f.seek(T0, 3)
    assert is_fetchable(st, 100.0, 1 << 20, 1.0)


@pytest.mark.parametrize("code", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  ErrorCode.LEADER_NOT_AVAILABLE, 74])
def test_leadership_errors_send_the_partition_back_to_the_metadata(code: int) -> None:
    f = fetcher()
    feed(f, T0, b"", code=code)
    assert f.core.parts[T0].leader is None
    assert f._metadata_needed.is_set()


def test_stale_answer_after_a_seek_is_dropped() -> None:
    f = fetcher()
    st = f.core.parts[T0]
    sent = {T0: (st.epoch, st.fetch_offset or 0)}
    f.seek(T0, 10)
    response = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[FetchResponsePartition(
        partition_index=0, error_code=0, high_watermark=5, records=memoryview(batch(0, 5)),
    )])])
    f.handle_response(0, response, sent, 12)
    assert f.buffered_bytes() == 0 and f.position(T0) == 10


def test_drain_takes_turns_between_partitions_and_honours_max_records() -> None:
    f = fetcher(T0, T1)
    feed(f, T0, batch(0, 10))
    feed(f, T1, batch(0, 10))
    first = f.drain(4)
    second = f.drain(4)
    assert sum(len(v) for v in first.values()) == 4 and sum(len(v) for v in second.values()) == 4
    assert list(first) != list(second)  # a different partition goes first each time
    rest = f.drain(100)
    assert sum(len(v) for v in rest.values()) == 12
    assert f.positions() == {T0: 10, T1: 10}


def test_paused_partition_keeps_its_buffer_and_is_not_fetched() -> None:
    clock = Clock()
    f = fetcher(clock=clock)
    feed(f, T0, batch(0, 3))
    f.pause([T0])
    assert f.drain(10) == {}
    assert not is_fetchable(f.core.parts[T0], clock.now, 1 << 20, 1.0)
    f.resume([T0])
    assert offsets(f) == [0, 1, 2]


def test_backpressure_follows_the_buffer_limit_and_the_processing_time() -> None:
    clock = Clock()
    f = fetcher(clock=clock, partition_buffer_bytes=1, max_processing_time_ms=100)
    st = f.core.parts[T0]
    assert is_fetchable(st, clock.now, f.core.buffer_limit, f.core.max_processing_s)
    feed(f, T0, batch(0, 3))
    assert not is_fetchable(st, clock.now, f.core.buffer_limit, f.core.max_processing_s)  # buffer full
    assert offsets(f) == [0, 1, 2]
    assert is_fetchable(st, clock.now, f.core.buffer_limit, f.core.max_processing_s)

    f = fetcher(clock=clock, partition_buffer_bytes=1 << 20, max_processing_time_ms=100)
    st = f.core.parts[T0]
    feed(f, T0, batch(0, 3))
    assert is_fetchable(st, clock.now, f.core.buffer_limit, f.core.max_processing_s)
    clock.now += 0.2
    assert not is_fetchable(st, clock.now, f.core.buffer_limit, f.core.max_processing_s)  # consumer too slow
    assert [r.offset for r in f.drain(1)[T0]] == [0]  # draining resets the timer
    assert is_fetchable(st, clock.now, f.core.buffer_limit, f.core.max_processing_s)


def test_fetchable_rule() -> None:
    st = PartitionState(T0)
    assert not is_fetchable(st, 0.0, 1000, 0.1)  # no position yet
    st.position = st.fetch_offset = 0
    assert not is_fetchable(st, 0.0, 1000, 0.1)  # no leader yet
    st.leader = 1
    assert is_fetchable(st, 0.0, 1000, 0.1)
    st.in_flight = True
    assert not is_fetchable(st, 0.0, 1000, 0.1)


def test_complete_batches_ignores_a_partial_tail() -> None:
    b1 = batch(5, 1)
    b2 = batch(6, 2)
    assert complete_batches(memoryview(b1 + b2[:-3])) == (len(b1), 6)
    assert complete_batches(memoryview(b1 + b2)) == (len(b1) + len(b2), 8)
    assert complete_batches(memoryview(b"")) == (0, None)
