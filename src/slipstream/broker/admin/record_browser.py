"""``/api/topics/<name>/records?partition=P&offset=O&limit=N``: a page of a partition's
records for the console's record browser, keys, values and headers each given as text
(when UTF-8), hex and size, so the page can show text, JSON or hex.

Bounded on every side: at most ``MAX_LIMIT`` records and ``MAX_READ_BYTES`` of log per
request, each field's text and hex cut at ``MAX_FIELD_BYTES`` (``truncated`` says so).
Without ``offset`` the page is the partition's last ``limit`` records. The log as stored
(read_uncommitted: aborted transactions' records show too); control records
(transaction markers) are left out, their offsets still count.
"""

from __future__ import annotations

from typing import Any

from ...log.api import OffsetOutOfRange
from ...protocol.record_batch import InvalidBatch
from ...protocol.records import iter_batches
from ..state import BrokerState

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_READ_BYTES = 1 << 20
MAX_FIELD_BYTES = 4096
RECORDS_SUFFIX = "/records"


class BadRecordsQuery(ValueError):
    pass


def _int_param(query: dict[str, list[str]], name: str, default: int | None) -> int | None:
    values = query.get(name)
    if not values:
        return default
    try:
        value = int(values[-1])
    except ValueError:
        raise BadRecordsQuery(f"{name} must be an integer, not {values[-1]!r}") from None
    if value < 0:
        raise BadRecordsQuery(f"{name} must not be negative")
    return value


def field_document(data: bytes | None) -> dict[str, Any] | None:
    """A key, value or header value as the browser shows it; None for a null field."""
    if data is None:
        return None
    shown = bytes(data[:MAX_FIELD_BYTES])
    try:
        text: str | None = shown.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Text cut in the middle of a character by the bound is still text.
        cut_mid_character = len(data) > MAX_FIELD_BYTES and exc.reason == "unexpected end of data"
        text = shown[: exc.start].decode("utf-8") if cut_mid_character else None
    return {"size": len(data), "text": text, "hex": shown.hex(), "truncated": len(data) > MAX_FIELD_BYTES}


def records_document(state: BrokerState, topic: str, query: dict[str, list[str]]) -> dict[str, Any] | None:
    """The page, or None when the topic does not exist. Raises BadRecordsQuery."""
    found = state.topics.get(topic)
    if found is None:
        return None
    partition = _int_param(query, "partition", 0)
    assert partition is not None
    if partition >= len(found.partitions):
        raise BadRecordsQuery(f"topic {topic!r} has no partition {partition}")
    limit = _int_param(query, "limit", DEFAULT_LIMIT)
    assert limit is not None
    limit = max(1, min(limit, MAX_LIMIT))
    plog = found.partitions[partition]
    start, end = plog.log_start_offset, plog.log_end_offset
    offset = _int_param(query, "offset", None)
    if offset is None:
        offset = max(start, end - limit)
    offset = min(max(offset, start), end)
    records: list[dict[str, Any]] = []
    next_offset = offset
    position = offset
    read_bytes = 0
    while len(records) < limit and position < end and read_bytes < MAX_READ_BYTES:
        try:
            read = plog.read(position, MAX_READ_BYTES)
        except OffsetOutOfRange:  # retention moved the start meanwhile
            break
        if not read.chunks:
            break
        read_bytes += read.size
        advanced = position
        try:
            for chunk in read.chunks:
                for header, batch in iter_batches(chunk):
                    # The batch's end, not its last record's: compaction may have removed the tail.
                    advanced = max(advanced, header.next_offset)
                    if header.is_control:
                        continue
                    for record in batch:
                        if record.offset < offset or len(records) >= limit:
                            continue
                        records.append(_record_document(record.offset, record.timestamp, record.key, record.value, record.headers))
                        next_offset = record.offset + 1
        except InvalidBatch as exc:
            raise BadRecordsQuery(f"cannot decode the batch at offset {position}: {exc}") from None
        if advanced <= position:
            break  # nothing decodable past here
        position = advanced
    if len(records) < limit:
        next_offset = min(position, end)  # everything up to here was read (control batches too)
    return {
        "topic": topic,
        "partition": partition,
        "log_start_offset": start,
        "log_end_offset": end,
        "offset": offset,
        "next_offset": max(next_offset, offset),
        "records": records,
    }


def _record_document(
    offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
) -> dict[str, Any]:
    return {
        "offset": offset,
        "timestamp": timestamp,
        "key": field_document(key),
        "value": field_document(value),
        "headers": [{"name": name, "value": field_document(data)} for name, data in headers],
    }
