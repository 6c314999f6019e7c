"""A member's OffsetCommit left on a connection it has replaced cannot move its offset back.

The broker numbers connections as it accepts them; a commit of a member that arrives
on an older connection than one the member has already committed on is a leftover
of a connection the member gave up on (a request timeout, a lost link), read late.
Kafka accepts it and the committed offset goes back; we answer REQUEST_TIMED_OUT
(retriable: nobody reads that answer) and keep the newer offset. Found by the group
simulator (classic seeds 4561, 7851, 10768).
"""

from __future__ import annotations

from broker_helpers import raw_connection
from test_group_commit_batching import started
from test_hostile_groups import joined, sync

from slipstream.protocol.apis import offset_commit as oc
from slipstream.protocol.apis import offset_fetch as of
from slipstream.protocol.errors import ErrorCode


def member_commit(member_id: str, generation: int, offset: int) -> oc.OffsetCommitRequest:
    return oc.OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            oc.OffsetCommitRequestTopic(
                name="t", partitions=[oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)]
            )
        ],
    )


async def test_a_commit_on_a_replaced_connection_does_not_move_the_offset_back() -> None:
    broker, _adapter = await started(storage="memory")
    try:
        address = f"{broker.config.host}:{broker.port}"
        async with raw_connection(address) as old, raw_connection(address) as new:
            member = await joined(old, "g", b"")
            assert (await sync(old, "g", member, b"")).error_code == ErrorCode.NONE
            first = await old.request(oc.SPEC, member_commit(member.member_id, member.generation_id, 10), version=8)
            assert first.topics[0].partitions[0].error_code == ErrorCode.NONE
            # The member moves to its new connection and commits further there ...
            newer = await new.request(oc.SPEC, member_commit(member.member_id, member.generation_id, 30), version=8)
            assert newer.topics[0].partitions[0].error_code == ErrorCode.NONE
            # ... and a commit still coming over the old one is refused.
            late = await old.request(oc.SPEC, member_commit(member.member_id, member.generation_id, 20), version=8)
            assert late.topics[0].partitions[0].error_code == ErrorCode.REQUEST_TIMED_OUT
            fetch = of.OffsetFetchRequest(
                groups=[of.OffsetFetchRequestGroup(group_id="g", topics=[of.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]
            )
            answer = await new.request(of.SPEC, fetch, version=8)
            assert answer.groups[0].topics[0].partitions[0].committed_offset == 30
    finally:
        await broker.stop()
