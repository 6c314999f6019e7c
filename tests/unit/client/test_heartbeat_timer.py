"""The classic member's heartbeat schedule on a manual clock."""

from __future__ import annotations

import pytest

from slipstream.client.heartbeat_timer import HeartbeatTimer


def timer() -> HeartbeatTimer:
    return HeartbeatTimer(interval_s=3.0, retry_backoff_s=0.1, session_timeout_s=10.0)


def test_first_heartbeat_is_due_at_once_then_every_interval_after_the_last_sent() -> None:
    t = timer()
    assert t.time_to_next(100.0) == 0.0
    t.sent(100.0)
    assert t.time_to_next(100.0) is None  # one at a time
    t.answered(100.5)
    assert t.time_to_next(101.0) == 2.0
    assert t.time_to_next(104.0) == 0.0


def test_a_failure_retries_after_the_backoff_and_an_answer_resumes_the_interval() -> None:
    t = timer()
    t.sent(10.0)
    t.failed(10.5)
    assert t.time_to_next(10.5) == pytest.approx(0.1)
    t.sent(10.6)
    t.answered(10.7)
    assert t.time_to_next(10.7) == pytest.approx(2.9)


def test_the_session_lapses_only_after_a_whole_timeout_without_an_answer() -> None:
    t = timer()
    assert not t.session_expired(1000.0)  # never sent: nothing to lapse
    t.sent(0.0)
    assert t.last_receive == 0.0
    t.failed(1.0)
    assert not t.session_expired(10.0)
    assert t.session_expired(10.5)
    t.restart(10.5)
    assert not t.session_expired(20.0)
    assert t.time_to_next(10.5) == 3.0
