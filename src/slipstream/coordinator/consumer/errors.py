"""Errors of the consumer-group model, each carrying the protocol error code to answer with."""

from __future__ import annotations

from ...protocol.errors import KafkaError

FENCED_MEMBER_EPOCH = 110
INVALID_REGULAR_EXPRESSION = 128  # not yet in protocol/errors.py's table (Kafka 4.0)


class FencedMemberEpochError(KafkaError):
    """The member must abandon its partitions and rejoin with epoch 0."""

    def __init__(self, message: str) -> None:
        super().__init__(FENCED_MEMBER_EPOCH, message)


class InvalidRegularExpressionError(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(INVALID_REGULAR_EXPRESSION, message)


class PartitionAssignorError(Exception):
    """A server-side assignor could not compute an assignment (Kafka's
    ``PartitionAssignorException``; the heartbeat then fails with UNKNOWN_SERVER_ERROR)."""
