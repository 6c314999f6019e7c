"""Garbage frames on raw sockets: the broker answers or closes that connection only.

Each hostile connection sends one frame (random bytes, or a real request frame with
bytes spliced in), then half-closes; the broker must answer and/or close it, never
hang on it or fail internally, and a well-behaved connection opened first is
answered throughout.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct

import pytest
from test_hostile_connections import answered, open_connections, until

from slipstream.broker.broker import Broker
from slipstream.testing import protocol_fuzz as fuzz

FRAMES = 100


def hostile_frame(rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        body = rng.randbytes(rng.randrange(0, 64))
    else:
        spec, version = rng.choice(fuzz.request_cases())
        seed = fuzz.request_frame_seed(spec, version)
        edits = [
            (rng.randrange(8, len(seed) + 1), rng.randrange(0, 4), rng.choice(fuzz.INTERESTING))
            for _ in range(rng.randrange(1, 4))
        ]
        body = fuzz.apply_edits(seed, edits)
    return struct.pack(">i", len(body)) + body


async def test_garbage_frames_close_only_their_own_connection(caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(20261125)
    async with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as b:
        b.state.topics.create("t", 1, {})
        healthy = await asyncio.open_connection(b.config.host, b.port)
        assert await answered(*healthy, 0)
        with caplog.at_level(logging.ERROR):
            for i in range(FRAMES):
                reader, writer = await asyncio.open_connection(b.config.host, b.port)
                writer.write(hostile_frame(rng))
                writer.write_eof()
                # the broker answers what it can and closes; a bound, not a timing assertion
                await asyncio.wait_for(reader.read(), timeout=30)
                writer.close()
                assert await answered(*healthy, i + 1), f"healthy connection lost after frame {i}"
        await until(lambda: open_connections(b) == 1, "only the healthy connection left")
        internal = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert internal == [], internal
        healthy[1].close()
