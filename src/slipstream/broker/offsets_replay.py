"""Replay ``__consumer_offsets`` and ``__transaction_state`` into their coordinators at
start without trusting what is there.

The log is the broker's own, but a damaged segment, a record a client slipped in
before appends were refused, or a compression bomb must not stop the broker from
starting or become group state. Each batch is decoded on its own, its compressed
records bounded by the topic's ``max.message.bytes``; a batch that does not decode
is skipped with a warning and replay goes on after it; so is a record the coordinator
refuses to replay.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..coordinator import OFFSETS_TOPIC, GroupCoordinator
from ..coordinator.transactions import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from ..log.api import OffsetOutOfRange, PartitionLog
from ..protocol.compression import UnsupportedCompression
from ..protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    parse_header,
)
from ..protocol.records import CONTROL_COMMIT, Record, decode_batch

log = logging.getLogger(__name__)


def replayable_batches(
    chunk: memoryview | bytes, max_uncompressed: int
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """(header, records) for each complete batch of ``chunk``; records empty when undecodable."""
    view = memoryview(chunk)
    end = len(view)
    pos = 0
    while end - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return  # a partial trailing batch (reads stop at a size limit) or a bogus length
        batch = view[pos : pos + header.size]
        pos += header.size
        try:
            _, records = decode_batch(batch, max_uncompressed=max_uncompressed)
        except (InvalidBatch, UnsupportedCompression) as exc:
            log.warning(
                "skipping an undecodable internal-topic batch at offsets %d..%d: %s",
                header.base_offset,
                header.last_offset,
                exc,
            )
            records = []
        yield header, records


# Bytes read from the log per round of replay (callers yield to the event loop between rounds).
READ_BYTES = 1 << 20


def log_batches(
    plog: PartitionLog, max_uncompressed: int
) -> Iterator[list[tuple[BatchHeader, list[Record]]]]:
    """A partition's batches from its log start, one list per read of ``READ_BYTES``.

    Batches wholly below the read position are left out, and records below it (deleted
    by DeleteRecords inside a batch) are dropped; an undecodable batch comes with no
    records (see ``replayable_batches``).
    """
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        try:
            result = plog.read(offset, READ_BYTES)
        except OffsetOutOfRange:
            return
        if not result.size:
            return
        batches: list[tuple[BatchHeader, list[Record]]] = []
        for chunk in result.chunks:
            for header, records in replayable_batches(chunk, max_uncompressed):
                if header.last_offset < offset:
                    continue
                if records and records[0].offset < offset:
                    records = [r for r in records if r.offset >= offset]
                batches.append((header, records))
                offset = header.next_offset
        yield batches


async def replay_group_log(
    coordinator: GroupCoordinator, plogs: Iterable[PartitionLog], max_uncompressed: int, now: int
) -> int:
    """Replay ``__consumer_offsets`` partitions into the group coordinator; records applied.

    A transaction marker ends its producer's pending offsets; a transactional batch's
    records are pending offsets of its producer."""
    replayed = 0
    for plog in plogs:
        for batches in log_batches(plog, max_uncompressed):
            for header, records in batches:
                if header.is_control:
                    if records and records[0].control_type is not None:
                        commit = records[0].control_type == CONTROL_COMMIT
                        _replay_untrusted(
                            OFFSETS_TOPIC,
                            header.next_offset - 1,
                            coordinator.replay_end_transaction,
                            header.producer_id, commit, now, header.producer_epoch,
                        )
                    replayed += 1
                    continue
                producer_id = header.producer_id if header.is_transactional else -1
                for record in records:
                    if record.key is None:
                        continue
                    replayed += _replay_untrusted(
                        OFFSETS_TOPIC,
                        record.offset,
                        coordinator.replay,
                        record.key, record.value, now, producer_id, header.producer_epoch,
                        record_time_ms=record.timestamp,
                    )
            await asyncio.sleep(0)  # let other connections be served while we load
    return replayed


async def replay_transaction_log(
    coordinator: TransactionCoordinator, plogs: Iterable[PartitionLog], max_uncompressed: int, now: int
) -> int:
    """Replay ``__transaction_state`` partitions into the transaction coordinator; records applied."""
    replayed = 0
    for plog in plogs:
        for batches in log_batches(plog, max_uncompressed):
            for header, records in batches:
                if header.is_control:
                    continue
                for record in records:
                    if record.key is None:
                        continue
                    replayed += _replay_untrusted(
                        TRANSACTION_STATE_TOPIC, record.offset, coordinator.replay, record.key, record.value, now
                    )
            await asyncio.sleep(0)
    return replayed


def _replay_untrusted(topic: str, offset: int, replay: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Replay one record read back from the log; 1 if applied, 0 if it was skipped."""
    try:
        replay(*args, **kwargs)
    except Exception as exc:  # the log may hold bytes no coordinator wrote
        log.warning("skipping %s record at offset %d: %r", topic, offset, exc)
        return 0
    return 1
