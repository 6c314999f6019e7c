"""Injected time (ManualTimer, GuardedTimer) and the group -> partition mapping."""

from __future__ import annotations

import pytest

from slipstream.coordinator import (
    CoordinatorResult,
    GuardedTimer,
    ManualTimer,
    java_string_hash,
    partition_for,
)


def _cb(log: list[tuple[str, int]], name: str):  # type: ignore[no-untyped-def]
    def run(now: int) -> CoordinatorResult:
        log.append((name, now))
        return CoordinatorResult()

    return run


def test_manual_timer_fires_in_deadline_order_at_deadlines() -> None:
    timer = ManualTimer(start_ms=100)
    fired: list[tuple[str, int]] = []
    timer.schedule("b", 50, _cb(fired, "b"))
    timer.schedule("a", 10, _cb(fired, "a"))
    timer.schedule("c", 50, _cb(fired, "c"))
    assert timer.next_deadline() == 110
    keys = [f.key for f in timer.advance(49)]
    assert keys == ["a"] and fired == [("a", 110)]
    assert timer.now_ms == 149
    keys = [f.key for f in timer.advance(1)]
    assert keys == ["b", "c"] and fired[1:] == [("b", 150), ("c", 150)]
    assert len(timer) == 0 and timer.next_deadline() is None


def test_schedule_replaces_same_key_and_cancel_forgets() -> None:
    timer = ManualTimer()
    fired: list[tuple[str, int]] = []
    timer.schedule("k", 10, _cb(fired, "first"))
    timer.schedule("k", 30, _cb(fired, "second"))
    assert timer.deadline("k") == 30
    timer.advance(20)
    assert fired == []
    timer.advance(10)
    assert fired == [("second", 30)]
    timer.schedule("x", 5, _cb(fired, "x"))
    timer.cancel("x")
    timer.cancel("never-scheduled")
    timer.advance(100)
    assert fired == [("second", 30)]


def test_callbacks_may_schedule_more_work_within_the_same_advance() -> None:
    timer = ManualTimer()
    fired: list[tuple[str, int]] = []

    def chain(now: int) -> CoordinatorResult:
        fired.append(("chain", now))
        timer.schedule("next", 5, _cb(fired, "next"))
        return CoordinatorResult()

    timer.schedule("chain", 10, chain)
    timer.advance(100)
    assert fired == [("chain", 10), ("next", 15)]


def test_external_clock_timer_pops_expired() -> None:
    now = [0]
    timer = ManualTimer(clock=lambda: now[0])
    fired: list[tuple[str, int]] = []
    timer.schedule("k", 10, _cb(fired, "k"))
    assert timer.pop_expired(9) is None
    expired = timer.pop_expired(10)
    assert expired is not None and expired.key == "k" and expired.deadline_ms == 10
    with pytest.raises(RuntimeError):
        timer.advance(1)


def test_guarded_timer_ignores_stale_callbacks() -> None:
    inner = ManualTimer()
    guarded = GuardedTimer(inner)
    fired: list[tuple[str, int]] = []
    guarded.schedule("k", 10, _cb(fired, "old"))
    stale = inner.pop_expired(10_000)  # an event loop already took it off the timer...
    assert stale is not None
    guarded.schedule("k", 10, _cb(fired, "new"))  # ...then the key was rescheduled
    assert stale.callback(10).is_empty and fired == []
    inner.advance(10)
    assert fired == [("new", 10)]
    assert not guarded.is_scheduled("k")
    guarded.schedule("c", 1, _cb(fired, "cancelled"))
    guarded.cancel("c")
    inner.advance(5)
    assert fired == [("new", 10)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("Aa", 2112),
        ("BB", 2112),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # UTF-16 surrogate pair, like Java
        ("é", 0xE9),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_matches_kafka() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # A negative hash is taken absolute, not Python-modulo'd.
    assert java_string_hash("consumer-group") == -1738392088
    assert partition_for("consumer-group", 50) == 1738392088 % 50 == 38
    assert all(0 <= partition_for(f"g{i}", 7) < 7 for i in range(200))


def test_heartbeat_timer_keys_do_not_collide() -> None:
    from slipstream.coordinator.classic_sessions import heartbeat_key

    assert heartbeat_key("a-b", "c") != heartbeat_key("a", "b-c")
