"""Check the framing of a batch's records without building them (the broker's produce check).

A batch header says how many records follow; what follows is client bytes. Before a
batch is stored, every record must frame exactly as Kafka's reader would take it:
each varint ends within the record, each length stays inside the record, the header
count is not negative, the fields fill the declared record length exactly, and the
batch holds exactly ``record_count`` records with nothing after them. A hostile
count (2^31-1 records in 70 bytes) fails as soon as the bytes run out, so the work is
bounded by the batch's size, never by what its header claims.

Errors are ``InvalidBatch`` (INVALID_RECORD), as Kafka answers InvalidRecordException.

The record layout is in ``records.py``'s docstring. Its decoder walks the same fields
but keeps keys and values; this walk keeps nothing (the produce path's cost), so the
two loops stay separate and share only the varint tables (``varint_tables.py``).
"""

from __future__ import annotations

from .record_batch import InvalidBatch
from .varint_tables import UNZIGZAG, UNZIGZAG_2

# A varint (int32) or varlong (int64) spans at most 5 or 10 bytes.
_MAX_VARLONG_BYTES = 10


def _long_varint(data: bytes | bytearray, pos: int) -> tuple[int, int]:
    """A zigzag varint of two or more bytes (the walk inlines the one-byte case)."""
    raw = 0
    shift = 0
    for pos in range(pos, pos + _MAX_VARLONG_BYTES):  # noqa: B020 - pos continues after
        byte = data[pos]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + 1
        shift += 7
    raise InvalidBatch("a record varint is longer than 10 bytes")


def check_records(data: bytes | bytearray, pos: int, count: int, where: str) -> list[int]:
    """Walk ``count`` records in ``data[pos:]``; return the indices of records with a null key.

    ``where`` names the batch in error messages. Raises InvalidBatch on any framing fault.
    """
    # Positions only grow (negative lengths mean null and move nothing), so a field read
    # past its record's end shows as ``pos != stop`` after the record, and past the
    # data's end as IndexError. This loop runs for every produced record: one- and
    # two-byte varints are read inline through the tables, longer ones by a call.
    end = len(data)
    keyless: list[int] = []
    long_varint = _long_varint
    unzz = UNZIGZAG
    unzz2 = UNZIGZAG_2
    index = 0
    try:
        for index in range(count):
            if pos >= end:
                raise InvalidBatch(f"{where} declares {count} records but holds only {index}")
            b = data[pos]
            if b < 0x80:
                length = unzz[b]
                pos += 1
            else:
                v = unzz2[b + data[pos + 1] * 0x80]
                if v is None:
                    length, pos = long_varint(data, pos)
                else:
                    length = v
                    pos += 2
            stop = pos + length
            if length < 1 or stop > end:
                raise InvalidBatch(f"{where}: record {index} declares {length} bytes, outside the batch")
            # attributes (unused in v2), then the timestamp and offset deltas: skipped over
            pos += 1
            if data[pos] < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                pos += 2
            else:
                pos = long_varint(data, pos)[1]
            if data[pos] < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                pos += 2
            else:
                pos = long_varint(data, pos)[1]
            b = data[pos]
            if b == 1:  # zigzag -1: null key
                keyless.append(index)
                pos += 1
            else:
                if b < 0x80:
                    n = unzz[b]
                    pos += 1
                else:
                    v = unzz2[b + data[pos + 1] * 0x80]
                    if v is None:
                        n, pos = long_varint(data, pos)
                    else:
                        n = v
                        pos += 2
                if n < 0:
                    keyless.append(index)
                else:
                    pos += n
            b = data[pos]
            if b < 0x80:
                n = unzz[b]
                pos += 1
            else:
                v = unzz2[b + data[pos + 1] * 0x80]
                if v is None:
                    n, pos = long_varint(data, pos)
                else:
                    n = v
                    pos += 2
            if n > 0:
                pos += n
            if data[pos] == 0:
                pos += 1
            else:
                pos = _check_headers(data, pos, stop, f"{where}: record {index}")
            if pos != stop:
                raise InvalidBatch(
                    f"{where}: record {index} declares {length} bytes but its fields take "
                    f"{length + pos - stop}"
                )
    except IndexError:
        raise InvalidBatch(f"{where} ends inside record {index}") from None
    if pos != end:
        raise InvalidBatch(f"{where} has {end - pos} bytes after its {count} records")
    return keyless


def _check_headers(data: bytes | bytearray, pos: int, stop: int, where: str) -> int:
    headers, pos = _long_varint(data, pos)
    if headers < 0 or headers > stop - pos:
        raise InvalidBatch(f"{where} has an invalid header count {headers}")
    for _ in range(headers):
        name_length, pos = _long_varint(data, pos)
        if name_length < 0:
            raise InvalidBatch(f"{where} has a header with a null key")
        pos += name_length
        value_length, pos = _long_varint(data, pos)
        if value_length > 0:
            pos += value_length
    return pos
