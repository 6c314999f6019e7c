"""``decode_messages``: the consumers' one-object-per-record decoder, and the message types.

Every field must come out exactly as ``decode_batch`` (checked against kafka-python in
test_records.py) reads it: long varints, headers, null and empty keys and values,
negative timestamp deltas, LogAppendTime, compression, control batches, damage.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from slipstream.client.consumer_messages import ConsumerMessage, Message
from slipstream.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from slipstream.protocol.record_batch import (
    CRC_OFFSET,
    InvalidBatch,
    compute_crc,
    set_base_offset,
    set_log_append_time,
)
from slipstream.protocol.records import (
    CONTROL_COMMIT,
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_HEADERS,
    MessageFields,
    ProducerRecord,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_messages,
)

T0 = 1_700_000_000_000


class OtherMessage(MessageFields):
    """The decoder builds any MessageFields subclass, whatever its constructor."""

    __slots__ = ()

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

MIXED = [
    ProducerRecord(b"k1", b"v1", timestamp_ms=T0 + 5),
    ProducerRecord(None, b"null key", timestamp_ms=T0),
    ProducerRecord(b"null value", None, timestamp_ms=T0 + 100_000),  # 3-byte ts delta
    ProducerRecord(None, None, timestamp_ms=T0 - 7),  # negative delta
    ProducerRecord(b"", b"", timestamp_ms=T0),  # empty is not null
    ProducerRecord(b"K" * 10_000, b"x" * 20_000, timestamp_ms=T0 - 9_000_000),  # 3-byte lengths
    ProducerRecord(
        b"h",
        b"v",
        headers=[("trace-id", b"abc"), ("nil", None), ("empty", b""), ("ünïcode", b"\x00\xff")],
        timestamp_ms=T0 + 1,
    ),
    ProducerRecord(b"\x01", b"\x00", timestamp_ms=T0),  # key byte 0x01 is not a null marker
]


def _expected(batch: bytes, topic: str, partition: int) -> list[tuple[object, ...]]:
    _h, records = decode_batch(batch)
    return [
        (
            topic,
            partition,
            r.offset,
            r.key,
            r.value,
            r.timestamp,
            r.headers,
            r.timestamp_type,
            r.leader_epoch,
        )
        for r in records
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_same_fields_as_decode_batch(codec: int) -> None:
    batch = build_batch(MIXED, base_offset=1234, compression=codec, partition_leader_epoch=7)
    header, msgs = decode_messages(batch, Message, "orders", 3)
    assert header.base_offset == 1234 and header.record_count == len(MIXED)
    assert all(type(m) is Message for m in msgs)
    assert [tuple(m) for m in msgs] == _expected(batch, "orders", 3)
    assert [m.offset for m in msgs] == [1234 + i for i in range(len(MIXED))]
    assert msgs[1].key is None and msgs[2].value is None and msgs[4].key == b"" == msgs[4].value
    assert msgs[3].timestamp == T0 - 7 and msgs[2].timestamp == T0 + 100_000
    assert msgs[5].key == b"K" * 10_000 and msgs[5].value == b"x" * 20_000
    assert msgs[6].headers == [("trace-id", b"abc"), ("nil", None), ("empty", b""), ("ünïcode", b"\x00\xff")]
    assert msgs[0].headers == [] and isinstance(msgs[0].headers, list)
    assert {m.leader_epoch for m in msgs} == {7} and {m.timestamp_type for m in msgs} == {CREATE_TIME}


def test_offset_deltas_beyond_two_byte_varints() -> None:
    n = 9000  # zigzag(8192) needs three varint bytes
    batch = build_batch([ProducerRecord(None, b"%d" % i, timestamp_ms=T0 + i) for i in range(n)])
    _h, msgs = decode_messages(batch, OtherMessage, "t", 0)
    assert [m.offset for m in msgs] == list(range(n))
    assert [m.value for m in msgs] == [b"%d" % i for i in range(n)]
    assert msgs[-1].timestamp == T0 + n - 1


def test_memoryview_input_and_message_types() -> None:
    batch = build_batch(MIXED[:2], base_offset=5)
    for cls in (Message, ConsumerMessage, OtherMessage):
        _h, msgs = decode_messages(memoryview(batch), cls, "t", 1)
        assert [type(m) for m in msgs] == [cls, cls]
        assert [tuple(m) for m in msgs] == _expected(batch, "t", 1)


def test_log_append_time_uses_the_max_timestamp() -> None:
    batch = bytearray(build_batch(MIXED[:3]))
    set_log_append_time(batch, T0 + 777)
    _h, msgs = decode_messages(bytes(batch), Message, "t", 0)
    assert {(m.timestamp, m.timestamp_type) for m in msgs} == {(T0 + 777, LOG_APPEND_TIME)}


def test_control_batch_decodes() -> None:
    batch = build_control_batch(CONTROL_COMMIT, producer_id=3, producer_epoch=0, timestamp_ms=T0, base_offset=9)
    header, msgs = decode_messages(batch, Message, "t", 0)
    assert header.is_control and [m.offset for m in msgs] == [9]


def test_damage_is_detected() -> None:
    batch = bytearray(build_batch(MIXED))
    batch[-3] ^= 0xFF
    with pytest.raises(InvalidBatch, match="CRC32C"):
        decode_messages(bytes(batch), Message, "t", 0)
    good = build_batch(MIXED[:2])
    broken = bytearray(good)
    broken[CRC_OFFSET] ^= 1
    # Without CRC checking the records still parse (the CRC field itself was changed).
    _h, msgs = decode_messages(bytes(broken), Message, "t", 0, verify_crc=False)
    assert len(msgs) == 2
    with pytest.raises(InvalidBatch):
        decode_messages(good[:-1], Message, "t", 0)


def test_same_errors_as_decode_batch_for_malformed_records() -> None:
    batch = bytearray(build_batch([ProducerRecord(None, b"abc", timestamp_ms=T0)]))
    # The record's length varint (first byte of the records section) claims more bytes.
    batch[61] += 2
    batch[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(memoryview(batch)).to_bytes(4, "big")
    with pytest.raises(InvalidBatch) as theirs:
        decode_batch(bytes(batch))
    with pytest.raises(InvalidBatch) as ours:
        decode_messages(bytes(batch), Message, "t", 0)
    assert str(ours.value) == str(theirs.value)


def test_message_constructors_keep_their_public_field_order() -> None:
    m = Message("t", 1, 2, b"k", b"v", 3)
    assert (m.topic, m.partition, m.offset, m.key, m.value, m.timestamp) == ("t", 1, 2, b"k", b"v", 3)
    assert (m.headers, m.timestamp_type, m.leader_epoch) == ([], 0, -1)
    assert Message("t", 1, 2, None, None, 3, [("h", b"x")], 1, 5).headers == [("h", b"x")]
    c = ConsumerMessage("t", 1, 2, b"k", b"v", 9, [("h", None)])
    assert (c.headers, c.timestamp, c.timestamp_type, c.leader_epoch) == ([("h", None)], 9, 0, -1)
    assert ConsumerMessage("t", 1, 2, None, None).timestamp == -1
    assert isinstance(m, MessageFields) and isinstance(c, MessageFields)
    assert m == Message("t", 1, 2, b"k", b"v", 3) and m != Message("t", 1, 3, b"k", b"v", 3)
    assert m._replace(offset=7).offset == 7 and type(m._replace(offset=7)) is Message
    assert repr(m).startswith("Message(topic='t', partition=1, offset=2")
    with pytest.raises(AttributeError):
        m.value = b"other"  # type: ignore[misc]


def test_empty_headers_are_one_shared_read_only_list() -> None:
    batch = build_batch(MIXED, base_offset=0)
    _h, msgs = decode_messages(batch, Message, "t", 0)
    empty = [m.headers for m in msgs if not m.headers]
    assert len(empty) == len(MIXED) - 1 and all(h is NO_HEADERS for h in empty)
    assert NO_HEADERS == [] and not NO_HEADERS and repr(NO_HEADERS) == "[]"
    for mutate in (
        lambda h: h.append(("k", None)),
        lambda h: h.extend([("k", None)]),
        lambda h: h.insert(0, ("k", None)),
        lambda h: h.__setitem__(slice(0, 0), [("k", None)]),
        lambda h: h.__iadd__([("k", None)]),
        lambda h: h.pop(),
        lambda h: h.clear(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate(msgs[0].headers)
    assert NO_HEADERS == []
    copied = list(msgs[0].headers)
    copied.append(("k", None))  # a copy is an ordinary list
    # decode_batch's Records are mutable dataclasses: each gets its own list.
    _h, records = decode_batch(batch)
    records[0].headers.append(("k", b"v"))
    assert records[1].headers == [] and NO_HEADERS == []
    # Messages made by hand get their own list too.
    mine = Message("t", 0, 0, None, None, 0)
    mine.headers.append(("k", None))
    assert Message("t", 0, 0, None, None, 0).headers == []


# ------------------------------------------------- fast paths, checked against kafka-python

Headers = list[tuple[str, bytes | None]]


def _kafka_python_fields(batch: bytes, topic: str, partition: int) -> list[tuple[object, ...]]:
    theirs = DefaultRecordBatch(bytearray(batch))
    ts_type = LOG_APPEND_TIME if theirs.timestamp_type else CREATE_TIME
    epoch = int.from_bytes(batch[12:16], "big", signed=True)
    return [
        (topic, partition, r.offset, r.key, r.value, r.timestamp, list(r.headers), ts_type, epoch)
        for r in theirs
    ]


def _kafka_python_build(
    entries: list[tuple[int, int, bytes | None, bytes | None, Headers]],
) -> bytes:
    """A batch written by kafka-python: (offset, timestamp, key, value, headers) each."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=NONE,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset, ts, key, value, headers in entries:
        assert builder.append(offset, ts, key, value, headers)
    return bytes(builder.build())


def test_varint_width_boundaries_match_kafka_python() -> None:
    # Lengths and timestamp deltas either side of the 1/2-byte (64) and 2/3-byte (8192)
    # zigzag varint boundaries, positive and negative.
    sizes = [0, 1, 63, 64, 65, 127, 128, 8191, 8192, 8193, 16383, 16384]
    deltas = [0, 63, 64, -64, -65, 8191, 8192, -8192, -8193, 1 << 40, -(1 << 40)]
    records = [
        ProducerRecord(b"k" * size, b"v" * sizes[-1 - i], timestamp_ms=T0 + deltas[i % len(deltas)])
        for i, size in enumerate(sizes)
    ]
    for codec in (NONE, GZIP):
        batch = build_batch(records, base_offset=77, compression=codec, partition_leader_epoch=2)
        _h, msgs = decode_messages(batch, Message, "t", 4)
        assert [tuple(m) for m in msgs] == _kafka_python_fields(batch, "t", 4)
        assert [len(m.key or b"") for m in msgs] == sizes


def test_offset_gaps_of_a_compacted_batch() -> None:
    # Compaction leaves offset deltas that are not the record's index, in any varint width.
    offsets = [0, 1, 5, 6, 63, 64, 200, 8191, 8192, 10_000, 70_000, 70_001]
    batch = _kafka_python_build([(o, T0 + o, b"%d" % o, b"v", []) for o in offsets])
    batch_at = bytearray(batch)
    set_base_offset(batch_at, 1_000_000)
    for data, base in ((batch, 0), (bytes(batch_at), 1_000_000)):
        _h, msgs = decode_messages(data, ConsumerMessage, "t", 0)
        assert [m.offset for m in msgs] == [base + o for o in offsets]
        assert [m.key for m in msgs] == [b"%d" % o for o in offsets]
        assert [m.timestamp for m in msgs] == [T0 + o for o in offsets]
        assert [tuple(m) for m in msgs] == _kafka_python_fields(data, "t", 0)
        assert [r.offset for r in decode_batch(data)[1]] == [base + o for o in offsets]
    # The first record need not be at delta 0 either.
    batch = _kafka_python_build([(3, T0, None, b"a", []), (4, T0, None, b"b", [])])
    assert [m.offset for m in decode_messages(batch, Message, "t", 0)[1]] == [3, 4]


@pytest.mark.parametrize("with_headers", [[0], [2], [0, 2], [0, 1, 2], [1]])
def test_headers_on_some_records(with_headers: list[int]) -> None:
    hdrs: Headers = [("a", b"1"), ("b", None)]
    def headers(i: int) -> Headers:
        return hdrs if i in with_headers else []

    batch = build_batch(
        [ProducerRecord(b"k", b"v%d" % i, headers=headers(i), timestamp_ms=T0 + i) for i in range(3)]
    )
    theirs = _kafka_python_build([(i, T0 + i, b"k", b"v%d" % i, headers(i)) for i in range(3)])
    for data in (batch, theirs):
        _h, msgs = decode_messages(data, Message, "t", 0)
        assert [m.headers for m in msgs] == [headers(i) for i in range(3)]
        assert all((m.headers is NO_HEADERS) == (i not in with_headers) for i, m in enumerate(msgs))
        assert [tuple(m) for m in msgs] == _kafka_python_fields(data, "t", 0)
    # Each record with headers has its own list.
    if len(with_headers) > 1:
        _h, msgs = decode_messages(batch, Message, "t", 0)
        assert msgs[with_headers[0]].headers is not msgs[with_headers[1]].headers


def test_log_append_time_with_headers_gaps_and_compression() -> None:
    batch = bytearray(
        build_batch(
            [
                ProducerRecord(b"k", b"v", headers=[("h", b"x")], timestamp_ms=T0 - 5),
                ProducerRecord(None, b"w", timestamp_ms=T0 + 9_000_000),
            ],
            compression=ZSTD,
            base_offset=10,
        )
    )
    set_log_append_time(batch, T0 + 1)
    _h, msgs = decode_messages(bytes(batch), Message, "t", 0)
    assert [tuple(m) for m in msgs] == [
        ("t", 0, 10, b"k", b"v", T0 + 1, [("h", b"x")], LOG_APPEND_TIME, -1),
        ("t", 0, 11, None, b"w", T0 + 1, [], LOG_APPEND_TIME, -1),
    ]


def _with_crc(batch: bytearray) -> bytes:
    batch[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(memoryview(batch)).to_bytes(4, "big")
    return bytes(batch)


def test_any_negative_key_or_value_length_is_null() -> None:
    # Lengths other than -1 below zero (zigzag 3 = -2) also read as null, as before.
    batch = bytearray(build_batch([ProducerRecord(None, None, timestamp_ms=T0)]))
    # record: length, attributes, ts delta, offset delta, key length (61 + 4), value length
    assert batch[65] == batch[66] == 1
    batch[65] = batch[66] = 3
    _h, msgs = decode_messages(_with_crc(batch), Message, "t", 0)
    assert (msgs[0].key, msgs[0].value) == (None, None)
    _h, records = decode_batch(_with_crc(batch))
    assert (records[0].key, records[0].value) == (None, None)


def test_batch_ending_inside_a_two_byte_varint() -> None:
    # The record's length is a 2-byte varint; the batch is cut right after its first byte.
    record_batch = bytearray(build_batch([ProducerRecord(None, b"x" * 100, timestamp_ms=T0)]))
    assert record_batch[61] >= 0x80
    cut = bytearray(record_batch[:62])
    cut[8:12] = (len(cut) - 12).to_bytes(4, "big")
    with pytest.raises(InvalidBatch, match="ends inside a record") as exc:
        decode_messages(_with_crc(cut), Message, "t", 0)
    assert exc.value.corrupt
    # A varint whose second byte continues too is read as a long varint, not a short one.
    long_key = build_batch([ProducerRecord(b"K" * 10_000, None, timestamp_ms=T0)])
    _h, msgs = decode_messages(long_key, Message, "t", 0)
    assert msgs[0].key == b"K" * 10_000 and msgs[0].value is None
