"""Sans-I/O client connection: encodes requests with correlation ids, matches responses.

Kafka answers requests on a connection strictly in order, so the in-flight queue
is FIFO and a response whose correlation id is not the oldest outstanding one
means the stream is out of sync: that is a protocol error, the connection must
be closed and every waiter failed (sarama's broker.responseReceiver does the same).
Feed it bytes with ``receive``; it never touches a socket.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, cast

from ..protocol import api
from ..protocol import primitives as p
from ..protocol.api import ApiSpec, RequestHeader
from ..protocol.codec import Writer

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30


class ProtocolError(Exception):
    """The byte stream from the broker cannot be trusted any more."""


@dataclass(frozen=True, slots=True)
class InFlight:
    correlation_id: int
    spec: ApiSpec
    version: int


@dataclass(frozen=True, slots=True)
class Received:
    correlation_id: int
    spec: ApiSpec
    version: int
    response: Any


class ConnectionCore:
    def __init__(self, client_id: str | None = "slipstream") -> None:
        self.client_id = client_id
        self._next_id = 0
        self._in_flight: deque[InFlight] = deque()
        self._buf = bytearray()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def encode(
        self, spec: ApiSpec, version: int, request: Any, *, expect_response: bool = True
    ) -> tuple[int, list[bytes | bytearray | memoryview]]:
        """Frame a request; returns its correlation id and the buffers to write."""
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        w = Writer()
        w.buf += b"\0\0\0\0"
        first = w.buf
        header = RequestHeader(spec.key, version, correlation_id, self.client_id)
        api.encode_request_header(w.buf, header, spec.request_header_version(version))
        spec.encode_request(request, version, w)
        # A request's parts are bytes: only a broker's Fetch answer holds file regions.
        parts = cast(list[bytes | bytearray | memoryview], w.finish())
        _SIZE.pack_into(first, 0, sum(len(x) for x in parts) - 4)
        if expect_response:
            self._in_flight.append(InFlight(correlation_id, spec, version))
        return correlation_id, parts

    def receive(self, data: bytes) -> list[Received]:
        """Consume bytes from the socket; return every response now complete, in order."""
        self._buf += data
        out: list[Received] = []
        buf = self._buf
        start = 0
        while len(buf) - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise ProtocolError(f"response frame size {size} is invalid")
            if len(buf) - start - 4 < size:
                break
            frame = memoryview(buf)[start + 4 : start + 4 + size]
            out.append(self._decode(bytes(frame)))
            frame.release()
            start += 4 + size
        if start:
            del buf[:start]
        return out

    def _decode(self, frame: bytes) -> Received:
        if not self._in_flight:
            raise ProtocolError("response received with no request outstanding")
        expected = self._in_flight[0]
        view = memoryview(frame)
        correlation_id = p.INT32.unpack_from(view, 0)[0]
        if correlation_id != expected.correlation_id:
            raise ProtocolError(
                f"response correlation id {correlation_id} does not match the oldest "
                f"request in flight ({expected.correlation_id}, {expected.spec.name})"
            )
        self._in_flight.popleft()
        spec, version = expected.spec, expected.version
        try:
            _, pos = api.decode_response_header(view, spec.response_header_version(version))
            try:
                response = spec.decode_response(view, pos, version)
            except p.DecodeError:
                if spec.key != api.API_VERSIONS_KEY:
                    raise
                # A broker that does not know our ApiVersions version answers in v0.
                response = spec.decode_response(view, pos, 0)
        except p.DecodeError as exc:
            raise ProtocolError(f"cannot decode {spec.name} v{version} response: {exc}") from exc
        return Received(correlation_id, spec, version, response)

    def fail_all(self) -> list[InFlight]:
        """Forget everything outstanding (the connection is gone); returns what was lost."""
        lost = list(self._in_flight)
        self._in_flight.clear()
        self._buf.clear()
        return lost
