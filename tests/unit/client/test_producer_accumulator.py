"""The record accumulator and batch encoder on their own: no broker, a manual clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.client.accumulator import (
    APPENDED,
    BATCH_FULL,
    NEW_BATCH,
    NO_MEMORY,
    ProducerBatch,
    RecordAccumulator,
)
from slipstream.client.batch_encoding import encode_batch
from slipstream.client.retry import Backoff
from slipstream.protocol import compression
from slipstream.protocol.record_batch import set_producer_state, validate_batch
from slipstream.protocol.records import ProducerRecord, build_batch, decode_batch

LEADER = 1


def leader_of(topic: str, partition: int) -> int:
    return LEADER


def acc(**kw: object) -> RecordAccumulator:
    settings_: dict[str, object] = dict(batch_size=1000, linger_ms=10, buffer_memory=100_000)
    settings_.update(kw)
    a = RecordAccumulator(**settings_)  # type: ignore[arg-type]
    a.reset_producer(7, 0)
    return a


def rec(value: bytes = b"x" * 100, ts: int = 1000) -> tuple[None, bytes, tuple[()], int]:
    return (None, value, (), ts)


# --------------------------------------------------------------------------- encoding

records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=20000)),
        st.lists(
            st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=10))),
            max_size=3,
        ),
        st.integers(min_value=0, max_value=2**41),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(records_strategy)
def test_encode_batch_matches_build_batch(records: list) -> None:
    ours = encode_batch(records, producer_id=5, producer_epoch=2, base_sequence=40)
    reference = build_batch(
        [ProducerRecord(k, v, headers=h, timestamp_ms=ts) for k, v, h, ts in records],
        producer_id=5,
        producer_epoch=2,
        base_sequence=40,
    )
    assert bytes(ours) == reference


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_decode(codec: str) -> None:
    records = [
        (b"k%d" % i, b"value %d " % i * 30, [("h", b"%d" % i)], 1_700_000_000_000 + i)
        for i in range(200)
    ]
    batch = encode_batch(records, compression=compression.codec_by_name(codec))
    header, decoded = decode_batch(batch)
    assert header.compression == compression.codec_by_name(codec)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (k, v, h, ts) for k, v, h, ts in records
    ]


def test_restamp_keeps_the_crc_valid() -> None:
    batch = encode_batch([rec(), rec()], producer_id=1, producer_epoch=0, base_sequence=10)
    set_producer_state(batch, 99, 3, 0)
    header = validate_batch(memoryview(batch))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 3, 0)


# --------------------------------------------------------------------------- append / ready


def test_linger_then_ready() -> None:
    a = acc()
    assert a.append("t", 0, rec(), 112, None, now_ms=0) == NEW_BATCH
    assert a.append("t", 0, rec(), 112, None, now_ms=1) == APPENDED
    nodes, next_ms, unknown = a.ready(5, leader_of)
    assert nodes == set() and next_ms == 10 and not unknown
    nodes, _, _ = a.ready(10, leader_of)
    assert nodes == {LEADER}


def test_full_batch_is_ready_at_once_and_a_new_one_opens() -> None:
    a = acc()
    results = [a.append("t", 0, rec(), 112, None, now_ms=0) for _ in range(9)]
    assert results[0] == NEW_BATCH
    assert BATCH_FULL in results
    assert a.ready(0, leader_of)[0] == {LEADER}
    ps = a.partition_state("t", 0)
    assert ps is not None and len(ps.batches) == 2
    assert all(b.size <= 1000 for b in ps.batches)


def test_unknown_leader_is_reported() -> None:
    a = acc()
    a.append("t", 0, rec(), 112, None, now_ms=0)
    assert a.ready(100, lambda t, p: -1) == (set(), float("inf"), True)


def test_memory_bound() -> None:
    a = acc(buffer_memory=300)
    assert a.append("t", 0, rec(), 112, None, 0) == NEW_BATCH
    assert a.append("t", 0, rec(), 112, None, 0) == APPENDED
    assert a.append("t", 0, rec(), 112, None, 0) == NO_MEMORY
    [batch] = a.drain(LEADER, 100, 10_000, leader_of)
    a.complete(batch, acked=True)
    assert a.buffer_used == 0
    assert a.append("t", 0, rec(), 112, None, 0) == NEW_BATCH


# --------------------------------------------------------------------------- drain


def drain_all(a: RecordAccumulator, now: float = 100) -> list[ProducerBatch]:
    return a.drain(LEADER, now, 1 << 20, leader_of)


def test_drain_assigns_sequences_one_batch_per_partition() -> None:
    a = acc(batch_size=300)
    for _ in range(6):
        a.append("t", 0, rec(), 112, None, 0)
        a.append("t", 1, rec(), 112, None, 0)
    first = drain_all(a)
    assert [(b.partition, b.base_sequence, len(b.records)) for b in first] == [
        (0, 0, 2),
        (1, 0, 2),
    ] or [(b.partition, b.base_sequence, len(b.records)) for b in first] == [(1, 0, 2), (0, 0, 2)]
    assert all(b.producer_id == 7 and b.payload is not None for b in first)
    # the first batch of a partition must be acknowledged before others are pipelined
    assert drain_all(a) == []
    for b in first:
        a.complete(b, acked=True)
    second = drain_all(a)
    third = drain_all(a)
    assert sorted((b.partition, b.base_sequence) for b in second + third) == [
        (0, 2),
        (0, 4),
        (1, 2),
        (1, 4),
    ]


def test_in_flight_per_partition_is_bounded() -> None:
    a = acc(batch_size=200, max_in_flight_per_partition=2)
    for _ in range(6):
        a.append("t", 0, rec(), 112, None, 0)
    [b0] = drain_all(a)
    a.complete(b0, acked=True)
    assert len(drain_all(a)) == 1
    assert len(drain_all(a)) == 1
    assert drain_all(a) == []  # two in flight


def test_retry_waits_for_in_flight_and_keeps_order() -> None:
    a = acc(batch_size=200)
    for _ in range(4):
        a.append("t", 0, rec(), 112, None, 0)
    [b0] = drain_all(a)
    a.complete(b0, acked=True)
    (b1,) = drain_all(a)
    (b2,) = drain_all(a)
    assert (b1.base_sequence, b2.base_sequence) == (1, 2)
    payload = bytes(b1.payload or b"")
    # b1 failed retriably; b2 is still in flight: b1 must wait for it
    a.reenqueue(b1, now_ms=100, backoff_ms=0, fate_unknown=True)
    assert drain_all(a, 200) == []
    # b2 failed too (out of order behind b1): it goes back after b1
    a.reenqueue(b2, now_ms=100, backoff_ms=0, fate_unknown=False)
    ps = a.partition_state("t", 0)
    assert ps is not None and [b.base_sequence for b in ps.batches][:2] == [1, 2]
    # retries go one at a time, same bytes, same sequence
    [again] = drain_all(a, 200)
    assert again is b1 and bytes(again.payload or b"") == payload
    assert drain_all(a, 200) == []
    a.complete(again, acked=True)
    [next_] = drain_all(a, 200)
    assert next_ is b2


def test_unknown_fate_sticks_until_the_broker_proves_otherwise() -> None:
    a = acc()
    a.append("t", 0, rec(), 112, None, 0)
    [b] = drain_all(a)
    a.reenqueue(b, now_ms=0, backoff_ms=0, fate_unknown=True)  # no answer
    [b] = drain_all(a)
    a.reenqueue(b, now_ms=0, backoff_ms=0, fate_unknown=None)  # NOT_LEADER: proves nothing
    assert b.fate_unknown
    [b] = drain_all(a)
    a.reenqueue(b, now_ms=0, backoff_ms=0, fate_unknown=False)  # OUT_OF_ORDER: not written
    assert not b.fate_unknown


def test_retry_backoff() -> None:
    a = acc()
    a.append("t", 0, rec(), 112, None, 0)
    [b] = drain_all(a)
    a.reenqueue(b, now_ms=100, backoff_ms=50, fate_unknown=False)
    assert drain_all(a, 120) == []
    assert a.ready(120, leader_of)[1] == 150
    assert drain_all(a, 150) == [b]


def test_failed_sequenced_batch_forces_a_new_producer_epoch() -> None:
    a = acc(batch_size=200)
    for _ in range(3):
        a.append("t", 0, rec(), 112, None, 0)
    [b0] = drain_all(a)
    a.complete(b0, acked=True)
    [b1] = drain_all(a)
    [b2] = drain_all(a)
    a.complete(b1, acked=False)  # e.g. MESSAGE_TOO_LARGE: a hole at sequence 1
    assert a.bump_pending
    a.reenqueue(b2, now_ms=100, backoff_ms=0, fate_unknown=True)  # connection lost
    a.append("t", 0, rec(), 112, None, 0)
    # only the batch whose fate is unknown may go out (under the old epoch)
    assert not a.bump_ready()
    [again] = drain_all(a, 200)
    assert again is b2 and again.producer_id == 7
    a.reenqueue(again, now_ms=200, backoff_ms=0, fate_unknown=False)  # OUT_OF_ORDER: not written
    assert drain_all(a, 300) == []  # fresh batches wait for the new epoch
    assert a.bump_ready()
    assert a.reset_producer(8, 0) == 1
    assert not a.bump_pending
    [renumbered] = drain_all(a, 300)
    assert renumbered is b2 and renumbered.base_sequence == 0
    header = validate_batch(memoryview(renumbered.payload or b""))
    assert (header.producer_id, header.base_sequence) == (8, 0)
    a.complete(renumbered, acked=True)
    [fresh] = drain_all(a, 300)
    assert (fresh.producer_id, fresh.base_sequence) == (8, 1)


def test_split_keeps_sequence_range_and_order() -> None:
    a = acc(batch_size=10_000)
    for i in range(5):
        a.append("t", 0, rec(b"%d" % i), 20, i, 0)
    [b] = drain_all(a)
    a.append("t", 0, rec(b"later"), 20, "later", 0)
    first, second = a.split(b, 100)
    assert [r[1] for r in first.records] == [b"0", b"1"] and first.waiters == [0, 1]
    assert (first.base_sequence, second.base_sequence) == (0, 2)
    ps = a.partition_state("t", 0)
    assert ps is not None and list(ps.batches)[:2] == [first, second]
    [x] = drain_all(a, 100)
    assert x is first
    # split the first half again: its halves sort before the second half
    a1, a2 = a.split(x, 100)
    assert list(ps.batches)[:3] == [a1, a2, second]
    assert a.buffer_used == 6 * 20


def test_expire_and_abort_release_memory() -> None:
    a = acc()
    a.append("t", 0, rec(), 112, None, 0)
    a.append("u", 0, rec(), 112, None, 50)
    expired = a.expire(100, delivery_timeout_ms=100)
    assert [b.topic for b in expired] == ["t"]
    assert not a.bump_pending  # never sent: no sequence, no hole
    assert [b.topic for b in a.abort_all()] == ["u"]
    assert a.buffer_used == 0 and not a.incomplete


# --------------------------------------------------------------------------- backoff


def test_backoff_grows_and_caps() -> None:
    b = Backoff(100, 1000, jitter=0)
    assert [b.delay_ms(n) for n in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert b.delay_ms(10_000) == 1000


def test_backoff_jitter_bounds() -> None:
    low = Backoff(100, 1000, jitter=0.2, rand=lambda: 0.0)
    high = Backoff(100, 1000, jitter=0.2, rand=lambda: 0.999999)
    assert low.delay_ms(0) == pytest.approx(80)
    assert high.delay_ms(0) == pytest.approx(120, rel=1e-3)


@pytest.mark.parametrize("reason", ["closing", "flushing", "exhausted"])
def test_closing_flushing_or_a_full_buffer_sends_now(reason: str) -> None:
    a = acc()
    a.append("t", 0, rec(), 112, None, now_ms=0)
    assert a.ready(1, leader_of)[0] == set()  # lingering until 10
    setattr(a, reason, 1 if reason == "flushing" else True)
    nodes, _, _ = a.ready(1, leader_of)
    assert nodes == {LEADER}
