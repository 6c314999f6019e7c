"""Group requests too big for ``__consumer_offsets``: refused as Kafka's coordinator does.

A group's metadata record carries every member's protocol metadata and assignment.
One that cannot fit a batch of the offsets topic (``max.message.bytes``) fails the
write before anything is stored: SyncGroup answers UNKNOWN_SERVER_ERROR (Kafka maps
RECORD_TOO_LARGE so). Commit metadata past ``offset.metadata.max.bytes`` is
OFFSET_METADATA_TOO_LARGE. Many small commits in one write are split, not refused.
"""

from __future__ import annotations

from typing import Any

from broker_helpers import raw_connection
from test_group_commit_batching import started as started_on_disk

from slipstream.broker.topics import OFFSETS_TOPIC
from slipstream.protocol.apis import join_group as jg
from slipstream.protocol.apis import offset_commit as oc
from slipstream.protocol.apis import sync_group as sg
from slipstream.protocol.errors import ErrorCode

LIMIT = 100_000  # the offsets topic's max.message.bytes in these tests


async def started(**settings: Any) -> Any:
    return await started_on_disk(storage="memory", **settings)


def offsets_log_end(broker: Any) -> int:
    return sum(p.log_end_offset for p in broker.state.topics.topics[OFFSETS_TOPIC].partitions)


async def join(conn: Any, group: str, metadata: bytes, member_id: str = "") -> jg.JoinGroupResponse:
    request = jg.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type="hostile",
        protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )
    return await conn.request(jg.SPEC, request, version=5)


async def joined(conn: Any, group: str, metadata: bytes) -> jg.JoinGroupResponse:
    first = await join(conn, group, metadata)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    second = await join(conn, group, metadata, first.member_id)
    assert second.error_code == ErrorCode.NONE
    return second


async def sync(conn: Any, group: str, joined: jg.JoinGroupResponse, assignment: bytes) -> sg.SyncGroupResponse:
    request = sg.SyncGroupRequest(
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        protocol_type="hostile",
        protocol_name="range",
        assignments=[sg.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment)],
    )
    return await conn.request(sg.SPEC, request, version=5)


def commit(group: str, partitions: int, metadata: str) -> oc.OffsetCommitRequest:
    return oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            oc.OffsetCommitRequestTopic(
                name="wide",
                partitions=[
                    oc.OffsetCommitRequestPartition(partition_index=i, committed_offset=5, committed_metadata=metadata)
                    for i in range(partitions)
                ],
            )
        ],
    )


async def test_group_metadata_too_big_for_the_offsets_topic_fails_sync_group() -> None:
    broker, _adapter = await started(message_max_bytes=LIMIT)
    try:
        address = f"{broker.config.host}:{broker.port}"
        async with raw_connection(address) as conn:
            before = offsets_log_end(broker)
            member = await joined(conn, "big", b"\x00" * (2 * LIMIT))
            answer = await sync(conn, "big", member, b"a")
            assert answer.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
            assert offsets_log_end(broker) == before  # nothing of the group was written

            # the same assignment with small metadata goes through
            small = await joined(conn, "small", b"\x00" * 100)
            ok = await sync(conn, "small", small, b"a")
            assert ok.error_code == ErrorCode.NONE and ok.assignment == b"a"
            assert offsets_log_end(broker) > before

            # an assignment too big for the record fails the same way
            other = await joined(conn, "big-assignment", b"\x00" * 100)
            refused = await sync(conn, "big-assignment", other, b"\x01" * (2 * LIMIT))
            assert refused.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    finally:
        await broker.stop()


async def test_offset_metadata_is_bounded_and_many_commits_are_split_not_refused() -> None:
    broker, adapter = await started(message_max_bytes=LIMIT, offset_metadata_max_bytes=4096)
    broker.state.topics.create("wide", 40, {})
    try:
        address = f"{broker.config.host}:{broker.port}"
        async with raw_connection(address) as conn:
            too_long = await conn.request(oc.SPEC, commit("g", 1, "m" * 4097), version=8)
            assert [p.error_code for t in too_long.topics for p in t.partitions] == [
                ErrorCode.OFFSET_METADATA_TOO_LARGE
            ]
            # 40 partitions x 4 KiB of metadata pass the batch limit together, each fits:
            # written as several batches
            fits = await conn.request(oc.SPEC, commit("g", 40, "m" * 4096), version=8)
            assert {p.error_code for t in fits.topics for p in t.partitions} == {ErrorCode.NONE}
        for partition in range(40):
            committed = adapter.coordinator.offset_manager.committed("g", "wide", partition)
            assert committed is not None and committed.offset == 5
    finally:
        await broker.stop()
