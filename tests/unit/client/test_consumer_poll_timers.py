"""The poll consumers' sans-I/O timers on a manual clock."""

from __future__ import annotations

from slipstream.client.consumer_poll_timers import AutoCommitSchedule, PollInterval


def test_poll_interval_is_exceeded_only_outside_a_poll_and_after_the_limit() -> None:
    interval = PollInterval(max_poll_interval_ms=1000, now=100.0)
    assert not interval.exceeded(101.0)  # exactly the limit is not past it
    assert interval.exceeded(101.001)
    assert interval.idle_s(101.5) == 1.5

    interval.enter(102.0)
    assert not interval.exceeded(110.0)  # a long poll is the consumer's wait, not the app's

    interval.exit(110.0)
    assert not interval.exceeded(111.0)
    assert interval.exceeded(111.5)


def test_poll_interval_is_checked_often_enough_for_short_limits() -> None:
    assert PollInterval(max_poll_interval_ms=300_000, now=0.0).check_every_s == 0.1
    assert PollInterval(max_poll_interval_ms=200, now=0.0).check_every_s == 0.05


def test_auto_commit_is_due_an_interval_after_start_and_after_each_take() -> None:
    schedule = AutoCommitSchedule(interval_ms=5000, now=10.0)
    assert not schedule.due(14.9)
    assert not schedule.take(14.9)
    assert schedule.due(15.0)

    assert schedule.take(16.0)  # the next one counts from when this one was taken
    assert not schedule.due(20.9)
    assert not schedule.take(20.9)
    assert schedule.take(21.0)
    assert not schedule.due(21.0)
