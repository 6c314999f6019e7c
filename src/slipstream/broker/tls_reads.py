"""Reads from a TLS transport into one reusable buffer (asyncio.BufferedProtocol).

A TLS transport decrypts one TLS record per ``SSLObject.read`` call. librdkafka
sends a record per buffer segment (about 1.4 KB with 1 KiB values), so a 256 KiB
socket read is some 180 reads. Given a plain ``asyncio.Protocol``, the SSL layer
(uvloop's and asyncio's) has each read allocate a bytes object of the maximum
read size (256 KiB) and shrink it, then joins the pieces into one more bytes
object for ``data_received``. Given a ``BufferedProtocol``, it decrypts straight
into the buffer we lend it: in a profile of the produce benchmark that cut the
broker's TLS read cost by about a third.

uvloop treats a protocol as buffered only if it is not an ``asyncio.Protocol``,
and ``KafkaConnection`` is one, so this is a separate object that lends the
buffer and forwards every event to the connection it wraps.
"""

from __future__ import annotations

import asyncio
from typing import cast

from .server import KafkaConnection

# Large enough for one socket read's worth of records (uvloop reads 256 KiB at a
# time); a transport that asks for more gets a bigger buffer once.
_INITIAL_BUFFER = 256 * 1024 + 1024
# Never lend more than this: the transport asks again for the rest.
_MAX_BUFFER = 4 * 1024 * 1024


class TlsBufferedReads(asyncio.BufferedProtocol):
    """The protocol a TLS listener gives its transport; the Kafka work stays in ``connection``."""

    def __init__(self, connection: KafkaConnection) -> None:
        self.connection = connection
        self._buffer = bytearray(_INITIAL_BUFFER)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connection.connection_made(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if sizehint > len(self._buffer):
            # A new buffer rather than a resize: the transport may still hold a view of the old one.
            self._buffer = bytearray(min(sizehint, _MAX_BUFFER))
        return memoryview(self._buffer)

    def buffer_updated(self, nbytes: int) -> None:
        # The connection copies what it needs (it appends to its own frame buffer), so
        # the buffer is free for the next read when this returns.
        with memoryview(self._buffer) as view, view[:nbytes] as data:
            self.connection.data_received(cast(bytes, data))

    def eof_received(self) -> bool | None:
        return self.connection.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection.connection_lost(exc)

    def pause_writing(self) -> None:
        self.connection.pause_writing()

    def resume_writing(self) -> None:
        self.connection.resume_writing()
