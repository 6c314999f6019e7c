"""TxnOffsetCommit (key 28), versions 0-4; flexible from v3.

Offsets a transactional producer commits for a consumer group inside its
transaction (sent to the group coordinator after AddOffsetsToTxn). They stay
pending until the transaction's marker: visible on commit, gone on abort.
v2 adds each partition's committed leader epoch; v3 adds the member id,
group instance id and generation so the group can reject a zombie member
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); v4 may answer
TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, INT64, STRING, Array, Struct, field


class TxnOffsetCommitRequestPartition(Struct):
    partition_index: int = field(INT32)
    committed_offset: int = field(INT64)
    committed_leader_epoch: int = field(INT32, v="2+", default=-1)
    committed_metadata: str | None = field(STRING, nullable="0+")


class TxnOffsetCommitRequestTopic(Struct):
    name: str = field(STRING)
    partitions: list[TxnOffsetCommitRequestPartition] = field(Array(TxnOffsetCommitRequestPartition))


class TxnOffsetCommitRequest(Struct):
    transactional_id: str = field(STRING)
    group_id: str = field(STRING)
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT16)
    generation_id: int = field(INT32, v="3+", default=-1)
    member_id: str = field(STRING, v="3+", default="")
    group_instance_id: str | None = field(STRING, v="3+", nullable="3+", default=None)
    topics: list[TxnOffsetCommitRequestTopic] = field(Array(TxnOffsetCommitRequestTopic))


class TxnOffsetCommitResponsePartition(Struct):
    partition_index: int = field(INT32)
    error_code: int = field(INT16)


class TxnOffsetCommitResponseTopic(Struct):
    name: str = field(STRING)
    partitions: list[TxnOffsetCommitResponsePartition] = field(Array(TxnOffsetCommitResponsePartition))


class TxnOffsetCommitResponse(Struct):
    throttle_time_ms: int = field(INT32)
    topics: list[TxnOffsetCommitResponseTopic] = field(Array(TxnOffsetCommitResponseTopic))


SPEC = register(ApiSpec(28, "TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 4, 3))
