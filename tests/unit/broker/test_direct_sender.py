"""broker/direct_sender.py and the connection that uses it, over real TCP sockets with
small buffers (so sendfile and writev come back short and the sender must wait), on
asyncio's own loop and on uvloop: bytes the transport holds go first, regions and the
bytes around them in order, a region whose segment is deleted meanwhile is still sent,
and the connection waits for the sender before a half-closed client is closed. Regions
go through a pipe (splice), or with sendfile when no pipe can be had."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from slipstream.broker.direct_sender import DirectSender
from slipstream.broker.dispatch import Buffers
from slipstream.broker.server import KafkaConnection
from slipstream.log.api import LogConfig
from slipstream.log.disk import segment as segment_module
from slipstream.log.disk.disk_log import DiskLog
from slipstream.log.disk.segment import SharedDescriptor
from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.records import ProducerRecord, build_batch

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
SMALL_BUFFER = 32768


def run(loop_name: str, coro: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        runner.run(asyncio.wait_for(coro(), 60))


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """(server side, client side) of a loopback TCP connection with small buffers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    client.setblocking(False)
    return server, client


async def read_exactly(client: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = bytearray()
    while len(data) < size:
        chunk = await loop.sock_recv(client, 65536)
        assert chunk, f"closed after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


async def read_to_eof(client: socket.socket) -> bytes:
    loop = asyncio.get_running_loop()
    data = bytearray()
    while chunk := await loop.sock_recv(client, 65536):
        data += chunk
    return bytes(data)


def fill_log(directory: Path, batches: int, config: LogConfig) -> DiskLog:
    log = DiskLog.open(directory, config)
    for i in range(batches):
        batch = build_batch([ProducerRecord(None, bytes([65 + i % 26]) * 20_000, timestamp_ms=0)])
        log.append([bytearray(batch)], now_ms=0, log_append_time=False)
    return log


@pytest.mark.parametrize("loop_name", list(LOOPS))
@pytest.mark.parametrize("through", ["pipe", "sendfile"])
def test_regions_follow_the_transports_bytes_and_survive_their_deleted_segment(
    loop_name: str, through: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_module, "REGION_MIN_BYTES", 0)
    short_sends: list[int] = []
    splice, sendfile = os.splice, os.sendfile

    def counting_splice(src: int, dst: int, count: int, **kwargs: Any) -> int:
        sent = splice(src, dst, count, **kwargs)
        if sent < count:
            short_sends.append(sent)
        return sent

    def counting_sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        sent = sendfile(out_fd, in_fd, offset, count)
        if sent < count:
            short_sends.append(sent)
        return sent

    monkeypatch.setattr(os, "splice", counting_splice)
    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    if through == "sendfile":  # no pipe to be had (out of descriptors): the fallback
        monkeypatch.setattr(DirectSender, "_open_pipe", lambda self: (-1, -1, 0))
    batch_size = len(build_batch([ProducerRecord(None, b"A" * 20_000, timestamp_ms=0)]))
    log = fill_log(tmp_path, 6, LogConfig(segment_bytes=3 * batch_size, retention_bytes=3 * batch_size))
    expected_records = b"".join(bytes(c) for c in log.read(0, 1 << 30).chunks)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server, client = tcp_pair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, server)
        drained: list[int] = []
        failures: list[str] = []
        sender = DirectSender(loop, transport, server.fileno(), lambda: drained.append(1), failures.append)
        earlier = b"T" * 300_000
        transport.write(earlier)  # more than the socket takes: the transport keeps some
        regions = log.read_regions(0, 1 << 30).chunks
        assert len(regions) == 2 and all(isinstance(r, FileRegion) for r in regions)
        sender.send([b"<", *regions, b">"])
        sender.send([b"after"])
        assert sender.busy and not drained
        assert log.enforce_retention(0) == 1  # the first region's segment is deleted...
        log.close()  # ... and the log closed, while both regions wait to be sent
        expected = earlier + b"<" + expected_records + b">" + b"after"
        assert await read_exactly(client, len(expected)) == expected
        while not drained:
            await asyncio.sleep(0)
        assert not sender.busy and not failures
        assert short_sends  # the socket was full at times: the sender waited and went on
        sender.send([b"again"])  # nothing waiting: written at once
        assert await read_exactly(client, 5) == b"again"
        transport.close()
        client.close()

    run(loop_name, scenario)


@pytest.mark.parametrize("loop_name", list(LOOPS))
@pytest.mark.parametrize("through", ["pipe", "sendfile"])
def test_a_region_beyond_the_end_of_its_file_fails_the_send(
    loop_name: str, through: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if through == "sendfile":
        monkeypatch.setattr(DirectSender, "_open_pipe", lambda self: (-1, -1, 0))
    path = tmp_path / "short"
    path.write_bytes(b"x" * 100)
    file = SharedDescriptor(os.open(path, os.O_RDONLY))

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server, client = tcp_pair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, server)
        failures: list[str] = []
        sender = DirectSender(loop, transport, server.fileno(), lambda: None, failures.append)
        sender.send([b"h", FileRegion(file, 50, 100)])
        assert failures and "file ended inside" in failures[0]
        assert not sender.busy
        transport.close()
        client.close()

    run(loop_name, scenario)


class RegionDispatcher:
    """Answers request n with: a 4-byte n, region n of the file, and b"end<n>"."""

    def __init__(self, file: SharedDescriptor, region_size: int) -> None:
        self.file = file
        self.region_size = region_size
        self.file_regions: list[bool] = []

    async def dispatch(self, frame: bytearray, client_host: str, **kwargs: Any) -> Buffers | None:
        self.file_regions.append(kwargs.get("file_regions", False))
        (n,) = struct.unpack_from(">i", frame, 4)
        await asyncio.sleep(0)
        return [struct.pack(">i", n), FileRegion(self.file, n * self.region_size, self.region_size), b"end%d" % n]


@pytest.mark.parametrize("loop_name", list(LOOPS))
def test_connection_answers_in_order_then_closes_after_the_client_half_closes(
    loop_name: str, tmp_path: Path
) -> None:
    region_size = 100_000
    content = bytes(range(256)) * (4 * region_size // 256 + 1)
    path = tmp_path / "data"
    path.write_bytes(content)
    file = SharedDescriptor(os.open(path, os.O_RDONLY))
    dispatcher = RegionDispatcher(file, region_size)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server, client = tcp_pair()
        await loop.connect_accepted_socket(lambda: KafkaConnection(dispatcher, 1 << 20, set()), server)  # type: ignore[arg-type]
        # Three Fetch-like (not pipelined) requests back to back, then the client's EOF.
        frames = b"".join(struct.pack(">ihhi", 8, 1, 0, n) for n in range(3))
        await loop.sock_sendall(client, frames)
        client.shutdown(socket.SHUT_WR)
        expected = b"".join(
            struct.pack(">i", n) + content[n * region_size : (n + 1) * region_size] + b"end%d" % n for n in range(3)
        )
        assert await read_to_eof(client) == expected
        assert dispatcher.file_regions == [True, True, True]
        client.close()

    run(loop_name, scenario)
