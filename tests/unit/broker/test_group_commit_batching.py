"""Group commit of OffsetCommit in the broker's coordinator adapter (broker/groups.py).

Commits handled in the same event-loop turn share one append per offsets
partition; each is answered only once its records are appended, replayed and
(fsync policy) synced; a failed write fails every commit in its batch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from broker_helpers import COMMIT_V9, codes, commit, started

from slipstream.broker.groups import GroupCoordinatorAdapter
from slipstream.coordinator import OFFSETS_TOPIC
from slipstream.coordinator.result import RequestContext
from slipstream.protocol import group_records as gr
from slipstream.protocol.apis import offset_fetch as of
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.records import iter_records

FETCH_V7 = RequestContext(api_version=7, client_id="test", client_host="/127.0.0.1")


def offsets_log_records(adapter: GroupCoordinatorAdapter, group: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every commit record of ``group`` in the offsets log, in order."""
    plog = adapter.state.topics.partition(OFFSETS_TOPIC, adapter.coordinator.partition_for(group))
    assert plog is not None
    out = []
    read = plog.read(plog.log_start_offset, 1 << 20)
    for chunk in read.chunks:
        for record in iter_records(chunk):
            assert record.key is not None and record.value is not None
            key = gr.decode_key(record.key)
            assert isinstance(key, gr.OffsetCommitKey)
            if key.group == group:
                out.append((key.topic, key.partition, gr.decode_offset_commit_value(record.value).offset))
    return out


async def test_concurrent_commits_share_one_append_and_each_is_answered() -> None:
    broker, adapter = await started(storage="memory")
    try:
        before = adapter.appends
        responses = await asyncio.gather(
            *(adapter.offset_commit(COMMIT_V9, commit("g", i % 8, 100 + i)) for i in range(20))
        )
        assert [codes(r) for r in responses] == [[0]] * 20
        assert adapter.appends - before == 1  # twenty commits, one batch
        committed = adapter.coordinator.committed_offsets("g")
        last = {p: max(i for i in range(20) if i % 8 == p) for p in range(8)}  # the latest per partition
        assert {tp: om.offset for tp, om in committed.items()} == {("t", p): 100 + i for p, i in last.items()}
        assert len(offsets_log_records(adapter, "g")) == 20
    finally:
        await broker.stop()


async def test_commits_of_different_partitions_get_one_append_per_partition() -> None:
    broker, adapter = await started(storage="memory")
    try:
        groups = [f"group-{i}" for i in range(40)]
        partitions = {adapter.coordinator.partition_for(g) for g in groups}
        assert len(partitions) > 1
        before = adapter.appends
        responses = await asyncio.gather(*(adapter.offset_commit(COMMIT_V9, commit(g, 0, 7)) for g in groups))
        assert all(codes(r) == [0] for r in responses)
        assert adapter.appends - before == len(partitions)
        assert all(adapter.coordinator.committed_offsets(g)[("t", 0)].offset == 7 for g in groups)
    finally:
        await broker.stop()


async def test_commits_of_a_group_are_written_and_applied_in_order() -> None:
    broker, adapter = await started(storage="memory")
    try:
        # Several batches' worth, all on one partition, offsets increasing in send order.
        tasks = []
        for i in range(30):
            tasks.append(asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, i))))
            if i % 7 == 6:
                await asyncio.sleep(0)  # let a batch go out between sends
        await asyncio.gather(*tasks)
        assert adapter.coordinator.committed_offsets("g")[("t", 0)].offset == 29
        assert [o for _, _, o in offsets_log_records(adapter, "g")] == list(range(30))
    finally:
        await broker.stop()


async def test_each_answer_comes_after_its_records_are_written_and_replayed() -> None:
    broker, adapter = await started(storage="memory")
    try:
        events: list[str] = []
        write = adapter._write

        def spy(partition: int, records: Any, now: int) -> Any:
            events.append(f"write {len(records)}")
            return write(partition, records, now)

        adapter._write = spy  # type: ignore[method-assign]
        seen: list[int] = []

        async def one(i: int) -> None:
            response = await adapter.offset_commit(COMMIT_V9, commit("g", i, 1000 + i))
            assert codes(response) == [0]
            # Answered: the commit is already in the offset cache (replayed), not merely queued.
            seen.append(adapter.coordinator.committed_offsets("g")[("t", i)].offset)
            events.append("answer")

        await asyncio.gather(*(one(i) for i in range(5)))
        assert events == ["write 5"] + ["answer"] * 5
        assert sorted(seen) == [1000 + i for i in range(5)]
    finally:
        await broker.stop()


async def test_fsync_policy_answers_only_after_the_batch_is_synced(tmp_path: Path) -> None:
    broker, adapter = await started(storage="disk", data_dir=str(tmp_path), durability="fsync")
    try:
        events: list[str] = []
        sync = adapter.state.committer.sync

        async def slow_sync(plog: Any) -> None:
            events.append("sync start")
            await asyncio.sleep(0.05)
            await sync(plog)
            events.append("sync done")

        adapter.state.committer.sync = slow_sync  # type: ignore[method-assign]
        before = adapter.appends

        async def one(i: int) -> None:
            response = await adapter.offset_commit(COMMIT_V9, commit("g", i, i))
            assert codes(response) == [0]
            events.append("answer")

        await asyncio.gather(*(one(i) for i in range(8)))
        assert events == ["sync start", "sync done"] + ["answer"] * 8
        assert adapter.appends - before == 1
    finally:
        await broker.stop()


async def test_batches_waiting_for_fsync_are_answered_in_write_order(tmp_path: Path) -> None:
    broker, adapter = await started(storage="disk", data_dir=str(tmp_path), durability="fsync")
    try:
        delays = iter([0.08, 0.0])  # the first batch's sync is the slow one
        sync = adapter.state.committer.sync

        async def uneven_sync(plog: Any) -> None:
            await asyncio.sleep(next(delays, 0.0))
            await sync(plog)

        adapter.state.committer.sync = uneven_sync  # type: ignore[method-assign]
        answered: list[int] = []

        async def one(i: int) -> None:
            await adapter.offset_commit(COMMIT_V9, commit("g", 0, i))
            answered.append(i)

        first = [asyncio.ensure_future(one(i)) for i in range(3)]
        await asyncio.sleep(0.01)  # first batch written, its sync in flight
        second = [asyncio.ensure_future(one(i)) for i in range(3, 6)]
        await asyncio.gather(*first, *second)
        assert answered == list(range(6))
    finally:
        await broker.stop()


async def test_failed_append_fails_every_commit_in_the_batch() -> None:
    broker, adapter = await started(storage="memory")
    try:
        plog = adapter.state.topics.partition(OFFSETS_TOPIC, adapter.coordinator.partition_for("g"))
        assert plog is not None

        def broken(*args: Any, **kwargs: Any) -> None:
            raise OSError("disk on fire")

        plog.append = broken  # type: ignore[method-assign]
        before = adapter.appends
        responses = await asyncio.gather(*(adapter.offset_commit(COMMIT_V9, commit("g", i, i)) for i in range(6)))
        # KAFKA_STORAGE_ERROR from the write, answered as Kafka maps it for commits.
        assert [codes(r) for r in responses] == [[ErrorCode.NOT_COORDINATOR]] * 6
        assert adapter.appends == before
        assert adapter.coordinator.committed_offsets("g") == {}
        # Nothing is left pending: a require_stable fetch is not told UNSTABLE_OFFSET_COMMIT.
        fetched = await adapter.offset_fetch(
            FETCH_V7,
            of.OffsetFetchRequest(
                group_id="g", topics=[of.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
                require_stable=True,
            ),
        )
        assert fetched.topics[0].partitions[0].error_code == 0
        assert fetched.topics[0].partitions[0].committed_offset == -1
    finally:
        await broker.stop()


async def test_failed_fsync_fails_the_commits_waiting_for_it(tmp_path: Path) -> None:
    broker, adapter = await started(storage="disk", data_dir=str(tmp_path), durability="fsync")
    try:
        async def failing_sync(plog: Any) -> None:
            raise OSError("fsync failed")

        adapter.state.committer.sync = failing_sync  # type: ignore[method-assign]
        responses = await asyncio.gather(*(adapter.offset_commit(COMMIT_V9, commit("g", i, i)) for i in range(4)))
        assert [codes(r) for r in responses] == [[ErrorCode.NOT_COORDINATOR]] * 4
    finally:
        await broker.stop()


async def test_any_other_request_first_writes_out_the_queued_commits() -> None:
    broker, adapter = await started(storage="memory")
    try:
        tasks = [asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", i, 50 + i))) for i in range(3)]
        await asyncio.sleep(0)  # the commits are handled and queued; their write has not run yet
        assert not any(t.done() for t in tasks)
        assert adapter.coordinator.committed_offsets("g") == {}
        fetched = await adapter.offset_fetch(
            FETCH_V7,
            of.OffsetFetchRequest(
                group_id="g", topics=[of.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])],
                require_stable=True,
            ),
        )
        assert [(p.committed_offset, p.error_code) for p in fetched.topics[0].partitions] == [
            (50, 0), (51, 0), (52, 0)
        ]
        assert [codes(r) for r in await asyncio.gather(*tasks)] == [[0]] * 3
    finally:
        await broker.stop()


@pytest.mark.parametrize("generation", [5, 0])
async def test_a_rejected_commit_is_answered_without_a_write(generation: int) -> None:
    broker, adapter = await started(storage="memory")
    try:
        before = adapter.appends
        request = commit("nobody", 0, 1)
        request.generation_id_or_member_epoch = generation
        request.member_id = "ghost"
        response = await adapter.offset_commit(COMMIT_V9, request)
        assert codes(response) == [ErrorCode.GROUP_ID_NOT_FOUND]
        assert adapter.appends == before
    finally:
        await broker.stop()
