"""TxnOffsetCommit (key 28). Served v0-4.

A transactional producer's offsets for a consumer group, sent to the group
coordinator: written to ``__consumer_offsets`` in the producer's transactional
batch and pending until the transaction's marker (see offset_manager.py). v3+
carry the member id, instance id and generation, checked as Kafka checks them.
"""

from __future__ import annotations

from ...protocol.apis.txn_offset_commit import SPEC, TxnOffsetCommitRequest, TxnOffsetCommitResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    return await ctx.groups.txn_offset_commit(ctx.coordinator_context(), request)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
