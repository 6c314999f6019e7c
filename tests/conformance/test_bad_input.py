"""Bad input on raw sockets against a live broker process.

Each case gets the protocol's error, or that one connection is closed; after
each, a confluent-kafka client on other connections still produces and
consumes, and every message acknowledged earlier is still readable.

Requests are packed by hand (request header v1: api_key, api_version,
correlation_id, client_id); record batches come from kafka-python's
DefaultRecordBatchBuilder, an implementation independent of ours.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import zstandard
from conformance_helpers import (
    ck_consume,
    ck_create_topic,
    ck_produce,
    ck_watermarks,
    now_ms,
    verify_records,
)
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

pytestmark = pytest.mark.conformance

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
NONE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION, INVALID_RECORD = 0, 2, 10, 35, 87
INVALID_TOPIC_EXCEPTION = 17
MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes default
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # max.message.bytes default


# ---- raw protocol -----------------------------------------------------------------------


def kstr(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"",
            client_id: str = "bad-input") -> bytes:
    payload = struct.pack(">hhi", api_key, version, correlation_id) + kstr(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def connect(broker) -> socket.socket:
    s = socket.create_connection((broker.host, broker.port), timeout=5)
    s.settimeout(5)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_response(s: socket.socket, correlation_id: int) -> bytes:
    """One response frame (header v0); returns the body after the correlation id."""
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    frame = recv_exact(s, size)
    (cid,) = struct.unpack_from(">i", frame)
    assert cid == correlation_id, f"correlation id {cid}, expected {correlation_id}"
    return frame[4:]


def expect_closed(s: socket.socket, timeout: float = 5.0) -> bytes:
    """The broker closes this connection within ``timeout``; returns anything it sent first."""
    s.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return data
    except TimeoutError:
        pass
    raise AssertionError(f"connection still open after {timeout}s (received {data[:64]!r})")


def send_quietly(s: socket.socket, data: bytes) -> None:
    """Send, tolerating a broker that already closed the connection."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        s.sendall(data)


@dataclass
class ApiVersionsV0:
    error_code: int
    ranges: dict[int, tuple[int, int]]


def parse_api_versions_v0(body: bytes) -> ApiVersionsV0:
    error_code, n = struct.unpack_from(">hi", body)
    ranges = {}
    pos = 6
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", body, pos)
        ranges[k] = (lo, hi)
        pos += 6
    return ApiVersionsV0(error_code, ranges)


def batch(values: list[bytes], magic: int = 2, timestamp: int | None = None) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=MAX_REQUEST_BYTES)
    ts = timestamp or now_ms()
    for i, v in enumerate(values):
        b.append(i, ts, f"raw{i}".encode(), v, [])
    data = b.build()
    data[16] = magic  # offset 16: magic (not covered by the CRC, which starts at attributes)
    return data


def produce_v3(topic: str, partition: int, records: bytes, acks: int = -1) -> bytes:
    return (kstr(None) + struct.pack(">hi", acks, 10000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + bytes(records))


def parse_produce_v3(body: bytes) -> list[tuple[str, int, int, int]]:
    """[(topic, partition, error_code, base_offset)]"""
    out = []
    (n,) = struct.unpack_from(">i", body)
    pos = 4
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", body, pos)
        name = body[pos + 2:pos + 2 + ln].decode()
        pos += 2 + ln
        (m,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(m):
            p, err, base, _lat = struct.unpack_from(">ihqq", body, pos)
            pos += 22
            out.append((name, p, err, base))
    return out


def raw_produce(broker, topic: str, records: bytes, correlation_id: int = 7,
                sock: socket.socket | None = None) -> tuple[int, int]:
    s = sock or connect(broker)
    try:
        s.sendall(request(PRODUCE, 3, correlation_id, produce_v3(topic, 0, records)))
        ((name, p, err, base),) = parse_produce_v3(recv_response(s, correlation_id))
        assert (name, p) == (topic, 0)
        return err, base
    finally:
        if sock is None:
            s.close()


# ---- the observer -----------------------------------------------------------------------


@dataclass
class Health:
    """A confluent-kafka client on its own connections, and what it has had acked."""

    broker: object
    topic: str
    acks: dict[str, tuple[int, int]] = field(default_factory=dict)
    next_index: int = 0

    def check(self) -> None:
        b = self.broker
        assert b.alive(), f"broker process died:\n{b.log_tail()}"  # type: ignore[attr-defined]
        bootstrap = b.bootstrap  # type: ignore[attr-defined]
        i = self.next_index
        self.next_index += 3
        self.acks.update(ck_produce(bootstrap, self.topic, range(i, i + 3), timeout=15))
        records = ck_consume(bootstrap, self.topic, len(self.acks), timeout=15, drain=0.1)
        verify_records(records, range(self.next_index), acks=self.acks)


@pytest.fixture(scope="module")
def health(broker) -> Iterator[Health]:
    topic = f"bad-input-health-{int(time.time())}"
    ck_create_topic(broker.bootstrap, topic)
    h = Health(broker, topic)
    h.check()
    yield h


@pytest.fixture
def raw_topic(broker, topic_name) -> str:
    ck_create_topic(broker.bootstrap, topic_name, partitions=1)
    return topic_name


# ---- controls: the hand-made requests are right -------------------------------------------


def test_control_api_versions_v0(broker, health):
    with connect(broker) as s:
        s.sendall(request(API_VERSIONS, 0, 1))
        av = parse_api_versions_v0(recv_response(s, 1))
    assert av.error_code == NONE
    assert av.ranges[API_VERSIONS][0] == 0 and av.ranges[API_VERSIONS][1] >= 3
    lo, hi = av.ranges[PRODUCE]
    assert lo <= 3 <= hi
    health.check()


def test_control_produce_v3(broker, health, raw_topic):
    err, base = raw_produce(broker, raw_topic, batch([b"a", b"b"]))
    assert (err, base) == (NONE, 0)
    records = ck_consume(broker.bootstrap, raw_topic, 2)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, "raw0", "a"), (1, "raw1", "b")]
    health.check()


# ---- framing ------------------------------------------------------------------------------


def test_garbage_bytes(broker, health):
    with connect(broker) as s:
        send_quietly(s, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        expect_closed(s)
    with connect(broker) as s:
        send_quietly(s, struct.pack(">i", 16) + b"\xff" * 16)  # api key -1
        expect_closed(s)
    health.check()


def test_truncated_frame_then_close(broker, health):
    frame = request(API_VERSIONS, 0, 1)
    with connect(broker) as s:
        s.sendall(frame[: len(frame) - 3])
    with connect(broker) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
    health.check()


def test_stalled_partial_frame_does_not_block_others(broker, health):
    with connect(broker) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
        health.check()  # other connections are served meanwhile
        s.sendall(b"\x00" * 10)
    health.check()


def test_frame_length_over_max_request_size(broker, health):
    with connect(broker) as s:
        send_quietly(s, struct.pack(">i", MAX_REQUEST_BYTES + 1) + request(API_VERSIONS, 0, 1)[4:])
        expect_closed(s)
    with connect(broker) as s:
        send_quietly(s, struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64)
        expect_closed(s)
    health.check()


def test_negative_frame_length(broker, health):
    with connect(broker) as s:
        send_quietly(s, struct.pack(">i", -5) + b"\x00" * 16)
        expect_closed(s)
    health.check()


def test_truncated_request_body(broker, health, raw_topic):
    body = produce_v3(raw_topic, 0, batch([b"x"]))
    with connect(broker) as s:
        # A complete frame whose Produce body ends in the middle of the topic array.
        send_quietly(s, request(PRODUCE, 3, 9, body[:14]))
        expect_closed(s)
    with connect(broker) as s:
        # An array length far beyond the frame.
        send_quietly(s, request(PRODUCE, 3, 10, kstr(None) + struct.pack(">hii", -1, 1000, 10**6)))
        expect_closed(s)
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 0)
    health.check()


# ---- API keys and versions ------------------------------------------------------------------


def test_unknown_api_key(broker, health):
    with connect(broker) as s:
        send_quietly(s, request(9999, 0, 3))
        expect_closed(s)
    health.check()


def test_api_versions_unsupported_version(broker, health):
    """Kafka answers an unknown ApiVersions version with UNSUPPORTED_VERSION and a v0 body."""
    with connect(broker) as s:
        s.sendall(request(API_VERSIONS, 99, 4))
        av = parse_api_versions_v0(recv_response(s, 4))
        assert av.error_code == UNSUPPORTED_VERSION
        assert API_VERSIONS in av.ranges and av.ranges[API_VERSIONS][1] >= 3, av.ranges
        # The client retries with a version it knows, on the same connection.
        s.sendall(request(API_VERSIONS, 0, 5))
        assert parse_api_versions_v0(recv_response(s, 5)).error_code == NONE
    health.check()


@pytest.mark.parametrize(("api_key", "version"), [(METADATA, 99), (PRODUCE, 99)])
def test_unsupported_version_of_other_api(broker, health, api_key, version):
    with connect(broker) as s:
        send_quietly(s, request(api_key, version, 6, b"\x00" * 16))
        expect_closed(s)
    health.check()


# ---- record batches -----------------------------------------------------------------------


def test_produce_bad_crc(broker, health, raw_topic):
    data = batch([b"hello", b"world"])
    data[-1] ^= 0xFF  # flip the last byte of the last record: the CRC no longer matches
    with connect(broker) as s:
        err, _ = raw_produce(broker, raw_topic, data, sock=s)
        assert err == CORRUPT_MESSAGE
        # Same connection keeps working: a per-partition error, not a protocol error.
        err, base = raw_produce(broker, raw_topic, batch([b"ok"]), correlation_id=8, sock=s)
        assert (err, base) == (NONE, 0)
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 1)
    health.check()


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_produce_bad_magic(broker, health, raw_topic, magic):
    err, _ = raw_produce(broker, raw_topic, batch([b"m"], magic=magic))
    assert err in (INVALID_RECORD, CORRUPT_MESSAGE), err
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 0)
    health.check()


def test_produce_batch_length_inconsistent(broker, health, raw_topic):
    data = batch([b"a", b"b", b"c"])
    struct.pack_into(">i", data, 8, len(data))  # batchLength claims more bytes than present
    err, _ = raw_produce(broker, raw_topic, data)
    assert err in (CORRUPT_MESSAGE, INVALID_RECORD), err
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 0)
    health.check()


def with_crc(data: bytearray) -> bytearray:
    """Recompute the batch's length and CRC32C (bytes 21..end), so only deeper checks see damage."""
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return data


def test_produce_record_count_lie_is_refused_and_later_records_are_delivered(broker, health, raw_topic):
    data = batch([b"only"])
    struct.pack_into(">i", data, 23, 2**31 - 2)  # last offset delta
    struct.pack_into(">i", data, 57, 2**31 - 1)  # record count
    data = with_crc(data)
    assert len(data) < 80
    err, _ = raw_produce(broker, raw_topic, data)
    assert err == INVALID_RECORD
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 0)  # the log end did not move
    err, base = raw_produce(broker, raw_topic, batch([b"good"]), correlation_id=8)
    assert (err, base) == (NONE, 0)
    records = ck_consume(broker.bootstrap, raw_topic, 1)
    assert [(r.offset, r.value) for r in records] == [(0, "good")]
    health.check()


def test_produce_record_with_endless_varint_is_refused(broker, health, raw_topic):
    data = batch([b"x"])
    data = with_crc(data[:61] + b"\xff" * 24)
    err, _ = raw_produce(broker, raw_topic, data)
    assert err == INVALID_RECORD
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 0)
    health.check()


def test_produce_zstd_bomb_is_refused_without_inflating(broker, health, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, partitions=1, config={"cleanup.policy": "compact"})
    data = batch([b"x"])
    bomb = zstandard.ZstdCompressor().compress(bytes(256 << 20))  # 256 MiB of zeros
    data = data[:61] + bomb
    struct.pack_into(">h", data, 21, 4)  # attributes: zstd
    err, _ = raw_produce(broker, topic_name, with_crc(data))
    assert err == MESSAGE_TOO_LARGE
    assert ck_watermarks(broker.bootstrap, topic_name)[0] == (0, 0)
    health.check()


def test_clients_cannot_produce_to_the_offsets_topic(broker, health):
    with connect(broker) as s:
        s.sendall(request(PRODUCE, 3, 5, produce_v3("__consumer_offsets", 0, batch([b"forged"]))))
        ((_name, _p, err, _base),) = parse_produce_v3(recv_response(s, 5))
    assert err == INVALID_TOPIC_EXCEPTION
    health.check()


def test_record_batch_over_default_max_message_bytes(broker, health, raw_topic):
    data = batch([b"\x00" * (DEFAULT_MAX_MESSAGE_BYTES + 1000)])
    err, _ = raw_produce(broker, raw_topic, data)
    assert err == MESSAGE_TOO_LARGE
    assert ck_watermarks(broker.bootstrap, raw_topic)[0] == (0, 0)
    health.check()


def test_record_batch_over_topic_max_message_bytes(broker, health, topic_name):
    ck_create_topic(broker.bootstrap, topic_name, partitions=1, config={"max.message.bytes": "2000"})
    err, _ = raw_produce(broker, topic_name, batch([b"\x00" * 5000]))
    assert err == MESSAGE_TOO_LARGE
    err, base = raw_produce(broker, topic_name, batch([b"\x00" * 500]), correlation_id=9)
    assert (err, base) == (NONE, 0)
    health.check()


# ---- many at once -------------------------------------------------------------------------


def test_many_bad_connections_at_once(broker, health):
    payloads = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
        struct.pack(">i", MAX_REQUEST_BYTES * 2),
        request(9999, 0, 1),
        request(METADATA, 99, 1),
        struct.pack(">i", 12) + b"\x00",
    ]
    socks = [connect(broker) for _ in range(20)]
    try:
        for i, s in enumerate(socks):
            send_quietly(s, payloads[i % len(payloads)])
        health.check()
    finally:
        for s in socks:
            s.close()
    health.check()


def test_no_traceback_in_broker_log(broker, health):
    """Bad input is answered or logged with a reason, never with a crash trace."""
    health.check()
    log = broker.log_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 500:][:4000]
