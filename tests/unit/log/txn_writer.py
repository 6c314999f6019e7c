"""Writes transactional data and markers to a log the way the broker does (for the log tests)."""

from __future__ import annotations

from slipstream.log.api import AbortedTxn, PartitionLog
from slipstream.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    ProducerRecord,
    build_batch,
    build_control_batch,
)


class TxnWriter:
    """Writes transactional data and markers to a log the way the broker does, keeping
    the open transactions (producer id -> first offset) and the entries it made."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.open: dict[int, int] = {}
        self.entries: list[AbortedTxn] = []
        self.now = 0  # append time: with segment_ms=1, roll() starts a new segment

    def roll(self) -> TxnWriter:
        self.now += 10
        return self

    def data(self, pid: int, n: int = 1, *, transactional: bool = True, key: bytes = b"k",
             value: bytes = b"x" * 20) -> int:
        """``n`` records (``key``, ``value``) from ``pid`` (-1: a plain batch); returns the base offset."""
        records = [ProducerRecord(key, value, timestamp_ms=1000) for _ in range(n)]
        batch = bytearray(build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                      base_sequence=0 if pid >= 0 else -1,
                                      is_transactional=transactional and pid >= 0))
        info = self.log.append([batch], now_ms=self.now, log_append_time=False)
        if transactional and pid >= 0:
            self.open.setdefault(pid, info.base_offset)
        return info.base_offset

    def end(self, pid: int, *, commit: bool) -> None:
        offset = self.log.log_end_offset
        first = self.open.pop(pid, None)
        if not commit and first is not None:
            following = next(iter(self.open.values()), None)
            txn = AbortedTxn(pid, first, offset, offset + 1 if following is None else following)
            self.log.add_aborted_txn(txn)
            self.entries.append(txn)
        marker = bytearray(build_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT,
                                               producer_id=pid, producer_epoch=0, timestamp_ms=1000))
        assert self.log.append([marker], now_ms=self.now, log_append_time=False).base_offset == offset

    def expected(self, start: int, end: int) -> list[AbortedTxn]:
        return [t for t in self.entries if t.last_offset >= start and t.first_offset < end]
