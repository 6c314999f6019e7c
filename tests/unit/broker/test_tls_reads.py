"""broker/tls_reads.py: a TLS listener's connection reads through a lent buffer.

The fake-transport tests check that frames arrive whole and in order however the
bytes are split across reads, and that the buffer is replaced, never resized, when
the transport asks for more. The socket tests run a real TLS server (uvloop's and
asyncio's) with a real KafkaConnection that echoes each request, fed by a client
that sends one small TLS record at a time, as librdkafka does.
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from slipstream.broker.server import KafkaConnection
from slipstream.broker.tls_reads import TlsBufferedReads
from slipstream.cli.certs import make_dev_certs


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def writelines(self, parts: list[bytes]) -> None:
        self.written.extend(bytes(p) for p in parts)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class EchoDispatcher:
    """Answers each request with its own bytes, framed, so the wire shows what was read."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []

    async def dispatch(self, frame: bytearray, peer: str) -> list[bytes]:
        self.requests.append(bytes(frame))
        return [struct.pack(">i", len(frame)), bytes(frame)]


class CountingReads(TlsBufferedReads):
    def __init__(self, connection: KafkaConnection) -> None:
        super().__init__(connection)
        self.buffers_lent = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        self.buffers_lent += 1
        return super().get_buffer(sizehint)


def make_frames(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    # Two bytes of API key first (an unpipelined one, 3), then a body of varied size.
    return [struct.pack(">h", 3) + rng.randbytes(rng.randint(0, 5000)) for _ in range(count)]


def framed(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def new_connection(dispatcher: EchoDispatcher) -> KafkaConnection:
    return KafkaConnection(dispatcher, 1 << 20, set())  # type: ignore[arg-type]


async def test_frames_split_anywhere_arrive_whole_and_in_order() -> None:
    frames = make_frames(60, seed=7)
    wire = framed(frames)
    dispatcher = EchoDispatcher()
    reads = TlsBufferedReads(new_connection(dispatcher))
    transport = FakeTransport()
    reads.connection_made(transport)  # type: ignore[arg-type]
    rng = random.Random(3)
    pos = 0
    while pos < len(wire):
        buffer = reads.get_buffer(rng.randint(1, 20_000))
        n = min(len(buffer), rng.randint(1, 9_000), len(wire) - pos)
        buffer[:n] = wire[pos : pos + n]
        reads.buffer_updated(n)
        pos += n
        await asyncio.sleep(0)
    for _ in range(len(frames) * 3):  # one request at a time: let each answer go out
        await asyncio.sleep(0)
    assert dispatcher.requests == frames
    assert b"".join(transport.written) == wire


def test_a_bigger_read_gets_a_new_buffer_and_the_old_view_stays_valid() -> None:
    reads = TlsBufferedReads(new_connection(EchoDispatcher()))
    small = reads.get_buffer(16)
    big = reads.get_buffer(len(small) + 100_000)
    assert len(big) >= len(small) + 100_000
    small[:3] = b"abc"  # still writable: the old buffer was replaced, not resized under it
    assert bytes(small[:3]) == b"abc"
    assert len(reads.get_buffer(16)) == len(big)  # kept for the next reads


def test_events_reach_the_connection() -> None:
    seen: list[str] = []

    class Recorder(KafkaConnection):
        def eof_received(self) -> bool | None:
            seen.append("eof")
            return None

        def connection_lost(self, exc: Exception | None) -> None:
            seen.append(f"lost {exc}")

        def pause_writing(self) -> None:
            seen.append("pause")

        def resume_writing(self) -> None:
            seen.append("resume")

    reads = TlsBufferedReads(Recorder(EchoDispatcher(), 1 << 20, set()))  # type: ignore[arg-type]
    reads.pause_writing()
    reads.resume_writing()
    assert reads.eof_received() is None
    reads.connection_lost(None)
    assert seen == ["pause", "resume", "eof", "lost None"]


@pytest.fixture(scope="module")
def tls_contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    certs: Path = tmp_path_factory.mktemp("certs")
    make_dev_certs(certs)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certs / "broker.pem", certs / "broker-key.pem")
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(certs / "ca.pem")
    client.check_hostname = False
    return server, client


def send_in_small_records(port: int, client_context: ssl.SSLContext, wire: bytes, answer: bytearray) -> None:
    """One TLS record per 1400 bytes, then read every answer byte back."""
    with client_context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20)) as sock:
        for start in range(0, len(wire), 1400):
            sock.sendall(wire[start : start + 1400])
        while len(answer) < len(wire):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"])
def test_a_tls_server_reads_small_records_through_the_lent_buffer(
    loop_factory: Callable[[], asyncio.AbstractEventLoop], tls_contexts: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    server_context, client_context = tls_contexts
    frames = make_frames(200, seed=11)
    wire = framed(frames)
    dispatcher = EchoDispatcher()
    protocols: list[CountingReads] = []
    answer = bytearray()

    def new_protocol() -> CountingReads:
        protocols.append(CountingReads(new_connection(dispatcher)))
        return protocols[-1]

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(new_protocol, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        client = threading.Thread(target=send_in_small_records, args=(port, client_context, wire, answer))
        client.start()
        await asyncio.to_thread(client.join, 30)
        server.close()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve())
    assert dispatcher.requests == frames
    assert bytes(answer) == wire
    assert protocols and protocols[0].buffers_lent > 0  # the transport used the buffered path
