"""A client pointed at nothing says so: failed connects are logged (rate-limited) and
every timeout names what was waited for and for how long."""

from __future__ import annotations

import asyncio
import logging
import re
import socket

import pytest

from slipstream.client.consumer import Consumer
from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler
from slipstream.client.failure_log import RateLimitedWarnings
from slipstream.client.tasks import deadline


def closed_port() -> str:
    """An address where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_rate_limited_warnings_on_a_manual_clock(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warnings = RateLimitedWarnings(logging.getLogger("test.failures"), interval_s=10, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="test.failures"):
        assert warnings.warn("a:1", "cannot connect to a:1")
        now[0] = 5.0
        assert not warnings.warn("a:1", "cannot connect to a:1")
        assert not warnings.warn("a:1", "cannot connect to a:1")
        assert warnings.warn("b:2", "cannot connect to b:2")  # another address: its own budget
        now[0] = 10.0
        assert warnings.warn("a:1", "cannot connect to a:1")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "cannot connect to a:1",
        "cannot connect to b:2",
        "cannot connect to a:1 (2 more since the last report)",
    ]


async def test_deadline_names_what_timed_out() -> None:
    with pytest.raises(TimeoutError, match=r"^waiting for the moon: gave up after 0\.01 s$"):
        async with deadline(0.01, "waiting for the moon"):
            await asyncio.Event().wait()
    async with deadline(1, "quick"):
        pass  # no timeout: nothing raised


def test_consumer_pointed_at_nothing_warns_and_names_its_timeout(caplog: pytest.LogCaptureFixture) -> None:
    address = closed_port()
    consumer = Consumer(address, group_id="g-nothing")
    try:
        consumer.subscribe(["t"])
        with caplog.at_level("WARNING", logger="slipstream.client.connection"):
            assert consumer.poll(0.5) == []
            with pytest.raises(TimeoutError) as raised:
                consumer.committed([("t", 0)], timeout_s=0.5)
    finally:
        consumer.close()
    assert "group 'g-nothing'" in str(raised.value) and "0.5 s" in str(raised.value)
    assert any(f"cannot connect to {address}" in r.getMessage() for r in caplog.records)


async def test_consumer_group_join_timeout_names_the_group() -> None:
    group = ConsumerGroup(closed_port(), "g-join")
    try:
        with pytest.raises(TimeoutError, match=re.escape("joining consumer group 'g-join': gave up after 0.5 s")):
            await group.consume(["t"], ConsumerGroupHandler(), join_timeout_s=0.5)
    finally:
        await group.close()
