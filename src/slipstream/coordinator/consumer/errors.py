"""Errors of the consumer-group model, each carrying the protocol error code to answer with."""

from __future__ import annotations

from ...protocol.errors import ErrorCode, KafkaError


class FencedMemberEpochError(KafkaError):
    """The member must abandon its partitions and rejoin with epoch 0."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.FENCED_MEMBER_EPOCH, message)


class InvalidRegularExpressionError(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REGULAR_EXPRESSION, message)


class PartitionAssignorError(Exception):
    """A server-side assignor could not compute an assignment (Kafka's
    ``PartitionAssignorException``; the heartbeat then fails with UNKNOWN_SERVER_ERROR)."""
