"""Record batch v2 encode/decode, cross-checked against kafka-python's implementation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from slipstream.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, UnsupportedCompression
from slipstream.protocol.record_batch import (
    CRC_OFFSET,
    InvalidBatch,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from slipstream.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    ProducerRecord,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
    iter_batches,
    iter_records,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
T0 = 1_700_000_000_000

Headers = list[tuple[str, bytes | None]]


def _as_tuples(records: list[Record]) -> list[tuple[bytes | None, bytes | None, Headers, int]]:
    return [(r.key, r.value, r.headers, r.timestamp) for r in records]


def _spec_tuples(
    specs: list[ProducerRecord],
) -> list[tuple[bytes | None, bytes | None, Headers, int]]:
    return [(p.key, p.value, list(p.headers), p.timestamp_ms) for p in specs]


MIXED = [
    ProducerRecord(b"k1", b"v1", timestamp_ms=T0 + 5),
    ProducerRecord(None, b"null key", timestamp_ms=T0),
    ProducerRecord(b"null value", None, timestamp_ms=T0 + 100_000),  # multi-byte delta
    ProducerRecord(None, None, timestamp_ms=T0 - 7),  # negative delta
    ProducerRecord(b"", b"", timestamp_ms=T0),  # empty is not null
    ProducerRecord(
        b"h",
        b"x" * 20_000,  # length beyond the cached 2-byte varints
        headers=[("trace-id", b"abc"), ("nil", None), ("empty", b""), ("ünïcode", b"\x00\xff")],
        timestamp_ms=T0 + 1,
    ),
]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec: int) -> None:
    batch = build_batch(MIXED, base_offset=1000, compression=codec, partition_leader_epoch=7)
    header = validate_batch(batch)  # CRC32C and length agree
    assert header.compression == codec
    assert header.base_offset == 1000
    assert header.record_count == len(MIXED)
    assert header.last_offset_delta == len(MIXED) - 1
    assert header.base_timestamp == T0 + 5  # the first record's, not the minimum
    assert header.max_timestamp == T0 + 100_000
    assert not header.is_transactional and not header.is_control
    decoded_header, records = decode_batch(batch)
    assert decoded_header == header
    assert _as_tuples(records) == _spec_tuples(MIXED)
    assert [r.offset for r in records] == list(range(1000, 1000 + len(MIXED)))
    assert all(r.timestamp_type == CREATE_TIME for r in records)
    assert all(r.leader_epoch == 7 and not r.is_control for r in records)
    assert all(r.control_type is None for r in records)


@pytest.mark.parametrize("codec", CODECS)
def test_many_records(codec: int) -> None:
    # 10k records push offset deltas past one and two varint bytes.
    specs = [
        ProducerRecord(f"key-{i}".encode(), f"value-{i}".encode() * (i % 7), timestamp_ms=T0 + i)
        for i in range(10_000)
    ]
    batch = build_batch(specs, compression=codec)
    validate_batch(batch)
    _, records = decode_batch(memoryview(batch))
    assert _as_tuples(records) == _spec_tuples(specs)
    assert records[-1].offset == 9999


def test_producer_fields_and_attributes() -> None:
    batch = build_batch(
        [ProducerRecord(b"k", b"v", timestamp_ms=T0)] * 3,
        base_offset=5,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
        is_transactional=True,
        partition_leader_epoch=2,
    )
    header = validate_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert header.last_sequence == 19
    assert header.is_transactional
    assert header.partition_leader_epoch == 2
    assert header.magic == 2


def test_no_timestamp_default() -> None:
    header, records = decode_batch(build_batch([ProducerRecord(b"k", b"v")]))
    assert header.base_timestamp == header.max_timestamp == NO_TIMESTAMP
    assert records[0].timestamp == NO_TIMESTAMP


def test_log_append_time() -> None:
    specs = [
        ProducerRecord(b"a", b"1", timestamp_ms=T0),
        ProducerRecord(b"b", b"2", timestamp_ms=T0 + 9),
    ]
    # Built that way by a client...
    _, records = decode_batch(build_batch(specs, timestamp_type=LOG_APPEND_TIME))
    assert all(r.timestamp_type == LOG_APPEND_TIME for r in records)
    assert [r.timestamp for r in records] == [T0 + 9, T0 + 9]
    # ...or stamped by the broker: every record then reads the broker's time.
    stamped = bytearray(build_batch(specs))
    set_log_append_time(stamped, T0 + 500)
    set_base_offset(stamped, 77)
    _, records = decode_batch(stamped)
    assert [(r.offset, r.timestamp) for r in records] == [(77, T0 + 500), (78, T0 + 500)]
    assert all(r.timestamp_type == LOG_APPEND_TIME for r in records)


def test_build_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
    with pytest.raises(UnsupportedCompression):
        build_batch([ProducerRecord(b"k", b"v")], compression=5)
    with pytest.raises(UnsupportedCompression):
        build_batch([ProducerRecord(b"k", b"v")], compression=9)


def test_accepts_any_record_like_object() -> None:
    class Spec:
        key = b"k"
        value = b"v"
        headers = (("a", b"b"),)
        timestamp_ms = T0

    _, records = decode_batch(build_batch([Spec()]))
    assert _as_tuples(records) == [(b"k", b"v", [("a", b"b")], T0)]


# -- damage


def test_corrupted_byte_fails_crc() -> None:
    batch = bytearray(build_batch(MIXED))
    batch[-3] ^= 0xFF
    with pytest.raises(InvalidBatch, match="CRC") as info:
        decode_batch(batch)
    assert info.value.corrupt


def _restamp(batch: bytearray) -> bytearray:
    from slipstream.protocol.record_batch import compute_crc

    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(memoryview(batch)))
    return batch


def test_record_count_larger_than_records() -> None:
    batch = bytearray(build_batch(MIXED[:2]))
    struct.pack_into(">i", batch, 57, 3)  # record_count
    with pytest.raises(InvalidBatch, match="ends inside a record"):
        decode_batch(_restamp(batch))


def test_bytes_after_the_records() -> None:
    batch = bytearray(build_batch(MIXED[:2]))
    struct.pack_into(">i", batch, 57, 1)
    with pytest.raises(InvalidBatch, match="bytes after"):
        decode_batch(_restamp(batch))


def test_record_length_lies() -> None:
    batch = bytearray(build_batch([ProducerRecord(b"k", b"v", timestamp_ms=0)]))
    batch[61] += 2  # zigzag length +1; the record's fields no longer add up
    with pytest.raises(InvalidBatch):
        decode_batch(_restamp(batch))
    # Without CRC checking the same structural checks still apply.
    with pytest.raises(InvalidBatch):
        decode_batch(batch, verify_crc=False)


def test_corrupt_compressed_section() -> None:
    batch = bytearray(build_batch(MIXED, compression=GZIP))
    batch[70:80] = b"\x00" * 10
    with pytest.raises(InvalidBatch, match="gzip") as info:
        decode_batch(_restamp(batch))
    assert info.value.corrupt


def test_wrong_size_or_magic() -> None:
    batch = build_batch(MIXED)
    with pytest.raises(InvalidBatch):
        decode_batch(batch + b"\x00")
    with pytest.raises(InvalidBatch):
        decode_batch(batch[:40], verify_crc=False)
    bad_magic = bytearray(batch)
    bad_magic[16] = 1
    with pytest.raises(InvalidBatch, match="magic"):
        decode_batch(bad_magic, verify_crc=False)


# -- concatenations (Fetch responses)


def _fetch_payload() -> tuple[bytes, list[ProducerRecord]]:
    first = [
        ProducerRecord(b"a", b"1", timestamp_ms=T0),
        ProducerRecord(b"b", b"2", timestamp_ms=T0),
    ]
    second = [ProducerRecord(b"c", b"3", timestamp_ms=T0)]
    payload = (
        build_batch(first, base_offset=0, producer_id=9, producer_epoch=0, is_transactional=True)
        + build_control_batch(
            CONTROL_COMMIT, producer_id=9, producer_epoch=0, timestamp_ms=T0, base_offset=2
        )
        + build_batch(second, base_offset=3, compression=ZSTD)
        + build_control_batch(
            CONTROL_ABORT,
            producer_id=9,
            producer_epoch=0,
            timestamp_ms=T0,
            base_offset=4,
            coordinator_epoch=12,
        )
    )
    return payload, first + second


def test_iter_records_skips_control_batches() -> None:
    payload, specs = _fetch_payload()
    records = list(iter_records(payload))
    assert _as_tuples(records) == _spec_tuples(specs)
    assert [r.offset for r in records] == [0, 1, 3]


def test_iter_records_with_control() -> None:
    payload, _ = _fetch_payload()
    records = list(iter_records(memoryview(payload), include_control=True))
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]
    markers = [r for r in records if r.is_control]
    assert [(m.offset, m.control_type) for m in markers] == [
        (2, CONTROL_COMMIT),
        (4, CONTROL_ABORT),
    ]
    assert markers[1].value == struct.pack(">hi", 0, 12)  # version, coordinator epoch


def test_control_batch_header() -> None:
    header = validate_batch(
        build_control_batch(CONTROL_COMMIT, producer_id=1, producer_epoch=2, timestamp_ms=T0)
    )
    assert header.is_control and header.is_transactional
    assert header.record_count == 1
    with pytest.raises(ValueError, match="control record type"):
        build_control_batch(7, producer_id=1, producer_epoch=2, timestamp_ms=T0)


def test_iter_batches_yields_control_batches_too() -> None:
    payload, _ = _fetch_payload()
    batches = list(iter_batches(payload))
    assert [(h.base_offset, h.is_control, len(rs)) for h, rs in batches] == [
        (0, False, 2),
        (2, True, 1),
        (3, False, 1),
        (4, True, 1),
    ]


def test_trailing_partial_batch_is_skipped() -> None:
    payload, _ = _fetch_payload()
    extra = build_batch([ProducerRecord(b"late", b"x" * 100, timestamp_ms=T0)], base_offset=5)
    # Cut the last batch anywhere: inside its size prefix, its header, or its records.
    for cut in (1, 11, 12, 40, 61, len(extra) - 1):
        records = list(iter_records(payload + extra[:cut]))
        assert [r.offset for r in records] == [0, 1, 3], cut
    assert [r.offset for r in iter_records(payload + extra)] == [0, 1, 3, 5]
    assert list(iter_records(b"")) == []


def test_impossible_batch_length_in_concatenation() -> None:
    batch = bytearray(build_batch(MIXED))
    struct.pack_into(">i", batch, 8, 10)  # shorter than the header itself
    with pytest.raises(InvalidBatch, match="impossible length"):
        list(iter_records(batch))


# -- cross-check with kafka-python, an independent implementation. kafka-python only
# handles the codecs whose Python modules are installed: gzip (stdlib) and none here;
# python-snappy, lz4 and zstandard are not installed, so snappy/lz4/zstd are not
# cross-checked this way (their round trips are covered above).

KP_CODECS = [NONE, GZIP]


def _kafka_python_build(specs: list[ProducerRecord], codec: int, base_offset: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, spec in enumerate(specs):
        assert builder.append(i, spec.timestamp_ms, spec.key, spec.value, list(spec.headers))
    batch = bytearray(builder.build())
    set_base_offset(batch, base_offset)
    return bytes(batch)


@pytest.mark.parametrize("codec", KP_CODECS)
def test_kafka_python_reads_ours(codec: int) -> None:
    batch = build_batch(MIXED, base_offset=42, compression=codec)
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert theirs.base_offset == 42
    assert theirs.first_timestamp == T0 + 5
    assert theirs.max_timestamp == T0 + 100_000
    decoded = [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in theirs]
    expected = [
        (42 + i, p.key, p.value, list(p.headers), p.timestamp_ms) for i, p in enumerate(MIXED)
    ]
    assert decoded == expected


@pytest.mark.parametrize("codec", KP_CODECS)
def test_we_read_kafka_pythons(codec: int) -> None:
    batch = _kafka_python_build(MIXED, codec, base_offset=42)
    header, records = decode_batch(batch)  # also checks their CRC
    assert header.compression == codec
    assert _as_tuples(records) == _spec_tuples(MIXED)
    assert [r.offset for r in records] == list(range(42, 42 + len(MIXED)))


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    # kafka-python writes partition leader epoch 0; with that, the encodings must agree.
    assert build_batch(MIXED, partition_leader_epoch=0) == _kafka_python_build(MIXED, NONE)


# -- properties

_headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=4)
_specs = st.lists(
    st.builds(
        ProducerRecord,
        key=st.none() | st.binary(max_size=100),
        value=st.none() | st.binary(max_size=3000),
        headers=_headers,
        timestamp_ms=st.integers(min_value=-1, max_value=2**62),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    specs=_specs,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(min_value=0, max_value=2**62),
)
def test_round_trip_property(specs: list[ProducerRecord], codec: int, base_offset: int) -> None:
    batch = build_batch(specs, base_offset=base_offset, compression=codec)
    header = validate_batch(batch)
    assert header.max_timestamp == max(p.timestamp_ms for p in specs)
    _, records = decode_batch(batch)
    assert _as_tuples(records) == _spec_tuples(specs)
    assert [r.offset for r in records] == [base_offset + i for i in range(len(specs))]
    assert list(iter_records(batch + batch[: len(batch) // 2])) == records


@settings(max_examples=60, deadline=None)
@given(specs=_specs, codec=st.sampled_from(KP_CODECS))
def test_kafka_python_agrees_property(specs: list[ProducerRecord], codec: int) -> None:
    _, records = decode_batch(_kafka_python_build(specs, codec))
    assert _as_tuples(records) == _spec_tuples(specs)
    theirs = DefaultRecordBatch(bytearray(build_batch(specs, compression=codec)))
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in theirs] == _spec_tuples(specs)
