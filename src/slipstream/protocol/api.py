"""API registry: each API's key, message declarations, schema version range, flexible versions.

Also the request/response headers, which are hand-coded: the request header's
client_id stays a classic (non-compact) nullable string even in header v2.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import codec
from . import primitives as p
from .schema import Struct, fast_frozen_init

API_VERSIONS_KEY = 18
METADATA_KEY = 3


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One Kafka API: its key, name, request and response declarations and served versions."""

    key: int
    name: str
    request: type[Struct]
    response: type[Struct]
    min_version: int
    max_version: int
    # First flexible version (compact types, tagged fields); None when the API has none.
    flexible_from: int | None

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions responses always use header v0 so any client can read the version list.
        if self.key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0

    def decode_request(self, buf: memoryview, pos: int, version: int) -> Struct:
        value, _ = codec.decode_at(self.request, buf, pos, version, self.is_flexible(version))
        return value

    def decode_response(self, buf: memoryview, pos: int, version: int) -> Struct:
        value, _ = codec.decode_at(self.response, buf, pos, version, self.is_flexible(version))
        return value

    def encode_request(self, value: Struct, version: int, w: codec.Writer | None = None) -> codec.Writer:
        return codec.encode(value, version, self.is_flexible(version), w)

    def encode_response(self, value: Struct, version: int, w: codec.Writer | None = None) -> codec.Writer:
        return codec.encode(value, version, self.is_flexible(version), w)


REGISTRY: dict[int, ApiSpec] = {}


def register(spec: ApiSpec) -> ApiSpec:
    if spec.key in REGISTRY and REGISTRY[spec.key] is not spec:
        raise ValueError(f"API key {spec.key} registered twice")
    REGISTRY[spec.key] = spec
    return spec


def api(key: int) -> ApiSpec | None:
    return REGISTRY.get(key)


@fast_frozen_init  # made on every request: see schema.fast_frozen_init
@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header every request starts with."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# api_key, api_version, correlation_id: read with one call on every request.
_HEADER_PREFIX = struct.Struct(">hhi")


def decode_request_header_prefix(buf: memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable before we know anything about the API."""
    if len(buf) < 8:
        raise p.DecodeError("request shorter than its header")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(buf, 0)
    return api_key, api_version, correlation_id


def decode_request_header(buf: memoryview, header_version: int) -> tuple[RequestHeader, int]:
    api_key, api_version, correlation_id = decode_request_header_prefix(buf)
    return decode_request_header_rest(buf, header_version, api_key, api_version, correlation_id)


def decode_request_header_rest(
    buf: memoryview, header_version: int, api_key: int, api_version: int, correlation_id: int
) -> tuple[RequestHeader, int]:
    """The header after its prefix, for a caller that already read the prefix (the broker)."""
    pos = 8
    client_id: str | None = None
    try:
        if header_version >= 1:
            client_id, pos = p.read_string(buf, pos)
        if header_version >= 2:
            pos = p.skip_tagged_fields(buf, pos)
    except p.DecodeError:
        raise
    except Exception as exc:
        raise p.DecodeError(f"malformed request header: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(out: bytearray, header: RequestHeader, header_version: int) -> None:
    out += p.INT16.pack(header.api_key)
    out += p.INT16.pack(header.api_version)
    out += p.INT32.pack(header.correlation_id)
    if header_version >= 1:
        p.write_string(out, header.client_id)
    if header_version >= 2:
        out.append(0)


def encode_response_header(out: bytearray, correlation_id: int, header_version: int) -> None:
    out += p.INT32.pack(correlation_id)
    if header_version >= 1:
        out.append(0)


def decode_response_header(buf: memoryview, header_version: int) -> tuple[int, int]:
    """Returns (correlation_id, position of the body)."""
    if len(buf) < 4:
        raise p.DecodeError("response shorter than its header")
    correlation_id = p.INT32.unpack_from(buf, 0)[0]
    pos = 4
    if header_version >= 1:
        pos = p.skip_tagged_fields(buf, pos)
    return correlation_id, pos
