"""How broker/server.py reads frames: the transport receives into get_buffer's view and
reports with buffer_updated; small frames are copied out of a shared scratch buffer,
large ones are received into a buffer of their own. Whatever the read sizes, the
dispatcher must see exactly the frames that were sent, in order, as bytearrays."""

from __future__ import annotations

import asyncio
import random
import struct
from typing import Any

import pytest

from slipstream.broker import server
from slipstream.broker.dispatch import Buffers
from slipstream.broker.server import KafkaConnection


class Transport:
    def __init__(self) -> None:
        self.closed = False
        self.reading_paused = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def writelines(self, parts: list[bytes]) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False


class Recorder:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.types: set[type] = set()

    async def dispatch(self, frame: bytearray, client_host: str) -> Buffers | None:
        self.types.add(type(frame))
        self.frames.append(bytes(frame))
        return None


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def feed(conn: KafkaConnection, wire: bytes, reads: list[int]) -> None:
    """What a transport does: ask for a buffer, receive into it at most the next of
    ``reads`` (taken in turn, over and over) bytes, until the wire is read."""
    pos = 0
    turn = 0
    while pos < len(wire):
        n = reads[turn % len(reads)]
        turn += 1
        view = conn.get_buffer(-1)
        assert len(view) > 0
        chunk = wire[pos : pos + min(n, len(view))]
        view[: len(chunk)] = chunk
        conn.buffer_updated(len(chunk))
        pos += len(chunk)


async def settle(recorder: Recorder, want: int) -> None:
    for _ in range(1000):
        if len(recorder.frames) >= want:
            return
        await asyncio.sleep(0)


def connection(max_request_bytes: int = 1 << 24) -> tuple[KafkaConnection, Recorder, Transport]:
    recorder = Recorder()
    conn = KafkaConnection(recorder, max_request_bytes, set())  # type: ignore[arg-type]
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, recorder, transport


def bodies(rng: random.Random, own_from: int) -> list[bytes]:
    """Frames below, at and above the own-buffer size. API key 0 (not pipelined): one at
    a time, so each frame is dispatched in order."""
    sizes = [2, 10, 300, own_from + 5000, 5, own_from - 1, own_from, 6 * own_from, 3]
    return [b"\x00\x00" + rng.randbytes(size - 2) for size in sizes]


@pytest.fixture
def small_own_buffers(monkeypatch: pytest.MonkeyPatch) -> int:
    """Own buffers from 1000 bytes, so that byte-by-byte reads stay quick."""
    monkeypatch.setattr(server, "_OWN_BUFFER_BYTES", 1000)
    return 1000


@pytest.mark.parametrize("read_size", [1, 3, 4, 5, 999, 1000, 1 << 20])
async def test_frames_arrive_whole_and_in_order_whatever_the_read_sizes(
    read_size: int, small_own_buffers: int
) -> None:
    rng = random.Random(read_size)
    sent = bodies(rng, small_own_buffers)
    wire = b"".join(framed(b) for b in sent)
    conn, recorder, _ = connection()
    feed(conn, wire, [read_size])
    await settle(recorder, len(sent))
    assert recorder.frames == sent
    assert recorder.types == {bytearray}


@pytest.mark.parametrize("read_size", [4096, 65_536, 1 << 20])
async def test_the_real_own_buffer_size(read_size: int) -> None:
    rng = random.Random(read_size)
    sent = bodies(rng, server._OWN_BUFFER_BYTES)
    wire = b"".join(framed(b) for b in sent)
    conn, recorder, _ = connection()
    feed(conn, wire, [read_size])
    await settle(recorder, len(sent))
    assert recorder.frames == sent
    assert recorder.types == {bytearray}


async def test_random_read_sizes(small_own_buffers: int) -> None:
    rng = random.Random(5)
    for _ in range(20):
        sent = bodies(rng, small_own_buffers)
        rng.shuffle(sent)
        wire = b"".join(framed(b) for b in sent)
        conn, recorder, _ = connection()
        reads = [rng.choice((1, 2, 7, 100, 4096, 70_000, 300_000)) for _ in range(50)]
        feed(conn, wire, reads)
        await settle(recorder, len(sent))
        assert recorder.frames == sent


async def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    conn, recorder, _ = connection()
    body = b"\x00\x00" + bytes(range(256)) * 1000
    wire = framed(body)
    feed(conn, wire[:10], [10])  # the size prefix and a little of the body
    own = conn.get_buffer(-1)
    assert len(own) == len(body) - 6  # exactly the rest of the frame, not the scratch
    feed(conn, wire[10:], [len(wire)])
    await settle(recorder, 1)
    assert recorder.frames == [body]
    assert conn.get_buffer(-1).obj is server._scratch_view().obj  # back to the scratch


async def test_handed_over_data_mixes_with_buffered_reads() -> None:
    conn, recorder, _ = connection()
    big = b"\x00\x00" + b"x" * 100_000
    small = b"\x00\x00abc"
    wire = framed(big) + framed(small) + framed(small)
    feed(conn, wire[:20], [20])
    conn.data_received(wire[20:])  # the rest in one call, as a plain Protocol would get it
    await settle(recorder, 3)
    assert recorder.frames == [big, small, small]


async def test_an_oversized_frame_closes_before_anything_is_allocated() -> None:
    conn, recorder, transport = connection(max_request_bytes=100_000)
    feed(conn, struct.pack(">i", 100_001) + b"\x00\x00", [6])
    assert transport.closed
    assert conn._own is None
    assert recorder.frames == []
