"""What the broker counts while it serves: plain ints in dicts, cheap on the hot path.

The dispatcher and the produce/fetch paths add to these; nothing here knows about
Prometheus. The admin listener turns them into the Prometheus view only when it is
scraped (broker/admin/prometheus.py), so a broker nobody scrapes pays a dict lookup
and a few additions per request.
"""

from __future__ import annotations

import struct
import uuid
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol.file_region import FileRegion
from .topics import Topic

if TYPE_CHECKING:  # (the Fetch declaration loads with Fetch's handler, not at start)
    from ..protocol.apis.fetch import FetchResponseTopic

# Upper bounds (seconds) of the request latency histogram's buckets; +Inf is implied.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

# A record batch: base offset (8), batch length (4), ... attributes (int16) at byte 21,
# record count at byte 57.
_LENGTH_AT = 8
_ATTRIBUTES_AT = 21
_CONTROL = 0x20
_COUNT_AT = 57
# Read from _LENGTH_AT in one call: the length, attributes (9 bytes on, at 21) and the
# record count (34 bytes after them, at 57).
_COUNTED_FIELDS = struct.Struct(">i9xh34xi")
_BATCH_OVERHEAD = 12  # base offset + length field, not counted in the length
# Bytes of a file region read at a time for its batch headers: one read covers the
# headers of many small batches, and a large batch costs one small read.
_REGION_BLOCK = 4096


class RequestStats:
    """Requests of one (API, version): count, total seconds, and per-bucket counts."""

    __slots__ = ("buckets", "count", "seconds")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        # One slot per bound in LATENCY_BUCKETS plus the +Inf slot (non-cumulative).
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds
        self.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1


@dataclass(slots=True)
class TopicTraffic:
    """Bytes and records produced to and fetched from one topic."""

    bytes_in: int = 0
    records_in: int = 0
    bytes_out: int = 0
    records_out: int = 0


@dataclass
class BrokerMetrics:
    """Request latencies per API version and traffic per topic, for /metrics."""

    requests: dict[tuple[int, int], RequestStats] = field(default_factory=dict)
    topics: dict[str, TopicTraffic] = field(default_factory=dict)

    def observe_request(self, api_key: int, api_version: int, seconds: float) -> None:
        key = (api_key, api_version)
        stats = self.requests.get(key)
        if stats is None:
            stats = self.requests[key] = RequestStats()
        stats.observe(seconds)

    def _topic(self, topic: str) -> TopicTraffic:
        traffic = self.topics.get(topic)
        if traffic is None:
            traffic = self.topics[topic] = TopicTraffic()
        return traffic

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        traffic = self._topic(topic)
        traffic.records_in += records
        traffic.bytes_in += nbytes

    def fetched(self, topic: str, chunks: Sequence[bytes | memoryview | FileRegion], nbytes: int) -> None:
        traffic = self._topic(topic)
        traffic.bytes_out += nbytes
        traffic.records_out += count_records(chunks)

    def fetched_response(self, responses: Sequence[FetchResponseTopic], by_id: Mapping[uuid.UUID, Topic]) -> None:
        """Count what one Fetch answer carries (from v13 topics are named by id)."""
        for topic in responses:
            name = topic.topic
            if not name:
                known = by_id.get(topic.topic_id)
                name = known.name if known is not None else ""
            for part in topic.partitions:
                chunks = part.records
                if chunks and isinstance(chunks, list):
                    self.fetched(name, chunks, sum(len(c) for c in chunks))

    def forget_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)


def count_records(chunks: Sequence[bytes | memoryview | FileRegion]) -> int:
    """Records in whole record batches laid end to end, read from the batch headers only
    (transaction markers, in control batches, are not records of the topic's)."""
    total = 0
    unpack_from = _COUNTED_FIELDS.unpack_from  # one call per batch: this runs for every batch fetched
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            total += _count_in_region(chunk)
            continue
        pos = 0
        end = len(chunk)
        while end - pos >= _COUNT_AT + 4:
            length, attributes, count = unpack_from(chunk, pos + _LENGTH_AT)
            if not attributes & _CONTROL and count > 0:
                total += count
            pos += _BATCH_OVERHEAD + length
    return total


def _count_in_region(region: FileRegion) -> int:
    """count_records for batches still in a file: only their headers are read."""
    total = 0
    unpack_from = _COUNTED_FIELDS.unpack_from
    block = b""
    block_start = 0
    pos = 0
    end = len(region)
    while end - pos >= _COUNT_AT + 4:
        rel = pos - block_start
        if rel + _COUNT_AT + 4 > len(block):
            block = region.read(pos, _REGION_BLOCK)
            block_start, rel = pos, 0
        length, attributes, count = unpack_from(block, rel + _LENGTH_AT)
        if not attributes & _CONTROL and count > 0:
            total += count
        pos += _BATCH_OVERHEAD + length
    return total
