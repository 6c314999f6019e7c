"""A consumer-group session's marked offsets, sans-I/O: what ``mark_message`` /
``mark_offset`` recorded per claimed partition, and which marks are not committed yet.

``mark_message`` runs once per message, so a plain mark only appends the message to
:attr:`OffsetMarks.log`; the log is folded into the per-partition marks (highest
offset per run of one partition, found in C) when the marks are read or committed,
when the claims change, and every ``FOLD_AT`` messages.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Container, Iterable

from ..protocol.records import MessageFields
from .assignors import TopicPartition
from .offsets import OffsetAndMetadata

__all__ = ["FOLD_AT", "Mark", "OffsetMarks", "as_offsets"]

Mark = tuple[int, int, str | None]
"""A marked position as kept per partition: (offset, leader_epoch, metadata)."""

FOLD_AT = 512
"""Logged marks are folded at least this often: the log keeps at most about as many
messages alive as one claim's iterator holds (max_poll_records)."""

# MessageFields order: topic, partition / offset.
_TP_OF = operator.itemgetter(0, 1)
_OFFSET_OF = operator.itemgetter(2)


class OffsetMarks:
    """Marks of the partitions in ``claimed`` (a live view: the session's claims);
    marks of other partitions are ignored. Offsets only move forward."""

    def __init__(self, claimed: Container[TopicPartition]) -> None:
        self.claimed = claimed
        self.log: list[MessageFields] = []
        """Messages marked without metadata, not folded yet (append, then fold at FOLD_AT)."""
        self._marked: dict[TopicPartition, Mark] = {}
        self._committed: dict[TopicPartition, Mark] = {}

    def mark_offset(self, tp: TopicPartition, offset: int, metadata: str) -> bool:
        """Mark ``offset`` (the next offset to consume); False if ``tp`` is not claimed."""
        if tp not in self.claimed:
            return False
        self.fold()
        current = self._marked.get(tp)
        if current is None or offset > current[0]:
            self._marked[tp] = (offset, -1, metadata or None)
        return True

    def mark_message(self, msg: MessageFields, metadata: str | None) -> None:
        """Mark ``msg`` as processed now (after the logged ones): its offset + 1."""
        self.fold()
        self._mark(msg, metadata)

    def _mark(self, msg: MessageFields, metadata: str | None) -> None:
        tp = (msg.topic, msg.partition)
        if tp not in self.claimed:
            return
        offset = msg.offset + 1
        current = self._marked.get(tp)
        if current is None or offset > current[0]:
            self._marked[tp] = (offset, msg.leader_epoch, metadata or None)

    def fold(self) -> None:
        """Apply the logged marks, as if each had been applied when made.

        Call it before anything reads the marks and before the claims change, so the
        claimed-partition check sees the claims the marks were made under.
        """
        logged = self.log
        if not logged:
            return
        self.log = []
        # Consecutive marks of one partition (a claim's loop) form one run: its highest
        # offset is found in C; Python work is per run, not per message.
        for _tp, run in itertools.groupby(logged, _TP_OF):
            self._mark(max(run, key=_OFFSET_OF), None)

    def marked(self) -> dict[TopicPartition, OffsetAndMetadata]:
        self.fold()
        return as_offsets(self._marked)

    def pending(self) -> dict[TopicPartition, Mark]:
        """The marks not committed yet."""
        self.fold()
        committed = self._committed
        return {tp: mark for tp, mark in self._marked.items() if committed.get(tp) != mark}

    def committed(self, marks: dict[TopicPartition, Mark]) -> None:
        """``marks`` (from :meth:`pending`) were committed."""
        self._committed.update(marks)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop the marks of partitions handed over to another member."""
        self.fold()
        for tp in partitions:
            self._marked.pop(tp, None)
            self._committed.pop(tp, None)


def as_offsets(marks: dict[TopicPartition, Mark]) -> dict[TopicPartition, OffsetAndMetadata]:
    """Marks as what the offsets client commits."""
    return {
        tp: OffsetAndMetadata(offset, metadata, epoch)
        for tp, (offset, epoch, metadata) in marks.items()
    }
