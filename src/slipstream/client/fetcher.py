"""Fetch multiplexing: one fetch loop per broker serving all the partitions it leads.

Modelled on sarama's brokerConsumer/partitionConsumer (seed 000): each broker
that leads an assigned partition gets one asyncio task and one dedicated
connection. The task builds a Fetch request for the partitions it leads that
are fetchable (see below), sends it (long poll: ``fetch_max_wait_ms`` /
``fetch_min_bytes``, at most ``fetch_max_bytes`` in all and
``max_partition_fetch_bytes`` per partition -- into a partition that still has
data buffered only what tops it up to ``partition_buffer_bytes``; no fetch
sessions: id 0, epoch -1; the partition order rotates so every partition gets
to be first, where the broker returns a batch whole even if it exceeds the
limits; the wait is cut to 10 ms while another partition of that broker is left
out only because its buffer is full, since a long poll would keep it from being
fetched once the consumer drains it), and files each
partition's record batches in that partition's buffer, each batch its own
``bytes`` copy (so the response is freed at once and each batch's bytes are freed
as soon as it is decoded). Batches are decoded lazily, one at a time, as the
consumer drains them, straight into the consumer's message type (one object
per record, see :func:`~slipstream.protocol.records.decode_messages`); records
below the position are skipped (a fetch may return a batch that starts before
it), as are control batches and, under ``read_committed``, aborted
transactions. A decoded batch counts as buffered until all its records are
handed out.

A partition is *fetchable* when it has a position, is not paused, has no
undelivered error, is not in a request already, and its buffer holds less
than ``partition_buffer_bytes`` -- unless that buffer has not been drained for
``max_processing_time_ms``, in which case it waits until the consumer catches
up (sarama's MaxProcessingTime). A slow partition therefore stops being
fetched without holding up the others. Paused partitions keep their buffered
data. See :mod:`.consumer_config` for the resulting memory bound.

Errors per partition: OFFSET_OUT_OF_RANGE resets by ``auto_offset_reset``
(ListOffsets) or, with "none", is raised to the consumer; NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION and other leadership errors refresh the metadata
and move the partition to its new leader's loop; a lost connection is retried
with backoff (and the metadata refreshed). Errors reach the consumer through
:meth:`Fetcher.drain`, which raises the first one once; that partition is then
not fetched until it is seeked.

All methods must be called on the event loop the fetcher runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Every fetched batch's CRC is checked (check_crcs): load the crc32c package with the
# client, not in the middle of the first fetch (its import reads package metadata, tens
# of ms; protocol.record_batch imports it lazily for the broker's start-up).
import crc32c  # noqa: F401

from ..protocol.apis.fetch import SPEC as FETCH
from ..protocol.apis.fetch import (
    FetchRequest,
    FetchRequestPartition,
    FetchRequestTopic,
    FetchResponse,
    FetchResponsePartition,
)
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from ..protocol.primitives import ZERO_UUID, DecodeError
from ..protocol.record_batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    InvalidBatch,
    parse_header,
)
from ..protocol.records import CONTROL_ABORT, MessageFields, decode_batch, decode_messages
from .assignors import TopicPartition
from .cluster import Cluster
from .connection import BrokerConnection, ConnectionClosed
from .consumer_config import ConsumerConfig
from .offsets import NoOffsetForPartitionError, reset_offsets
from .retry import backoff_s
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

Clock = Callable[[], float]

_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.KAFKA_STORAGE_ERROR,
        9,  # REPLICA_NOT_AVAILABLE
        74,  # FENCED_LEADER_EPOCH
        75,  # UNKNOWN_LEADER_EPOCH
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)
_FIRST_FETCH_VERSION = 4  # magic 2 record batches
_HELD_BACK_MAX_WAIT_MS = 10
_MIN_TOP_UP_BYTES = 64 * 1024
_TOPIC_ID_VERSION = 13
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


class FetchedRecord(MessageFields):
    """A record as the fetcher hands it out when no message type is given (an
    immutable named tuple: topic, partition, offset, key, value, timestamp,
    headers, timestamp_type, leader_epoch)."""

    __slots__ = ()


# The struct of the first 27 header bytes: base_offset, batch_length,
# partition_leader_epoch, magic, crc, attributes, last_offset_delta.
_HEAD = struct.Struct(">qiibIhi")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


@dataclass(slots=True)
class _Chunk:
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
        self.chunks: deque[_Chunk] = deque()
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


def _copy_batches(view: memoryview) -> tuple[deque[bytes], int, int | None, int]:
    """The complete batches at the start of ``view``, each copied into its own bytes
    (nothing keeps the response alive): (batches, their total size, the offset after
    them, the largest one's size)."""
    pos = 0
    end = len(view)
    out: deque[bytes] = deque()
    next_offset: int | None = None
    largest = 0
    unpack = _HEAD.unpack_from
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


class Fetcher:
    """Fetches the assigned partitions, one loop per leader broker; see the module docstring.

    Consumer side: :meth:`drain` (poll style, many partitions) or
    :meth:`fetch_partition` (one partition, awaits data). Both advance the
    position past what they return.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        clock: Clock = time.monotonic,
        message_type: type[MessageFields] = FetchedRecord,
    ) -> None:
        config.validate()
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.message_type = message_type
        """What records are decoded into (a :class:`MessageFields` subclass)."""
        self.buffer_limit = config.effective_partition_buffer_bytes
        self.max_processing_s = config.max_processing_time_ms / 1000.0
        self._parts: dict[TopicPartition, PartitionState] = {}
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._node_wakeup: dict[int, asyncio.Event] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._data_event = asyncio.Event()
        self._metadata_needed = asyncio.Event()
        self._reset_needed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._rotation: Counter[int] = Counter()
        self._drain_start = 0
        self._closed = False
        self.fetch_requests: Counter[int] = Counter()
        """Fetch requests sent, per broker node id (for tests and metrics)."""

    # ------------------------------------------------------------ assignment

    def start(self) -> None:
        if self._closed:
            raise RuntimeError("the fetcher is closed")
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(
                    self._guarded("metadata", self._metadata_loop), name="fetcher-metadata"
                ),
                loop.create_task(
                    self._guarded("offset reset", self._reset_loop), name="fetcher-reset"
                ),
            ]

    def assigned(self) -> set[TopicPartition]:
        return set(self._parts)

    def add(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        """Start fetching ``partitions``; a None position resets by ``auto_offset_reset``.

        Partitions already assigned keep their state (use :meth:`seek` to move them).
        """
        self.start()
        for tp, position in partitions.items():
            if tp in self._parts:
                continue
            st = PartitionState(tp)
            self._parts[tp] = st
            if position is None:
                self._set_reset(st, self.config.auto_offset_reset)
            else:
                self._set_position(st, position)
            self._route(st)

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and drop the buffered data of ``partitions``."""
        for tp in partitions:
            st = self._parts.pop(tp, None)
            if st is not None:
                st.clear()
                st.ready.set()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Deliver from ``offset`` next; drops buffered data and unblocks an errored partition."""
        if offset < 0:
            raise ValueError(f"cannot seek {tp[0]}-{tp[1]} to negative offset {offset}")
        st = self._state(tp)
        st.clear()
        self._set_position(st, offset)
        self._wake(st)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._state(tp)
            st.clear()
            self._set_reset(st, "earliest")

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._state(tp)
            st.clear()
            self._set_reset(st, "latest")

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and delivering; buffered data is kept for :meth:`resume`."""
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._state(tp)
            if st.paused:
                st.paused = False
                if st.has_buffered:
                    st.waiting_since = self.clock()
                    st.ready.set()
                    self._data_event.set()
                self._wake(st)

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._parts.items() if st.paused}

    def position(self, tp: TopicPartition) -> int | None:
        """Offset of the next record the consumer will get (None while being reset)."""
        return self._state(tp).position

    def positions(self) -> dict[TopicPartition, int]:
        return {tp: st.position for tp, st in self._parts.items() if st.position is not None}

    def highwater(self, tp: TopicPartition) -> int | None:
        hw = self._state(tp).high_watermark
        return None if hw < 0 else hw

    def lag(self, tp: TopicPartition) -> int | None:
        st = self._state(tp)
        if st.high_watermark < 0 or st.position is None:
            return None
        return max(0, st.high_watermark - st.position)

    def buffered_bytes(self, tp: TopicPartition | None = None) -> int:
        if tp is not None:
            return self._state(tp).buffered_bytes
        return sum(st.buffered_bytes for st in self._parts.values())

    def partition_fetches(self, tp: TopicPartition) -> int:
        """How many fetch requests included ``tp`` (for tests and metrics)."""
        return self._state(tp).fetches

    def _state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._parts[tp]
        except KeyError:
            raise KeyError(f"{tp[0]}-{tp[1]} is not assigned to this consumer") from None

    def _set_position(self, st: PartitionState, offset: int) -> None:
        st.position = st.fetch_offset = offset
        st.reset_policy = None

    def _set_reset(self, st: PartitionState, policy: str) -> None:
        st.position = st.fetch_offset = None
        if policy == "none":
            st.reset_policy = None
            st.error = NoOffsetForPartitionError([st.tp])
            st.ready.set()
            self._data_event.set()
            return
        st.reset_policy = policy
        self._reset_needed.set()

    # ------------------------------------------------------------ consuming

    def drain(
        self, max_records: int, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, list[MessageFields]]:
        """Take up to ``max_records`` buffered records, without waiting.

        Rotates over the non-paused partitions (all, or ``partitions``) so none
        starves. If a partition has an error and nothing was taken yet, raises
        it (once; the partition then waits for a seek).
        """
        out: dict[TopicPartition, list[MessageFields]] = {}
        for st, records in self._drain(max_records, partitions):
            out[st.tp] = records
        return out

    def drain_records(self, max_records: int) -> list[MessageFields]:
        """:meth:`drain` as one list (partition after partition): what a poll returns."""
        out: list[MessageFields] = []
        for _st, records in self._drain(max_records, None):
            if out:
                out += records
            else:
                out = records
        return out

    def _drain(
        self, max_records: int, partitions: Iterable[TopicPartition] | None
    ) -> list[tuple[PartitionState, list[MessageFields]]]:
        if max_records <= 0:
            raise ValueError("max_records must be positive")
        if partitions is None:
            states = list(self._parts.values())
        else:
            states = [self._parts[tp] for tp in partitions if tp in self._parts]
        n = len(states)
        if n == 0:
            return []
        start = self._drain_start % n
        self._drain_start += 1
        out: list[tuple[PartitionState, list[MessageFields]]] = []
        taken = 0
        cls = self.message_type
        for st in itertools.chain(states[start:], states[:start]):
            if taken >= max_records:
                break
            if st.paused:
                continue
            if st.error is not None:
                if out:
                    break
                self._raise(st)
            if st.index >= len(st.records) and not st.chunks:
                continue
            records = self._take(st, max_records - taken, cls)
            if records:
                out.append((st, records))
                taken += len(records)
            elif st.error is not None and not out:
                self._raise(st)
        return out

    def has_error(self) -> bool:
        """Whether some non-paused partition has an error waiting to be raised by a drain."""
        return any(st.error is not None and not st.paused for st in self._parts.values())

    def unread(self, records: Iterable[MessageFields]) -> None:
        """Put records taken by a drain back in front of their partitions' buffers.

        The records must be the latest ones taken from each partition, in order, with
        nothing done to those partitions since (a read-ahead the consumer did not hand
        out). Positions move back to the first of them; records of partitions no
        longer assigned are dropped.
        """
        by_tp: dict[TopicPartition, list[MessageFields]] = {}
        for r in records:
            tp = (r.topic, r.partition)
            got = by_tp.get(tp)
            if got is None:
                by_tp[tp] = [r]
            else:
                got.append(r)
        for tp, recs in by_tp.items():
            st = self._parts.get(tp)
            if st is None:
                continue
            rest = st.records[st.index :]
            if not rest:
                # Once these are taken again the position is back where it is now.
                st.batch_next = st.position
            st.records = recs + rest
            st.index = 0
            st.position = recs[0].offset
            if not st.paused:
                st.ready.set()
                self._data_event.set()

    def _raise(self, st: PartitionState) -> None:
        error, st.error = st.error, None
        st.blocked = True
        assert error is not None
        raise error

    def drain_partition(
        self,
        tp: TopicPartition,
        max_records: int,
        *,
        message_type: type[MessageFields] | None = None,
        one_batch: bool = False,
    ) -> list[MessageFields]:
        """Take up to ``max_records`` buffered records of one partition (raises its error).

        ``one_batch``: stop at the end of the decoded batch (decode at most one more),
        so a caller holding what it took holds at most one batch beyond the buffer.
        """
        st = self._parts.get(tp)
        if st is None or st.paused:
            return []
        if st.error is not None:
            self._raise(st)
        records = self._take(st, max_records, message_type or self.message_type, one_batch)
        if not records and st.error is not None:
            self._raise(st)
        return records

    async def wait_for_data(
        self, timeout_s: float | None, partitions: Iterable[TopicPartition] | None = None
    ) -> bool:
        """Wait until some (non-paused) partition has records or an error buffered."""
        wanted = None if partitions is None else set(partitions)
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            for tp, st in self._parts.items():
                if (wanted is None or tp in wanted) and st.deliverable:
                    return True
            self._data_event.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that arrives as the wait completes.
            try:
                async with asyncio.timeout(remaining):
                    await self._data_event.wait()
            except TimeoutError:
                return False

    async def fetch_partition(
        self,
        tp: TopicPartition,
        max_records: int,
        timeout_s: float | None = None,
        *,
        message_type: type[MessageFields] | None = None,
        one_batch: bool = False,
    ) -> list[MessageFields]:
        """Records of one partition, waiting up to ``timeout_s`` for some; [] on timeout or removal.

        ``message_type`` and ``one_batch``: as for :meth:`drain_partition`.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            st = self._parts.get(tp)
            if st is None:
                return []
            records = self.drain_partition(
                tp, max_records, message_type=message_type, one_batch=one_batch
            )
            if records:
                return records
            st.ready.clear()
            if st.deliverable:
                continue
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return []
            try:
                async with asyncio.timeout(remaining):  # not wait_for: see wait_for_data
                    await st.ready.wait()
            except TimeoutError:
                return []
            if self._parts.get(tp) is not st:
                return []

    def _take(
        self,
        st: PartitionState,
        limit: int,
        cls: type[MessageFields],
        one_batch: bool = False,
    ) -> list[MessageFields]:
        taken: list[MessageFields] = []
        got = 0
        before = st.buffered_bytes
        while got < limit:
            records = st.records
            index = st.index
            avail = len(records) - index
            if avail <= 0:
                if got and one_batch:
                    break
                if not self._load_batch(st, cls):
                    break
                continue
            want = limit - got
            if want >= avail:
                # The rest of the batch: hand the list itself over and release the batch.
                part = records[index:] if index else records
                st.records = []
                st.index = 0
                st.buffered_bytes -= st.batch_bytes
                st.batch_bytes = 0
                position = part[-1].offset + 1
                batch_next = st.batch_next
                st.position = (
                    batch_next if batch_next is not None and batch_next > position else position
                )
            else:
                part = records[index : index + want]
                st.index = index + want
                st.position = part[-1].offset + 1
            if got:
                taken += part
            else:
                taken = part
            got += len(part)
            if one_batch:
                break
        if got or st.buffered_bytes != before:
            st.waiting_since = self.clock() if st.has_buffered else None
            self._wake(st)
        return taken

    def _load_batch(self, st: PartitionState, cls: type[MessageFields]) -> bool:
        """Decode the next deliverable batch of ``st`` into ``st.records``; False when none is left.

        Each batch's bytes are dropped once decoded (the records hold their own
        copies of keys and values); skipped batches leave the buffer at once.
        """
        read_committed = self.config.isolation_level_code == 1
        chunks = st.chunks
        while chunks:
            chunk = chunks[0]
            data = chunk.batches.popleft()
            if not chunk.batches:
                chunks.popleft()
            size = len(data)
            base_offset, _len, _epoch, _magic, _crc, attributes, last_delta = _HEAD.unpack_from(
                data
            )
            next_offset = base_offset + last_delta + 1
            position = st.position if st.position is not None else 0
            if next_offset <= position:
                st.buffered_bytes -= size
                continue  # entirely before the position
            if read_committed or attributes & CONTROL_MASK:
                header = parse_header(data)
                if read_committed and header.producer_id >= 0:
                    while chunk.aborted and chunk.aborted[0][0] <= header.last_offset:
                        chunk.aborted_producers.add(chunk.aborted.pop(0)[1])
                    if header.is_control:
                        if self._is_abort_marker(data):
                            chunk.aborted_producers.discard(header.producer_id)
                    elif header.is_transactional and header.producer_id in chunk.aborted_producers:
                        st.buffered_bytes -= size
                        st.position = max(position, next_offset)
                        continue
                if header.is_control:
                    st.buffered_bytes -= size
                    st.position = max(position, next_offset)
                    continue
            try:
                _h, records = decode_messages(
                    data, cls, st.tp[0], st.tp[1], verify_crc=self.config.check_crcs
                )
            except (InvalidBatch, DecodeError, ValueError) as exc:
                code = ErrorCode.CORRUPT_MESSAGE
                st.error = FetchError(
                    code,
                    st.tp,
                    f"{st.tp[0]}-{st.tp[1]}: record batch at offset "
                    f"{base_offset} cannot be read: {exc}",
                )
                chunks.clear()
                st.buffered_bytes = 0
                st.ready.set()
                return False
            if records and records[0].offset < position:
                records = [r for r in records if r.offset >= position]
            if not records:
                st.buffered_bytes -= size
                st.position = max(position, next_offset)
                continue
            st.records = records
            st.index = 0
            st.batch_next = next_offset
            st.batch_bytes = size
            return True
        return False

    @staticmethod
    def _is_abort_marker(batch: bytes) -> bool:
        try:
            _h, records = decode_batch(batch, verify_crc=False)
        except (InvalidBatch, DecodeError, ValueError):
            return False
        return bool(records) and records[0].control_type == CONTROL_ABORT

    # ------------------------------------------------------------ routing

    def _route(self, st: PartitionState) -> None:
        info = self.cluster.topics.get(st.tp[0])
        leader = -1 if info is None else info.leaders.get(st.tp[1], -1)
        if leader >= 0 and leader in self.cluster.brokers:
            st.leader = leader
            self._ensure_loop(leader)
            self._wake(st)
        else:
            st.leader = None
            self._metadata_needed.set()

    def _ensure_loop(self, node_id: int) -> None:
        task = self._loops.get(node_id)
        if task is None or task.done():
            self._node_wakeup.setdefault(node_id, asyncio.Event())
            self._loops[node_id] = asyncio.get_running_loop().create_task(
                self._broker_loop(node_id), name=f"fetch-broker-{node_id}"
            )

    def _wake(self, st: PartitionState) -> None:
        if st.leader is not None:
            event = self._node_wakeup.get(st.leader)
            if event is not None:
                event.set()

    def _lose_leader(self, st: PartitionState, reason: str) -> None:
        log.debug("%s-%d: %s; refreshing metadata", st.tp[0], st.tp[1], reason)
        st.leader = None
        self._metadata_needed.set()

    async def _metadata_loop(self) -> None:
        attempt = 0
        while not self._closed:
            await self._metadata_needed.wait()
            self._metadata_needed.clear()
            topics = sorted({tp[0] for tp, st in self._parts.items() if st.leader is None})
            if not topics:
                continue
            failed = False
            try:
                await self.cluster.refresh_metadata(topics)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                log.debug("fetcher metadata refresh failed: %s", exc)
                failed = True
            unresolved = False
            for st in list(self._parts.values()):
                if st.leader is None:
                    self._route(st)
                    unresolved = unresolved or st.leader is None
            self._metadata_needed.clear()
            if failed or unresolved:
                await asyncio.sleep(
                    backoff_s(
                        attempt,
                        self.config.retry_backoff_ms,
                        max(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms),
                    )
                )
                attempt += 1
                self._metadata_needed.set()
            else:
                attempt = 0

    async def _reset_loop(self) -> None:
        attempt = 0
        while not self._closed:
            await self._reset_needed.wait()
            self._reset_needed.clear()
            pending = {tp: st for tp, st in self._parts.items() if st.reset_policy is not None}
            if not pending:
                continue
            epochs = {tp: st.epoch for tp, st in pending.items()}
            policies = {
                tp: st.reset_policy for tp, st in pending.items() if st.reset_policy is not None
            }
            try:
                offsets = await reset_offsets(self.cluster, policies, self.config)
            except (ConnectionClosed, OSError, TimeoutError, KafkaError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    for tp, st in pending.items():
                        if st.epoch == epochs[tp] and st.reset_policy is not None:
                            st.reset_policy = None
                            st.error = FetchError(
                                exc.code,
                                tp,
                                f"resetting the offset of {tp[0]}-{tp[1]} failed: {exc}",
                            )
                            st.ready.set()
                    self._data_event.set()
                    continue
                log.debug("offset reset failed (%s); retrying", exc)
                await asyncio.sleep(
                    backoff_s(
                        attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
                    )
                )
                attempt += 1
                self._reset_needed.set()
                continue
            attempt = 0
            for tp, offset in offsets.items():
                target = self._parts.get(tp)
                if target is None or target.epoch != epochs[tp] or target.reset_policy is None:
                    continue
                log.info(
                    "%s-%d: offset reset (%s) to %d", tp[0], tp[1], target.reset_policy, offset
                )
                self._set_position(target, offset)
                self._wake(target)

    # ------------------------------------------------------------ broker loops

    def _fetchable(self, node_id: int) -> list[PartitionState]:
        now = self.clock()
        return [
            st
            for st in self._parts.values()
            if st.leader == node_id
            and is_fetchable(st, now, self.buffer_limit, self.max_processing_s)
        ]

    async def _connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None:
            if not conn.closed:
                return conn
            # Replaced: close it (awaits its read loop) so no task is left pending.
            del self._conns[node_id]
            with contextlib.suppress(Exception):
                await conn.close()
        node = self.cluster.brokers.get(node_id)
        if node is None:
            raise ConnectionClosed(f"broker {node_id} is not in the metadata")
        conn = BrokerConnection(
            node.host,
            node.port,
            client_id=self.config.client_id,
            request_timeout_s=self.config.request_timeout_ms / 1000.0,
        )
        await conn.connect()
        self._conns[node_id] = conn
        return conn

    async def _guarded(self, name: str, body: Callable[[], Any]) -> None:
        """Run a background loop; an unexpected error is logged and the loop restarted."""
        attempt = 0
        while not self._closed:
            try:
                await body()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher %s failed; restarting it", name)
                await asyncio.sleep(
                    backoff_s(
                        attempt,
                        self.config.retry_backoff_ms,
                        max(self.config.retry_backoff_max_ms, 1000),
                    )
                )
                attempt += 1

    async def _broker_loop(self, node_id: int) -> None:
        await self._guarded(f"loop for broker {node_id}", lambda: self._broker_loop_body(node_id))

    async def _broker_loop_body(self, node_id: int) -> None:
        wakeup = self._node_wakeup[node_id]
        failures = 0
        while not self._closed:
            parts = self._fetchable(node_id)
            if not parts:
                wakeup.clear()
                parts = self._fetchable(node_id)
                if not parts:
                    await wakeup.wait()
                    continue
            try:
                conn = await self._connection(node_id)
                version = conn.version_for(FETCH, self._max_version(parts))
                if version < _FIRST_FETCH_VERSION:
                    raise KafkaError(
                        ErrorCode.UNSUPPORTED_VERSION,
                        f"broker {node_id} only serves Fetch v{version} (record format v0/v1)",
                    )
                request, sent = self._build_request(node_id, parts, version)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                failures = await self._connection_failed(node_id, parts, exc, failures)
                continue
            for st in parts:
                st.in_flight = True
                st.fetches += 1
            self.fetch_requests[node_id] += 1
            timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000.0
            try:
                response: FetchResponse = await conn.request(
                    FETCH, request, version=version, timeout_s=timeout
                )
            except (ConnectionClosed, OSError, KafkaError) as exc:
                for st in parts:
                    st.in_flight = False
                failures = await self._connection_failed(node_id, parts, exc, failures)
                continue
            finally:
                for st in parts:
                    st.in_flight = False
            failures = 0
            error_code = response.error_code
            if not error_code:
                self._handle_response(node_id, response, sent, version)
            # Release the response (up to fetch_max_bytes) now: the batches were copied
            # out, and the loop may wait a long time for the next fetch.
            del response
            if error_code:
                log.warning("Fetch from broker %d failed: %s", node_id, error_name(error_code))
                await asyncio.sleep(
                    backoff_s(0, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms)
                )

    async def _connection_failed(
        self, node_id: int, parts: list[PartitionState], exc: BaseException, failures: int
    ) -> int:
        log.debug("fetch from broker %d failed: %s", node_id, exc)
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if isinstance(exc, KafkaError) and exc.code == ErrorCode.UNSUPPORTED_VERSION:
            for st in parts:
                st.error = FetchError(exc.code, st.tp, str(exc))
                st.ready.set()
            self._data_event.set()
            return failures
        # The broker may be gone for good: look the leaders up again after the backoff.
        await asyncio.sleep(
            backoff_s(
                failures, self.config.retry_backoff_ms, max(self.config.retry_backoff_max_ms, 1000)
            )
        )
        if failures >= 1:
            for st in parts:
                if st.leader == node_id:
                    self._lose_leader(st, f"connection to broker {node_id} failed: {exc}")
        return failures + 1

    def _max_version(self, parts: list[PartitionState]) -> int | None:
        for st in parts:
            info = self.cluster.topics.get(st.tp[0])
            if info is None or info.topic_id == ZERO_UUID:
                return _TOPIC_ID_VERSION - 1
        return None

    def _fetch_size(self, st: PartitionState) -> int:
        """How much to ask for: a full ``max_partition_fetch_bytes`` into an empty buffer,
        otherwise what tops the buffer up to ``partition_buffer_bytes`` -- but at least
        64 KiB and the largest batch seen (so the answer is never just a cut batch),
        never more than ``max_partition_fetch_bytes``.

        Topping up keeps a partition's buffer near ``partition_buffer_bytes`` instead of
        letting each fetch add a full ``max_partition_fetch_bytes`` on top of it.
        """
        limit = self.config.max_partition_fetch_bytes
        buffered = st.buffered_bytes
        if buffered <= 0:
            return limit
        want = max(self.buffer_limit - buffered, _MIN_TOP_UP_BYTES, st.largest_batch)
        return want if want < limit else limit

    def _held_back(self, node_id: int, parts: list[PartitionState]) -> bool:
        """Whether a partition led by ``node_id`` is out of the fetch of ``parts`` only
        because its buffer is full (it becomes fetchable as the consumer drains it)."""
        included = {id(st) for st in parts}
        for st in self._parts.values():
            if (
                st.leader == node_id
                and id(st) not in included
                and st.buffered_bytes > 0
                and not st.in_flight
                and not st.paused
                and st.error is None
                and not st.blocked
                and st.position is not None
                and st.reset_policy is None
            ):
                return True
        return False

    def _build_request(
        self, node_id: int, parts: list[PartitionState], version: int
    ) -> tuple[FetchRequest, dict[TopicPartition, tuple[int, int]]]:
        start = self._rotation[node_id] % len(parts)
        self._rotation[node_id] += 1
        ordered = parts[start:] + parts[:start]
        topics: dict[str, FetchRequestTopic] = {}
        sent: dict[TopicPartition, tuple[int, int]] = {}
        for st in ordered:
            topic, partition = st.tp
            assert st.fetch_offset is not None
            t = topics.get(topic)
            if t is None:
                info = self.cluster.topics.get(topic)
                t = FetchRequestTopic(topic=topic, topic_id=info.topic_id if info else ZERO_UUID)
                topics[topic] = t
            t.partitions.append(
                FetchRequestPartition(
                    partition=partition,
                    fetch_offset=st.fetch_offset,
                    log_start_offset=-1,
                    partition_max_bytes=self._fetch_size(st),
                )
            )
            sent[st.tp] = (st.epoch, st.fetch_offset)
        max_wait_ms = self.config.fetch_max_wait_ms
        if max_wait_ms > _HELD_BACK_MAX_WAIT_MS and self._held_back(node_id, parts):
            # Only one fetch is in flight per broker: a long poll for caught-up partitions
            # would keep the ones held back by a full buffer from being fetched once
            # drained (a stall of up to fetch_max_wait_ms). Ask for a short wait instead.
            max_wait_ms = _HELD_BACK_MAX_WAIT_MS
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=self.config.fetch_min_bytes,
            max_bytes=self.config.fetch_max_bytes,
            isolation_level=self.config.isolation_level_code,
            session_id=0,
            session_epoch=-1,
            topics=list(topics.values()),
            rack_id=self.config.client_rack or "",
        )
        return request, sent

    def _handle_response(
        self,
        node_id: int,
        response: FetchResponse,
        sent: dict[TopicPartition, tuple[int, int]],
        version: int,
    ) -> None:
        by_id: dict[object, str] = {}
        if version >= _TOPIC_ID_VERSION:
            for topic in {tp[0] for tp in sent}:
                info = self.cluster.topics.get(topic)
                if info is not None:
                    by_id[info.topic_id] = topic
        got_data = False
        for t in response.responses:
            topic = by_id.get(t.topic_id, "") if version >= _TOPIC_ID_VERSION else t.topic
            for p in t.partitions:
                tp = (topic, p.partition_index)
                st = self._parts.get(tp)
                expected = sent.get(tp)
                if st is None or expected is None or st.leader != node_id:
                    continue
                if (st.epoch, st.fetch_offset) != expected:
                    continue  # seeked or reset meanwhile: stale
                got_data = self._handle_partition(st, p) or got_data
        if got_data:
            self._data_event.set()

    def _handle_partition(self, st: PartitionState, p: FetchResponsePartition) -> bool:
        code = p.error_code
        tp = st.tp
        if code == ErrorCode.NONE:
            st.high_watermark = p.high_watermark
            st.last_stable_offset = p.last_stable_offset
            st.log_start_offset = p.log_start_offset
            records = p.records
            if not records:
                return False
            view = (
                memoryview(records)
                if not isinstance(records, list)
                else memoryview(b"".join(records))
            )
            batches, size, next_offset, largest = _copy_batches(view)
            if next_offset is None or st.fetch_offset is None or next_offset <= st.fetch_offset:
                return False  # only a partial batch (it comes whole once this partition is first)
            aborted: list[tuple[int, int]] = []
            if self.config.isolation_level_code == 1 and p.aborted_transactions:
                aborted = sorted((a.first_offset, a.producer_id) for a in p.aborted_transactions)
            st.chunks.append(_Chunk(batches, aborted))
            if largest > st.largest_batch:
                st.largest_batch = largest
            if st.buffered_bytes == 0:
                st.waiting_since = self.clock()
            st.buffered_bytes += size
            st.fetch_offset = next_offset
            st.ready.set()
            return True
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            policy = self.config.auto_offset_reset
            offset = st.fetch_offset if st.fetch_offset is not None else -1
            log.info(
                "%s-%d: fetch offset %d is out of range (log %d..%d); reset policy %s",
                tp[0],
                tp[1],
                offset,
                p.log_start_offset,
                p.high_watermark,
                policy,
            )
            st.clear()
            if policy == "none":
                st.position = st.fetch_offset = None
                st.error = OffsetOutOfRangeError(tp, offset)
                st.ready.set()
                return True
            self._set_reset(st, policy)
            return False
        if code in _LEADERSHIP_ERRORS:
            self._lose_leader(st, error_name(code))
            return False
        if (
            code == 29
            or code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            or (not is_retriable(code))
        ):
            st.error = FetchError(code, tp, f"fetching {tp[0]}-{tp[1]} failed: {error_name(code)}")
            st.ready.set()
            return True
        log.debug("%s-%d: retriable fetch error %s", tp[0], tp[1], error_name(code))
        return False

    # ------------------------------------------------------------ shutdown

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._loops.values()) + self._tasks
        self._loops.clear()
        self._tasks = []
        await cancel_and_wait(tasks)
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.close()
        for st in self._parts.values():
            st.ready.set()
        self._data_event.set()
