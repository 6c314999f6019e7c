"""What a request is answered when the ``__consumer_offsets`` append it waited for failed.

Kafka maps a failed write of group metadata to an error the client knows how to act
on: retry elsewhere (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) or give up.
"""

from __future__ import annotations

from ..protocol.errors import BY_NAME, ErrorCode

NOT_ENOUGH_REPLICAS = BY_NAME["NOT_ENOUGH_REPLICAS"].code
NOT_ENOUGH_REPLICAS_AFTER_APPEND = BY_NAME["NOT_ENOUGH_REPLICAS_AFTER_APPEND"].code


def append_error_for_group(error: int) -> int:
    """Kafka's mapping of a failed group-metadata append to a response error."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
