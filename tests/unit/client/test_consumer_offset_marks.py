"""A consumer-group session's marked offsets, without a session or a broker."""

from __future__ import annotations

from slipstream.client.assignors import TopicPartition
from slipstream.client.consumer_messages import ConsumerMessage
from slipstream.client.consumer_offset_marks import FOLD_AT, OffsetMarks, as_offsets
from slipstream.client.offsets import OffsetAndMetadata


def msg(topic: str, partition: int, offset: int, epoch: int = -1) -> ConsumerMessage:
    return ConsumerMessage(topic, partition, offset, None, b"v", leader_epoch=epoch)


def log(marks: OffsetMarks, m: ConsumerMessage) -> None:
    """What ``ConsumerGroupSession.mark_message`` does for a mark without metadata."""
    marks.log.append(m)
    if len(marks.log) >= FOLD_AT:
        marks.fold()


def test_marks_move_forward_only_and_only_for_claimed_partitions() -> None:
    claimed: set[TopicPartition] = {("t", 0), ("t", 1)}
    marks = OffsetMarks(claimed)
    assert marks.mark_offset(("t", 1), 10, "meta")
    assert marks.mark_offset(("t", 1), 8, "older")  # claimed, but lower: kept at 10
    assert not marks.mark_offset(("u", 0), 3, "")
    marks.mark_message(msg("t", 0, 4, epoch=7), "note")
    marks.mark_message(msg("t", 0, 2), None)
    assert marks.marked() == {
        ("t", 0): OffsetAndMetadata(5, "note", 7),
        ("t", 1): OffsetAndMetadata(10, "meta", -1),
    }


def test_logged_marks_fold_to_the_highest_offset_of_each_run() -> None:
    marks = OffsetMarks({("t", 0), ("t", 1)})
    for offset in (20, 30, 25):
        log(marks, msg("t", 0, offset, epoch=offset))
    log(marks, msg("t", 1, 7))
    log(marks, msg("t", 0, 26))  # a later run, below the mark: ignored
    log(marks, msg("x", 0, 99))  # not claimed: ignored
    assert marks.marked() == {
        ("t", 0): OffsetAndMetadata(31, None, 30),
        ("t", 1): OffsetAndMetadata(8, None, -1),
    }
    assert marks.log == []


def test_the_log_folds_by_itself_at_fold_at_under_the_claims_of_the_time() -> None:
    claimed: set[TopicPartition] = {("t", 0)}
    marks = OffsetMarks(claimed)
    for offset in range(FOLD_AT):
        log(marks, msg("t", 0, offset))
    assert marks.log == []
    claimed.clear()  # the claim goes away after the fold: its mark stays
    assert marks.marked() == {("t", 0): OffsetAndMetadata(FOLD_AT, None, -1)}


def test_pending_marks_are_those_not_committed_and_forget_drops_a_partition() -> None:
    marks = OffsetMarks({("t", 0), ("t", 1)})
    marks.mark_offset(("t", 0), 3, "")
    marks.mark_offset(("t", 1), 4, "")
    sent = marks.pending()
    assert as_offsets(sent) == {("t", 0): OffsetAndMetadata(3), ("t", 1): OffsetAndMetadata(4)}
    marks.committed(sent)
    assert marks.pending() == {}

    log(marks, msg("t", 1, 9))
    assert as_offsets(marks.pending()) == {("t", 1): OffsetAndMetadata(10)}
    marks.forget([("t", 1)])
    assert marks.pending() == {}
    assert ("t", 1) not in marks.marked()
