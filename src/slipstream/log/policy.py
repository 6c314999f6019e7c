"""When to roll a segment and which segments retention removes.

Pure decisions over segment statistics, shared by the memory and disk logs so both
behave identically (the conformance suite checks exact segment-level outcomes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from slipstream.log.api import LogConfig

INT32_MAX = (1 << 31) - 1


class SegmentStats(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def first_append_ms(self) -> int: ...
    @property
    def last_append_ms(self) -> int: ...


def needs_roll(
    config: LogConfig,
    active: SegmentStats,
    *,
    batch_size: int,
    base_offset: int,
    last_offset: int,
    now_ms: int | None,
) -> bool:
    """Whether a batch must go to a new segment instead of the (non-empty) active one.

    Reasons: size (segment_bytes, capped so positions fit an int32), age
    (segment_ms since the segment's first append), an offset jump (every segment
    holds contiguous offsets, which lets recovery check each batch's base offset), or
    a relative offset that would not fit the index's int32.
    """
    if active.size == 0:
        return False
    if base_offset != active.next_offset:
        return True
    if active.size + batch_size > min(config.segment_bytes, INT32_MAX):
        return True
    if last_offset - active.base_offset > INT32_MAX:
        return True
    return (
        now_ms is not None
        and active.first_append_ms >= 0
        and now_ms - active.first_append_ms > config.segment_ms
    )


def _largest_timestamp(segment: SegmentStats) -> int:
    # Kafka falls back to the file's modification time when batches carry no timestamp.
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    return segment.last_append_ms


def retention_count(config: LogConfig, segments: Sequence[SegmentStats], now_ms: int) -> int:
    """How many leading segments retention deletes (time first, then size, as Kafka).

    Deletion stops at the first segment that must stay. The last segment counts only
    when it is non-empty; the caller rolls a fresh one before deleting it.
    """
    count = 0
    last = len(segments) - 1

    def deletable_empty(i: int) -> bool:
        return segments[i].size == 0 and i != last

    if config.retention_ms >= 0:
        while count <= last:
            segment = segments[count]
            if segment.size == 0:
                if count == last:
                    break
                count += 1
                continue
            largest = _largest_timestamp(segment)
            if largest < 0 or now_ms - largest <= config.retention_ms:
                break
            count += 1
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments[count:]) - config.retention_bytes
        while count <= last:
            segment = segments[count]
            if deletable_empty(count):
                count += 1
                continue
            if segment.size == 0 or excess < segment.size:
                break
            excess -= segment.size
            count += 1
    return count


def below_log_start_count(segments: Sequence[SegmentStats], log_start_offset: int) -> int:
    """How many leading segments hold only offsets below ``log_start_offset``."""
    count = 0
    last = len(segments) - 1
    while count <= last:
        segment = segments[count]
        if count < last:
            if segments[count + 1].base_offset > log_start_offset:
                break
        elif segment.size == 0 or segment.next_offset > log_start_offset:
            break
        count += 1
    return count
