"""The fetch path without I/O: per-partition state, the backpressure rule, Fetch
requests built from that state, responses filed into per-batch buffers, and lazy
decoding into the consumer's message type. See docs/architecture/fetcher.md.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Iterable, Mapping

from ..protocol.apis.fetch import (
    FetchRequest,
    FetchRequestPartition,
    FetchRequestTopic,
    FetchResponse,
    FetchResponsePartition,
)
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from ..protocol.file_region import FileRegion
from ..protocol.primitives import ZERO_UUID, DecodeError
from ..protocol.record_batch import (
    CONTROL_MASK,
    InvalidBatch,
    parse_header,
)
from ..protocol.records import CONTROL_ABORT, MessageFields, decode_batch, decode_messages
from .assignors import TopicPartition
from .cluster import TopicInfo
from .consumer_config import ConsumerConfig
from .fetch_state import (
    BATCH_HEAD,
    BatchChunk,
    FetchError,
    FetchOutcome,
    OffsetOutOfRangeError,
    PartitionResult,
    PartitionState,
    complete_batches,
    copy_batches,
    is_fetchable,
)
from .offsets import NoOffsetForPartitionError

log = logging.getLogger(__name__)

__all__ = [
    "FetchCore",
    "FetchError",
    "FetchOutcome",
    "OffsetOutOfRangeError",
    "PartitionResult",
    "PartitionState",
    "complete_batches",
    "is_fetchable",
]

Sent = dict[TopicPartition, tuple[int, int]]
"""Per partition in a request: (its epoch, the fetch offset asked for)."""

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
FIRST_FETCH_VERSION = 4  # magic 2 record batches
_HELD_BACK_MAX_WAIT_MS = 10
_MIN_TOP_UP_BYTES = 64 * 1024
TOPIC_ID_VERSION = 13


class FetchCore:
    """Sans-I/O state of the fetch path: partition states, requests, responses, decoding.

    Fed ``now``; never awaits. The asyncio :class:`~.fetcher.Fetcher` owns it.
    """

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.buffer_limit = config.effective_partition_buffer_bytes
        self.max_processing_s = config.max_processing_time_ms / 1000.0
        self.parts: dict[TopicPartition, PartitionState] = {}
        self._rotation: Counter[int] = Counter()
        self._drain_start = 0
        self.wake_nodes: set[int] = set()
        """Leaders of partitions whose buffers shrank: their loops may fetch again
        (the adapter wakes them and clears this)."""

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.parts[tp]
        except KeyError:
            raise KeyError(f"{tp[0]}-{tp[1]} is not assigned to this consumer") from None

    def set_reset(self, st: PartitionState, policy: str) -> bool:
        """Drop the position to reset it by ``policy``; whether ListOffsets is needed
        (False: policy "none", the partition got a NoOffsetForPartitionError instead)."""
        st.position = st.fetch_offset = None
        if policy == "none":
            st.reset_policy = None
            st.error = NoOffsetForPartitionError([st.tp])
            st.ready.set()
            return False
        st.reset_policy = policy
        return True

    def fail(self, parts: Iterable[PartitionState], exc: KafkaError) -> None:
        """``parts`` cannot be fetched (e.g. the broker's Fetch is too old): ``exc`` for each."""
        for st in parts:
            st.error = FetchError(exc.code, st.tp, str(exc))
            st.ready.set()

    def resets_pending(self) -> dict[TopicPartition, tuple[PartitionState, int, str]]:
        """The partitions waiting for an offset reset: (state, its epoch now, policy)."""
        return {
            tp: (st, st.epoch, st.reset_policy)
            for tp, st in self.parts.items()
            if st.reset_policy is not None
        }

    def resets_failed(
        self, pending: Mapping[TopicPartition, tuple[PartitionState, int, str]], exc: KafkaError
    ) -> None:
        """A non-retriable ListOffsets error: the still-pending partitions get it."""
        for tp, (st, epoch, _policy) in pending.items():
            if st.epoch == epoch and st.reset_policy is not None:
                st.reset_policy = None
                st.error = FetchError(
                    exc.code, tp, f"resetting the offset of {tp[0]}-{tp[1]} failed: {exc}"
                )
                st.ready.set()

    def resets_done(
        self,
        pending: Mapping[TopicPartition, tuple[PartitionState, int, str]],
        offsets: Mapping[TopicPartition, int],
    ) -> list[PartitionState]:
        """Position the partitions still waiting for these resets; returns them."""
        done: list[PartitionState] = []
        for tp, offset in offsets.items():
            target = self.parts.get(tp)
            if target is None or target.epoch != pending[tp][1] or target.reset_policy is None:
                continue
            log.info("%s-%d: offset reset (%s) to %d", tp[0], tp[1], target.reset_policy, offset)
            target.set_position(offset)
            done.append(target)
        return done

    @staticmethod
    def max_version(
        parts: list[PartitionState], topics_info: Mapping[str, TopicInfo]
    ) -> int | None:
        """The highest Fetch version usable for ``parts`` (names only while a topic id is
        unknown), or None for no limit."""
        for st in parts:
            info = topics_info.get(st.tp[0])
            if info is None or info.topic_id == ZERO_UUID:
                return TOPIC_ID_VERSION - 1
        return None

    def fetchable(self, node_id: int, now: float) -> list[PartitionState]:
        """The partitions led by ``node_id`` that go into its next fetch."""
        return [
            st
            for st in self.parts.values()
            if st.leader == node_id
            and is_fetchable(st, now, self.buffer_limit, self.max_processing_s)
        ]

    def drain(
        self,
        max_records: int,
        partitions: Iterable[TopicPartition] | None,
        cls: type[MessageFields],
        now: float,
    ) -> list[tuple[PartitionState, list[MessageFields]]]:
        """Up to ``max_records`` buffered records, rotating over the non-paused partitions
        (all, or ``partitions``) so none starves. If a partition has an error and nothing
        was taken yet, raises it (once; the partition then waits for a seek)."""
        if max_records <= 0:
            raise ValueError("max_records must be positive")
        parts = self.parts
        if partitions is None:
            states = list(parts.values())
        else:
            states = [parts[tp] for tp in partitions if tp in parts]
        n = len(states)
        if n == 0:
            return []
        start = self._drain_start % n
        self._drain_start += 1
        out: list[tuple[PartitionState, list[MessageFields]]] = []
        taken = 0
        for st in itertools.chain(states[start:], states[:start]):
            if taken >= max_records:
                break
            if st.paused:
                continue
            if st.error is not None:
                if out:
                    break
                self.raise_error(st)
            if st.index >= len(st.records) and not st.chunks:
                continue
            records = self.take(st, max_records - taken, cls, now)
            if records:
                out.append((st, records))
                taken += len(records)
            elif st.error is not None and not out:
                self.raise_error(st)
        return out

    def raise_error(self, st: PartitionState) -> None:
        """Raise the partition's error once; it is not fetched again until seeked."""
        error, st.error = st.error, None
        st.blocked = True
        assert error is not None
        raise error

    def unread(self, records: Iterable[MessageFields]) -> bool:
        """Put records taken by a drain back in front of their partitions' buffers;
        whether a non-paused partition got some (data to announce).

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
        deliverable = False
        for tp, recs in by_tp.items():
            st = self.parts.get(tp)
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
                deliverable = True
        return deliverable

    def take(
        self,
        st: PartitionState,
        limit: int,
        cls: type[MessageFields],
        now: float,
        one_batch: bool = False,
    ) -> list[MessageFields]:
        """Up to ``limit`` buffered records of ``st``, decoded into ``cls``; moves the position.

        ``one_batch``: stop at the end of the decoded batch (decode at most one more).
        Restarts the partition's processing timer and adds its leader to ``wake_nodes``
        when the buffer shrank.
        """
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
                if not self.load_batch(st, cls):
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
            st.waiting_since = now if st.has_buffered else None
            if st.leader is not None:
                self.wake_nodes.add(st.leader)
        return taken

    def load_batch(self, st: PartitionState, cls: type[MessageFields]) -> bool:
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
            base_offset, _len, _epoch, _magic, _crc, attributes, last_delta = (
                BATCH_HEAD.unpack_from(data)
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

    def fetch_size(self, st: PartitionState) -> int:
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

    def held_back(self, node_id: int, parts: list[PartitionState]) -> bool:
        """Whether a partition led by ``node_id`` is out of the fetch of ``parts`` only
        because its buffer is full (it becomes fetchable as the consumer drains it)."""
        included = {id(st) for st in parts}
        for st in self.parts.values():
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

    def build_request(
        self, node_id: int, parts: list[PartitionState], topics_info: Mapping[str, TopicInfo]
    ) -> tuple[FetchRequest, Sent]:
        """The Fetch request for ``parts`` (all led by ``node_id``), rotating which goes
        first, and what was asked per partition (to recognise stale answers)."""
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
                info = topics_info.get(topic)
                t = FetchRequestTopic(topic=topic, topic_id=info.topic_id if info else ZERO_UUID)
                topics[topic] = t
            t.partitions.append(
                FetchRequestPartition(
                    partition=partition,
                    fetch_offset=st.fetch_offset,
                    log_start_offset=-1,
                    partition_max_bytes=self.fetch_size(st),
                )
            )
            sent[st.tp] = (st.epoch, st.fetch_offset)
        max_wait_ms = self.config.fetch_max_wait_ms
        if max_wait_ms > _HELD_BACK_MAX_WAIT_MS and self.held_back(node_id, parts):
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

    def handle_response(
        self,
        node_id: int,
        response: FetchResponse,
        sent: Sent,
        version: int,
        topics_info: Mapping[str, TopicInfo],
        now: float,
    ) -> FetchOutcome:
        """File the data of a Fetch response and decide what each partition's error needs.

        Answers for partitions seeked, reset, removed or moved since ``sent`` are dropped.
        """
        outcome = FetchOutcome()
        by_id: dict[object, str] = {}
        if version >= TOPIC_ID_VERSION:
            for topic in {tp[0] for tp in sent}:
                info = topics_info.get(topic)
                if info is not None:
                    by_id[info.topic_id] = topic
        for t in response.responses:
            topic = by_id.get(t.topic_id, "") if version >= TOPIC_ID_VERSION else t.topic
            for p in t.partitions:
                tp = (topic, p.partition_index)
                st = self.parts.get(tp)
                expected = sent.get(tp)
                if st is None or expected is None or st.leader != node_id:
                    continue
                if (st.epoch, st.fetch_offset) != expected:
                    continue  # seeked or reset meanwhile: stale
                result = self.handle_partition(st, p, now)
                if result is PartitionResult.DELIVER:
                    outcome.got_data = True
                elif result is PartitionResult.RESET:
                    outcome.resets.append(st)
                elif result is PartitionResult.LEADER_LOST:
                    outcome.leader_lost.append((st, error_name(p.error_code)))
        return outcome

    def handle_partition(
        self, st: PartitionState, p: FetchResponsePartition, now: float
    ) -> PartitionResult:
        """Apply one partition's answer to ``st``: records are buffered, errors decided."""
        code = p.error_code
        tp = st.tp
        if code == ErrorCode.NONE:
            st.high_watermark = p.high_watermark
            st.last_stable_offset = p.last_stable_offset
            st.log_start_offset = p.log_start_offset
            records = p.records
            if not records:
                return PartitionResult.NOTHING
            view = (
                memoryview(records)
                if not isinstance(records, list)
                else memoryview(b"".join(c.read() if isinstance(c, FileRegion) else c for c in records))
            )
            batches, size, next_offset, largest = copy_batches(view)
            if next_offset is None or st.fetch_offset is None or next_offset <= st.fetch_offset:
                return (
                    PartitionResult.NOTHING
                )  # only a partial batch (it comes whole once this partition is first)
            aborted: list[tuple[int, int]] = []
            if self.config.isolation_level_code == 1 and p.aborted_transactions:
                aborted = sorted((a.first_offset, a.producer_id) for a in p.aborted_transactions)
            st.chunks.append(BatchChunk(batches, aborted))
            if largest > st.largest_batch:
                st.largest_batch = largest
            if st.buffered_bytes == 0:
                st.waiting_since = now
            st.buffered_bytes += size
            st.fetch_offset = next_offset
            st.ready.set()
            return PartitionResult.DELIVER
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
                return PartitionResult.DELIVER
            return PartitionResult.RESET
        if code in _LEADERSHIP_ERRORS:
            return PartitionResult.LEADER_LOST
        if (
            code == 29
            or code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            or (not is_retriable(code))
        ):
            st.error = FetchError(code, tp, f"fetching {tp[0]}-{tp[1]} failed: {error_name(code)}")
            st.ready.set()
            return PartitionResult.DELIVER
        log.debug("%s-%d: retriable fetch error %s", tp[0], tp[1], error_name(code))
        return PartitionResult.RETRY
