"""Per-partition fetch state (sans-I/O): position, pause, buffered batches, errors, the
backpressure rule that decides whether a partition is fetched, and the decisions the
fetch core returns to its adapter."""

from __future__ import annotations

import asyncio
import enum
import itertools
import struct
from collections import deque
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, parse_header
from ..protocol.records import MessageFields
from .assignors import TopicPartition

_epochs = itertools.count(1)


class FetchError(KafkaError):
    """A partition cannot be fetched any further until it is seeked."""

    def __init__(self, code: int, partition: TopicPartition, message: str) -> None:
        super().__init__(code, message)
        self.partition = partition


class OffsetOutOfRangeError(KafkaError):
    """The position is outside the log and auto_offset_reset is "none"."""

    def __init__(self, partition: TopicPartition, offset: int) -> None:
        self.partition = partition
        self.offset = offset
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is out of range for {partition[0]}-{partition[1]} and "
            "auto_offset_reset is 'none': seek to a valid offset",
        )


# The struct of the first 27 header bytes: base_offset, batch_length,
# partition_leader_epoch, magic, crc, attributes, last_offset_delta.
BATCH_HEAD = struct.Struct(">qiibIhi")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


@dataclass(slots=True)
class BatchChunk:
    """The complete batches one response returned for one partition (private copies)."""

    batches: deque[bytes]
    aborted: list[tuple[int, int]] = field(default_factory=list)
    """read_committed: (first_offset, producer_id) of aborted transactions, sorted."""
    aborted_producers: set[int] = field(default_factory=set)


class PartitionState:
    """Everything the fetcher knows about one assigned partition."""

    __slots__ = (
        "batch_bytes",
        "batch_next",
        "blocked",
        "buffered_bytes",
        "chunks",
        "epoch",
        "error",
        "fetch_offset",
        "fetches",
        "high_watermark",
        "in_flight",
        "index",
        "largest_batch",
        "last_stable_offset",
        "leader",
        "log_start_offset",
        "paused",
        "position",
        "ready",
        "records",
        "reset_policy",
        "tp",
        "waiting_since",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.position: int | None = None
        """Offset of the next record to hand to the consumer."""
        self.fetch_offset: int | None = None
        """Offset to fetch next (past everything buffered)."""
        self.reset_policy: str | None = None
        self.paused = False
        self.epoch = next(_epochs)
        self.leader: int | None = None
        self.in_flight = False
        self.chunks: deque[BatchChunk] = deque()
        self.records: list[MessageFields] = []
        """The decoded batch being handed out (from ``index`` on)."""
        self.index = 0
        self.batch_next: int | None = None
        self.batch_bytes = 0
        """Wire size of the decoded batch: counted as buffered until it is all handed out."""
        self.largest_batch = 0
        """The largest batch fetched so far (top-up fetches never ask for less)."""
        self.buffered_bytes = 0
        self.error: Exception | None = None
        self.blocked = False
        self.waiting_since: float | None = None
        self.high_watermark = -1
        self.log_start_offset = -1
        self.last_stable_offset = -1
        self.fetches = 0
        self.ready = asyncio.Event()

    def set_position(self, offset: int) -> None:
        """Fetch and deliver from ``offset`` next."""
        self.position = self.fetch_offset = offset
        self.reset_policy = None

    @property
    def has_buffered(self) -> bool:
        return self.index < len(self.records) or bool(self.chunks)

    @property
    def deliverable(self) -> bool:
        return not self.paused and (self.error is not None or self.has_buffered)

    def clear(self) -> None:
        self.chunks.clear()
        self.records = []
        self.index = 0
        self.batch_next = None
        self.batch_bytes = 0
        self.buffered_bytes = 0
        self.waiting_since = None
        self.error = None
        self.blocked = False
        self.epoch = next(_epochs)


def is_fetchable(
    st: PartitionState, now: float, buffer_limit: int, max_processing_s: float
) -> bool:
    """Whether a partition goes into the next fetch request (the backpressure rule)."""
    if st.paused or st.position is None or st.fetch_offset is None or st.reset_policy is not None:
        return False
    if st.error is not None or st.blocked or st.leader is None or st.in_flight:
        return False
    if st.buffered_bytes >= buffer_limit and st.buffered_bytes > 0:
        return False
    return not (
        st.buffered_bytes > 0
        and st.waiting_since is not None
        and now - st.waiting_since > max_processing_s
    )


def copy_batches(view: memoryview) -> tuple[deque[bytes], int, int | None, int]:
    """The complete batches at the start of ``view``, each copied into its own bytes
    (nothing keeps the response alive): (batches, their total size, the offset after
    them, the largest one's size)."""
    pos = 0
    end = len(view)
    out: deque[bytes] = deque()
    next_offset: int | None = None
    largest = 0
    unpack = BATCH_HEAD.unpack_from
    while end - pos >= HEADER_SIZE:
        base_offset, length, _epoch, _magic, _crc, _attrs, last_delta = unpack(view, pos)
        size = LOG_OVERHEAD + length
        if length < _MIN_BATCH_LENGTH or pos + size > end:
            break
        out.append(view[pos : pos + size].tobytes())
        next_offset = base_offset + last_delta + 1
        if size > largest:
            largest = size
        pos += size
    return out, pos, next_offset, largest


def complete_batches(view: memoryview) -> tuple[int, int | None]:
    """(bytes of complete batches at the start of ``view``, offset after the last of them)."""
    pos = 0
    end = len(view)
    next_offset: int | None = None
    while end - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        size = header.size
        if header.batch_length < HEADER_SIZE - 12 or pos + size > end:
            break
        next_offset = header.next_offset
        pos += size
    return pos, next_offset


class PartitionResult(enum.Enum):
    """What one partition's answer needs from the adapter."""

    NOTHING = enum.auto()
    """No new data (or only a partial batch)."""
    DELIVER = enum.auto()
    """Records or an error are ready for the consumer."""
    RESET = enum.auto()
    """OFFSET_OUT_OF_RANGE: reset the position by ``auto_offset_reset`` (ListOffsets)."""
    LEADER_LOST = enum.auto()
    """A leadership error: refresh the metadata and move to the new leader."""
    RETRY = enum.auto()
    """Another retriable error: fetched again next round."""


@dataclass(slots=True)
class FetchOutcome:
    """What one Fetch response needs from the adapter."""

    got_data: bool = False
    resets: list[PartitionState] = field(default_factory=list)
    leader_lost: list[tuple[PartitionState, str]] = field(default_factory=list)
    """(partition, reason)."""
