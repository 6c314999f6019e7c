"""The checks behind the protocol fuzz test and ``bench/fuzz_protocol.py``.

Bytes from a hostile client reach three decoders: the request header, each API's
request body, and (in Produce) record batches. Whatever the bytes, each may only
succeed or raise its protocol error (``DecodeError`` for requests; ``InvalidBatch``,
``UnsupportedCompression`` or the produce path's ``KafkaError`` for batches). Anything
else would reach the dispatcher as an internal error.

Inputs are random bytes or edits of a seed: a request's encoding (every declared API
at every version) or a small valid batch, so the fuzzer gets past the first field.
The strategies themselves live with the callers (hypothesis is a test dependency).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from slipstream.broker.batch_checks import check_batch_records
from slipstream.protocol import api, apis, compression
from slipstream.protocol.api import REGISTRY, ApiSpec
from slipstream.protocol.compression import UnsupportedCompression
from slipstream.protocol.errors import KafkaError
from slipstream.protocol.primitives import DecodeError
from slipstream.protocol.record_batch import InvalidBatch, validate_batch
from slipstream.protocol.records import ProducerRecord, build_batch, decode_batch

apis.load_all()  # registers every API in REGISTRY

# Byte runs that make lengths and counts extreme when spliced in.
INTERESTING = (
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\x00\x00\x00\x00",
    b"\xff\xff",
    b"\x7f\xff",
    b"\xff" * 10,
    b"\x80" * 10,
    b"\x01",
    b"\x00",
)

Edit = tuple[int, int, bytes]  # (position, bytes to drop there, bytes to insert)


class UnexpectedError(AssertionError):
    """A decoder raised something other than its protocol error."""


def request_cases() -> list[tuple[ApiSpec, int]]:
    """Every declared API at every version it declares."""
    return [
        (spec, version)
        for _, spec in sorted(REGISTRY.items())
        for version in range(spec.min_version, spec.max_version + 1)
    ]


@cache
def request_seed(spec: ApiSpec, version: int) -> bytes:
    """The encoding of the API's request with every field at its default."""
    return bytes(spec.encode_request(spec.request(), version).getvalue())


@cache
def request_frame_seed(spec: ApiSpec, version: int) -> bytes:
    """A whole request frame body (header and default request), without the size prefix."""
    out = bytearray()
    api.encode_request_header(
        out, api.RequestHeader(spec.key, version, 7, "fuzz"), spec.request_header_version(version)
    )
    return bytes(out) + request_seed(spec, version)


@cache
def batch_seeds() -> tuple[bytes, ...]:
    records = [
        ProducerRecord(b"key", b"value", headers=[("h", b"x")]),
        ProducerRecord(None, b"v2"),
    ]
    return tuple(
        build_batch(records, compression=codec, producer_id=5, producer_epoch=0, base_sequence=0)
        for codec in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD)
    )


def apply_edits(seed: bytes, edits: Sequence[Edit]) -> bytes:
    data = bytearray(seed)
    for position, drop, insert in edits:
        at = position % (len(data) + 1)
        data[at : at + drop] = insert
    return bytes(data)


def check_request(spec: ApiSpec, version: int, data: bytes) -> None:
    """Decode ``data`` as the request body; only DecodeError may come out."""
    try:
        spec.decode_request(memoryview(data), 0, version)
    except DecodeError:
        pass
    except Exception as exc:
        raise UnexpectedError(f"{spec.name} v{version} decoder raised {exc!r} for {data.hex()}") from exc


def check_request_frame(data: bytes) -> None:
    """Decode ``data`` as a whole request frame (header, then body) as the broker does."""
    view = memoryview(data)
    try:
        key, version, correlation_id = api.decode_request_header_prefix(view)
        spec = REGISTRY.get(key)
        if spec is None or not spec.min_version <= version <= spec.max_version:
            return
        _, pos = api.decode_request_header_rest(
            view, spec.request_header_version(version), key, version, correlation_id
        )
        spec.decode_request(view, pos, version)
    except DecodeError:
        pass
    except Exception as exc:
        raise UnexpectedError(f"request frame decoding raised {exc!r} for {data.hex()}") from exc


def check_batch(data: bytes) -> None:
    """Decode ``data`` as a record batch, and run the produce path's checks on it."""
    try:
        decode_batch(data, max_uncompressed=1 << 20)
    except (InvalidBatch, UnsupportedCompression):
        pass
    except Exception as exc:
        raise UnexpectedError(f"decode_batch raised {exc!r} for {data.hex()}") from exc
    try:
        header = validate_batch(data)
        check_batch_records(memoryview(data), header, 1 << 20)
    except (InvalidBatch, KafkaError):
        pass
    except Exception as exc:
        raise UnexpectedError(f"the produce checks raised {exc!r} for {data.hex()}") from exc
