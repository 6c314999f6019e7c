"""Read ``__consumer_offsets`` (and ``__transaction_state``) for replay at start without
trusting what is there.

The log is the broker's own, but a damaged segment, a record a client slipped in
before appends were refused, or a compression bomb must not stop the broker from
starting or become group state. Each batch is decoded on its own, its compressed
records bounded by the topic's ``max.message.bytes``; a batch that does not decode
is skipped with a warning and replay goes on after it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..protocol.compression import UnsupportedCompression
from ..protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    parse_header,
)
from ..protocol.records import Record, decode_batch

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
