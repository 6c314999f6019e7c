"""The fetcher's buffers without a broker: per-batch storage, decoding into the consumer's
message type, read-ahead given back (``unread``), top-up fetch sizes, the memory bound,
and the short wait while a partition is held back by its full buffer.
"""

from __future__ import annotations

from typing import Any

import pytest

from slipstream.client.cluster import Cluster
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.consumer_messages import ConsumerMessage, Message
from slipstream.client.fetch_core import PartitionResult
from slipstream.client.fetcher import Fetcher, PartitionState, is_fetchable
from slipstream.protocol.apis.fetch import FetchResponsePartition
from slipstream.protocol.records import ProducerRecord, build_batch

T0 = ("t", 0)
T1 = ("t", 1)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def batch(base: int, n: int, size: int = 8) -> bytes:
    return build_batch(
        [ProducerRecord(None, b"%0*d" % (size, base + i), timestamp_ms=1) for i in range(n)],
        base_offset=base,
    )


def fetcher(*tps: tuple[str, int], **settings: Any) -> Fetcher:
    f = Fetcher(Cluster("127.0.0.1:1"), ConsumerConfig(**settings), clock=Clock())
    for tp in tps or (T0,):
        st = PartitionState(tp)
        st.position = st.fetch_offset = 0
        st.leader = 0
        f.core.parts[tp] = st
    return f


def feed(f: Fetcher, tp: tuple[str, int], data: bytes | memoryview) -> bool:
    response = FetchResponsePartition(
        partition_index=tp[1], error_code=0, high_watermark=10**6, last_stable_offset=10**6,
        log_start_offset=0, records=memoryview(data),
    )
    return f.core.handle_partition(f.core.parts[tp], response, f.clock()) is PartitionResult.DELIVER


def test_records_come_decoded_as_messages() -> None:
    f = fetcher()
    feed(f, T0, batch(0, 3))
    got = f.drain_records(10)
    assert [type(m) for m in got] == [Message] * 3
    assert [(m.topic, m.partition, m.offset, m.value) for m in got] == [
        ("t", 0, i, b"%08d" % i) for i in range(3)
    ]
    feed(f, T0, batch(3, 2))
    got2 = f.drain_partition(T0, 10)
    assert [type(m) for m in got2] == [ConsumerMessage] * 2 and f.position(T0) == 5


def test_the_response_is_not_kept_alive_by_buffered_data() -> None:
    f = fetcher()
    frame = bytearray(batch(0, 3) + batch(3, 3) + batch(6, 3)[:-5])  # with a cut batch at the end
    view = memoryview(frame)
    assert feed(f, T0, view)
    view.release()  # raises BufferError if the fetcher kept a view into it
    frame.extend(b"x")  # so does resizing
    assert [r.offset for r in f.drain_records(100)] == list(range(6))


def test_each_batch_is_freed_when_decoded_and_unbuffered_when_handed_out() -> None:
    f = fetcher()
    b1, b2 = batch(0, 4), batch(4, 4)
    feed(f, T0, b1 + b2)
    st = f.core.parts[T0]
    assert f.buffered_bytes() == len(b1) + len(b2) and len(st.chunks[0].batches) == 2
    assert [r.offset for r in f.drain_records(2)] == [0, 1]
    # b1 is decoded (its bytes gone from the chunk) but still counted until handed out.
    assert sum(len(b) for c in st.chunks for b in c.batches) == len(b2)
    assert f.buffered_bytes() == len(b1) + len(b2)
    assert [r.offset for r in f.drain_records(2)] == [2, 3]
    assert f.buffered_bytes() == len(b2)
    assert [r.offset for r in f.drain_records(10)] == [4, 5, 6, 7]
    assert f.buffered_bytes() == 0 and not st.chunks and f.position(T0) == 8


def test_one_batch_takes_at_most_the_rest_of_one_batch() -> None:
    f = fetcher()
    feed(f, T0, batch(0, 3) + batch(3, 3))
    assert [r.offset for r in f.drain_partition(T0, 100, one_batch=True)] == [0, 1, 2]
    assert [r.offset for r in f.drain_partition(T0, 2, one_batch=True)] == [3, 4]
    assert [r.offset for r in f.drain_partition(T0, 100, one_batch=True)] == [5]
    assert f.drain_partition(T0, 100, one_batch=True) == [] and f.buffered_bytes() == 0


def test_unread_puts_records_back_in_order_with_their_positions() -> None:
    f = fetcher(T0, T1)
    feed(f, T0, batch(0, 4))
    feed(f, T1, batch(0, 4))
    taken = f.drain_records(6)
    assert len(taken) == 6
    before = f.positions()
    f.unread(taken)
    assert f.positions() == {T0: 0, T1: 0}
    again = f.drain_records(100)
    assert sorted((r.partition, r.offset) for r in again) == [(p, o) for p in (0, 1) for o in range(4)]
    assert sum(before.values()) == 6 and f.positions() == {T0: 4, T1: 4}


def test_unread_part_of_a_batch_and_of_a_removed_partition() -> None:
    f = fetcher(T0, T1)
    feed(f, T0, batch(0, 5))
    feed(f, T1, batch(0, 2))
    got = f.drain_partition(T0, 2)  # 0, 1 taken; 2..4 still decoded in the fetcher
    f.unread(got)
    assert f.position(T0) == 0
    assert [r.offset for r in f.drain_partition(T0, 100)] == [0, 1, 2, 3, 4]
    assert f.position(T0) == 5
    ones = f.drain_partition(T1, 100)
    f.remove([T1])
    f.unread(ones)  # dropped: no longer assigned
    assert f.assigned() == {T0}


def test_unread_of_a_paused_partition_is_kept_until_resumed() -> None:
    f = fetcher()
    feed(f, T0, batch(0, 3))
    got = f.drain_records(3)
    f.pause([T0])
    f.unread(got)
    assert f.drain_records(10) == [] and f.position(T0) == 0
    f.resume([T0])
    assert [r.offset for r in f.drain_records(10)] == [0, 1, 2] and f.position(T0) == 3


def test_top_up_fetch_sizes() -> None:
    f = fetcher(max_partition_fetch_bytes=1 << 20, partition_buffer_bytes=1 << 20)
    st = f.core.parts[T0]
    assert f.core.fetch_size(st) == 1 << 20  # empty buffer: a full fetch
    st.buffered_bytes = (1 << 20) - 300_000
    assert f.core.fetch_size(st) == 300_000  # top up to partition_buffer_bytes
    st.buffered_bytes = (1 << 20) - 10
    assert f.core.fetch_size(st) == 64 * 1024  # but never less than 64 KiB ...
    st.largest_batch = 200_000
    assert f.core.fetch_size(st) == 200_000  # ... nor than the largest batch seen
    small = fetcher(max_partition_fetch_bytes=16 * 1024, partition_buffer_bytes=16 * 1024)
    s2 = small.core.parts[T0]
    s2.buffered_bytes = 100
    assert small.core.fetch_size(s2) == 16 * 1024  # never more than max_partition_fetch_bytes


@pytest.mark.parametrize(("mpfb", "pbb"), [(4096, 4096), (256 * 1024, 256 * 1024), (64 * 1024, 300 * 1024)])
def test_buffered_bytes_stay_within_the_documented_bound(mpfb: int, pbb: int) -> None:
    """Simulate a fetch loop against a slow consumer: fetch whenever the rule allows,
    with the size the fetcher asks for; the buffer never exceeds pbb + mpfb."""
    f = fetcher(max_partition_fetch_bytes=mpfb, partition_buffer_bytes=pbb, max_processing_time_ms=10**6)
    st = f.core.parts[T0]
    one = len(batch(0, 10, size=100))
    log = [batch(o, 10, size=100) for o in range(0, 4000, 10)]
    peak = 0
    next_batch = 0
    for _ in range(300):
        if is_fetchable(st, 100.0, f.core.buffer_limit, f.core.max_processing_s):
            want = f.core.fetch_size(st)
            data = bytearray()
            while next_batch < len(log) and (not data or len(data) + one <= want):
                data += log[next_batch]
                next_batch += 1
            if data:
                feed(f, T0, bytes(data))
        peak = max(peak, f.buffered_bytes())
        f.drain_partition(T0, 3)
    assert peak <= pbb + mpfb
    assert f.position(T0) > 0


def test_short_wait_while_another_partition_is_held_back_by_its_full_buffer() -> None:
    f = fetcher(T0, T1, fetch_max_wait_ms=500, partition_buffer_bytes=100)
    s0, s1 = f.core.parts[T0], f.core.parts[T1]
    request, _sent = f.core.build_request(0, [s0, s1], {})
    assert request.max_wait_ms == 500
    feed(f, T1, batch(0, 3))  # T1's buffer is now full: it is left out of the next fetch
    assert not is_fetchable(s1, 100.0, f.core.buffer_limit, f.core.max_processing_s)
    request, _sent = f.core.build_request(0, [s0], {})
    assert request.max_wait_ms == 10
    f.pause([T1])  # paused: nothing to wait for
    request, _sent = f.core.build_request(0, [s0], {})
    assert request.max_wait_ms == 500
