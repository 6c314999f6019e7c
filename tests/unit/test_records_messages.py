"""``decode_messages``: the consumers' one-object-per-record decoder, and the message types.

Every field must come out exactly as ``decode_batch`` (checked against kafka-python in
test_records.py) reads it: long varints, headers, null and empty keys and values,
negative timestamp deltas, LogAppendTime, compression, control batches, damage.
"""

from __future__ import annotations

import pytest

from slipstream.client.consumer import Message
from slipstream.client.consumer_group import ConsumerMessage
from slipstream.client.fetcher import FetchedRecord
from slipstream.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from slipstream.protocol.record_batch import (
    CRC_OFFSET,
    InvalidBatch,
    compute_crc,
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
    _h, msgs = decode_messages(batch, FetchedRecord, "t", 0)
    assert [m.offset for m in msgs] == list(range(n))
    assert [m.value for m in msgs] == [b"%d" % i for i in range(n)]
    assert msgs[-1].timestamp == T0 + n - 1


def test_memoryview_input_and_message_types() -> None:
    batch = build_batch(MIXED[:2], base_offset=5)
    for cls in (Message, ConsumerMessage, FetchedRecord):
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
    c = ConsumerMessage("t", 1, 2, b"k", b"v", [("h", None)], 9)
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
