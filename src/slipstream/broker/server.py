"""asyncio transport for the Kafka protocol: framing, per-connection ordering, flow control.

Requests on one connection are read ahead (pipelining) but answered strictly in
order, as Kafka clients require. A frame longer than socket.request.max.bytes or
a request we cannot parse closes that connection only.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import cast

from .dispatch import CloseConnection, Dispatcher

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Frames read ahead before we stop reading from the socket.
_MAX_QUEUED = 64


class KafkaConnection(asyncio.Protocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int, connections: set[KafkaConnection]) -> None:
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray()
        self._queue: asyncio.Queue[bytearray | None] = asyncio.Queue()
        self.worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._closed = False

    # -------------------------------------------------------------- transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the Transport interface without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.connections.add(self)
        self.worker = asyncio.get_running_loop().create_task(self._process())

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        start = 0
        end = len(buf)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_request_bytes:
                self.close(f"request size {size} is outside 0..{self.max_request_bytes} (socket.request.max.bytes)")
                return
            if end - start - 4 < size:
                break
            self._queue.put_nowait(buf[start + 4 : start + 4 + size])
            start += 4 + size
        if start:
            del buf[:start]
        if self._queue.qsize() >= _MAX_QUEUED and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._queue.put_nowait(None)
        return True  # keep the transport open until queued responses are written

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.connections.discard(self)
        self._can_write.set()
        if self.worker is not None:
            self.worker.cancel()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -------------------------------------------------------------- processing

    async def _process(self) -> None:
        try:
            while True:
                frame = await self._queue.get()
                if frame is None:
                    self.close(None)
                    return
                if self._reading_paused and self._queue.qsize() < _MAX_QUEUED // 2 and self.transport:
                    self._reading_paused = False
                    self.transport.resume_reading()
                try:
                    parts = await self.dispatcher.dispatch(frame, self.peer)
                except CloseConnection as exc:
                    self.close(str(exc))
                    return
                if parts is None or self._closed or self.transport is None:
                    continue
                self.transport.writelines(parts)
                if not self._can_write.is_set():
                    await self._can_write.wait()
        except asyncio.CancelledError:
            pass

    def close(self, reason: str | None) -> None:
        if reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
