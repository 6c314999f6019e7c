"""The thread consumer's read-ahead buffer, without threads or a broker."""

from __future__ import annotations

from slipstream.client.consumer_read_ahead import READ_AHEAD_POLLS, ReadAheadBuffer


def test_take_hands_out_one_poll_at_a_time_and_asks_for_a_top_up_below_half() -> None:
    buffer: ReadAheadBuffer[int] = ReadAheadBuffer(max_poll_records=10)
    assert not buffer and buffer.room() == READ_AHEAD_POLLS * 10
    buffer.add(list(range(40)))
    assert len(buffer) == 40 and buffer.room() == 0

    assert buffer.take() == (list(range(10)), False)  # 30 left
    assert buffer.take() == (list(range(10, 20)), False)  # 20 left: half, not below
    assert buffer.take() == (list(range(20, 30)), True)  # 10 left: below half
    assert list(buffer) == list(range(30, 40))


def test_a_refill_goes_behind_what_is_left_and_take_all_empties_the_buffer() -> None:
    buffer: ReadAheadBuffer[int] = ReadAheadBuffer(max_poll_records=3)
    buffer.add([1, 2])
    assert buffer.take() == ([1, 2], True)
    assert buffer.take() == ([], True)
    buffer.add([3, 4, 5, 6])
    buffer.add([7])
    assert list(buffer) == [3, 4, 5, 6, 7]
    assert buffer.take_all() == [3, 4, 5, 6, 7]
    assert not buffer and buffer.take_all() == []
