"""OffsetFetch shows only durable committed offsets (broker/unsynced_offsets.py).

With the fsync policy a commit is written and replayed at once but answered only after
its sync; an OffsetFetch in that window (another connection) must still read the offset
that was durable before it, as must one after a failed sync. The committer's sync is
replaced by a gate the test opens or fails, so nothing depends on timing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from broker_helpers import COMMIT_V9, codes, commit, started

from slipstream.broker.admin.http_server import HttpRequest
from slipstream.broker.broker import Broker
from slipstream.broker.groups import GroupCoordinatorAdapter
from slipstream.broker.unsynced_offsets import UnsyncedOffsets
from slipstream.client import AIOProducer
from slipstream.coordinator import records as rec
from slipstream.coordinator.offset_and_metadata import OffsetAndMetadata
from slipstream.coordinator.result import RequestContext
from slipstream.log.api import LogConfig
from slipstream.log.memory import MemoryLog
from slipstream.protocol.apis import delete_groups as dg
from slipstream.protocol.apis import offset_fetch as of
from slipstream.protocol.apis import txn_offset_commit as toc
from slipstream.protocol.errors import ErrorCode


def ctx(version: int) -> RequestContext:
    return RequestContext(api_version=version, client_id="test", client_host="/127.0.0.1")


class GatedSync:
    """Stands in for the committer's sync: each call waits until the test opens the gate,
    then fails (``fail``) or runs the real sync."""

    def __init__(self, real: Callable[[Any], Awaitable[None]]) -> None:
        self.real = real
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False
        self.waiting = 0

    async def __call__(self, plog: Any) -> None:
        self.waiting += 1
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        if self.fail:
            raise OSError("fsync failed")
        await self.real(plog)

    async def until_waiting(self) -> None:
        for _ in range(100):
            if self.waiting:
                return
            await asyncio.sleep(0)
        raise AssertionError("no sync started")


async def gated(tmp_path: Path, **settings: Any) -> tuple[Broker, GroupCoordinatorAdapter, GatedSync]:
    broker, adapter = await started(storage="disk", data_dir=str(tmp_path), durability="fsync", **settings)
    gate = GatedSync(adapter.state.committer.sync)
    adapter.state.committer.sync = gate  # type: ignore[method-assign]
    return broker, adapter, gate


async def named(adapter: GroupCoordinatorAdapter, version: int, *partitions: int, stable: bool = False) -> list[Any]:
    """(offset, metadata, error) of t-partitions of group g, through OffsetFetch ``version``."""
    if version >= 8:
        request = of.OffsetFetchRequest(
            groups=[
                of.OffsetFetchRequestGroup(
                    group_id="g", topics=[of.OffsetFetchRequestTopics(name="t", partition_indexes=list(partitions))]
                )
            ],
            require_stable=stable,
        )
        response = await adapter.offset_fetch(ctx(version), request)
        topics: Any = response.groups[0].topics
    else:
        request = of.OffsetFetchRequest(
            group_id="g",
            topics=[of.OffsetFetchRequestTopic(name="t", partition_indexes=list(partitions))],
            require_stable=stable,
        )
        topics = (await adapter.offset_fetch(ctx(version), request)).topics
    return [(p.committed_offset, p.metadata, p.error_code) for t in topics for p in t.partitions]


async def every(adapter: GroupCoordinatorAdapter, version: int) -> dict[tuple[str, int], int]:
    """Every committed offset of group g, through an all-partitions OffsetFetch."""
    if version >= 8:
        request = of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g", topics=None)])
        response = await adapter.offset_fetch(ctx(version), request)
        assert response.groups[0].error_code == 0
        topics: Any = response.groups[0].topics
    else:
        response7 = await adapter.offset_fetch(ctx(version), of.OffsetFetchRequest(group_id="g", topics=None))
        assert response7.error_code == 0
        topics = response7.topics
    return {(t.name, p.partition_index): p.committed_offset for t in topics for p in t.partitions}


async def test_a_fetch_while_a_commit_waits_for_its_sync_reads_the_durable_offset(tmp_path: Path) -> None:
    broker, adapter, gate = await gated(tmp_path)
    try:
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 5))) == [0]
        gate.gate.clear()
        pending = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, 9)))
        await gate.until_waiting()
        assert adapter.coordinator.committed_offsets("g")[("t", 0)].offset == 9  # applied, not durable
        for version in (1, 5, 7, 8, 10):
            assert await named(adapter, version, 0) == [(5, "m", 0)]
            assert await every(adapter, version) == {("t", 0): 5}
        assert not pending.done()
        gate.gate.set()
        assert codes(await pending) == [0]
        for version in (1, 7, 8):
            assert await named(adapter, version, 0) == [(9, "m", 0)]
            assert await every(adapter, version) == {("t", 0): 9}
    finally:
        await broker.stop()


async def test_a_first_commit_is_not_seen_before_its_sync(tmp_path: Path) -> None:
    broker, adapter, gate = await gated(tmp_path)
    try:
        gate.gate.clear()
        pending = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 3, 7)))
        await gate.until_waiting()
        assert await named(adapter, 7, 3) == [(-1, "", 0)]
        assert await every(adapter, 8) == {}
        assert await every(adapter, 6) == {}
        gate.gate.set()
        assert codes(await pending) == [0]
        assert await every(adapter, 8) == {("t", 3): 7}
    finally:
        await broker.stop()


async def test_require_stable_still_answers_unstable_while_the_commit_is_pending(tmp_path: Path) -> None:
    broker, adapter, gate = await gated(tmp_path)
    try:
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 5))) == [0]
        gate.gate.clear()
        pending = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, 9)))
        await gate.until_waiting()
        assert await named(adapter, 7, 0, stable=True) == [(-1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)]
        gate.gate.set()
        await pending
        assert await named(adapter, 7, 0, stable=True) == [(9, "m", 0)]
    finally:
        await broker.stop()


async def test_a_failed_sync_keeps_the_durable_offset_until_a_later_sync_covers_the_write(tmp_path: Path) -> None:
    broker, adapter, gate = await gated(tmp_path)
    try:
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 5))) == [0]
        gate.fail = True
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 9))) == [ErrorCode.NOT_COORDINATOR]
        gate.fail = False
        assert await named(adapter, 8, 0) == [(5, "m", 0)]
        assert await every(adapter, 7) == {("t", 0): 5}
        # The record is in the log: the next sync of that offsets partition makes it durable.
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 1, 3))) == [0]
        assert await every(adapter, 8) == {("t", 0): 9, ("t", 1): 3}
    finally:
        await broker.stop()


async def test_offsets_of_a_deleted_group_stay_visible_while_its_tombstones_fail_to_sync(tmp_path: Path) -> None:
    broker, adapter, gate = await gated(tmp_path)
    try:
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 5))) == [0]
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 2, 6))) == [0]
        gate.fail = True
        deleted = await adapter.delete_groups(ctx(2), dg.DeleteGroupsRequest(groups_names=["g"]))
        assert deleted.results[0].error_code != 0
        assert adapter.coordinator.committed_offsets("g") == {}  # applied, not durable
        gate.fail = False
        assert await every(adapter, 8) == {("t", 0): 5, ("t", 2): 6}
        assert await named(adapter, 7, 0, 1, 2) == [(5, "m", 0), (-1, "", 0), (6, "m", 0)]
    finally:
        await broker.stop()


async def test_offsets_a_transaction_commits_are_shown_once_its_marker_is_synced(tmp_path: Path) -> None:
    broker, adapter, gate = await gated(tmp_path)
    try:
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 5))) == [0]
        pid = 4242
        request = toc.TxnOffsetCommitRequest(
            transactional_id="tx",
            group_id="g",
            producer_id=pid,
            producer_epoch=0,
            topics=[
                toc.TxnOffsetCommitRequestTopic(
                    name="t", partitions=[toc.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7)]
                )
            ],
        )
        assert codes(await adapter.txn_offset_commit(ctx(3), request)) == [0]
        partition = adapter.coordinator.partition_for("g")
        gate.fail = True
        error = await adapter.complete_transaction(partition, pid, 0, True, 3)
        assert error == ErrorCode.KAFKA_STORAGE_ERROR
        gate.fail = False
        assert adapter.coordinator.committed_offsets("g")[("t", 0)].offset == 7  # applied, not durable
        assert await named(adapter, 8, 0) == [(5, "m", 0)]
        # The marker is in the log: the next sync of that offsets partition makes it durable.
        assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 1, 3))) == [0]
        assert await every(adapter, 8) == {("t", 0): 7, ("t", 1): 3}
    finally:
        await broker.stop()


async def four_records_and_offset_one_committed(broker: Broker, adapter: GroupCoordinatorAdapter) -> None:
    """Partition t-0 holds four records; group g has committed offset 1 (lag 3)."""
    async with AIOProducer(broker.bootstrap_servers, linger_ms=0) as producer:
        for _ in range(4):
            await producer.send_and_wait("t", b"v", partition=0)
    assert codes(await adapter.offset_commit(COMMIT_V9, commit("g", 0, 1))) == [0]


async def admin_get(broker: Broker, path: str) -> str:
    assert broker.admin is not None
    response = await broker.admin.answer(HttpRequest("GET", path, {}, "HTTP/1.1", {}))
    assert response.status == 200, response
    return response.body.decode()


async def test_the_admin_listener_shows_the_offsets_offset_fetch_answers(tmp_path: Path) -> None:
    """Lag and committed offsets in the admin API, console and metrics are what a consumer
    would resume from: the durable offset while a newer commit waits for its sync."""
    broker, adapter, gate = await gated(tmp_path, admin_port=0)
    assert broker.admin is not None and broker.state is not None
    try:
        await four_records_and_offset_one_committed(broker, adapter)
        gate.gate.clear()
        pending = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, 3)))
        await gate.until_waiting()
        assert adapter.coordinator.committed_offsets("g")[("t", 0)].offset == 3  # applied, not durable
        assert await every(adapter, 8) == {("t", 0): 1}

        document = json.loads(await admin_get(broker, "/api/groups/g"))
        assert document["offsets"] == [
            {"topic": "t", "partition": 0, "committed_offset": 1, "log_end_offset": 4, "lag": 3}
        ]
        assert [g["lag"] for g in json.loads(await admin_get(broker, "/api/groups")) if g["group_id"] == "g"] == [3]
        metrics = await admin_get(broker, "/metrics")
        labels = 'group="g",partition="0",topic="t"'
        assert f"slipstream_consumer_group_committed_offset{{{labels}}} 1.0" in metrics
        assert f"slipstream_consumer_group_lag{{{labels}}} 3.0" in metrics
        broker.admin.sample_lag()
        history = json.loads(await admin_get(broker, "/api/groups/g/lag"))
        # (The listener's own sampler may have added samples since the first commit: lag 3 too.)
        assert history["samples"]
        assert all(sample["lag"] == {"t-0": 3} for sample in history["samples"])

        gate.gate.set()
        assert codes(await pending) == [0]
        document = json.loads(await admin_get(broker, "/api/groups/g"))
        assert [(p["committed_offset"], p["lag"]) for p in document["offsets"]] == [(3, 1)]
    finally:
        await broker.stop()


async def test_a_deleted_group_stays_in_the_metrics_and_lag_samples_until_its_tombstones_are_durable(
    tmp_path: Path,
) -> None:
    broker, adapter, gate = await gated(tmp_path, admin_port=0)
    assert broker.admin is not None and broker.state is not None
    try:
        await four_records_and_offset_one_committed(broker, adapter)
        gate.fail = True
        deleted = await adapter.delete_groups(ctx(2), dg.DeleteGroupsRequest(groups_names=["g"]))
        assert deleted.results[0].error_code != 0
        gate.fail = False
        assert adapter.coordinator.committed_offsets("g") == {}  # applied, not durable
        assert "g" not in adapter.coordinator.group_ids()

        labels = 'group="g",partition="0",topic="t"'
        metrics = await admin_get(broker, "/metrics")
        assert f"slipstream_consumer_group_committed_offset{{{labels}}} 1.0" in metrics
        assert f"slipstream_consumer_group_lag{{{labels}}} 3.0" in metrics
        broker.admin.sample_lag()
        history = json.loads(await admin_get(broker, "/api/groups/g/lag"))
        assert history["samples"][-1]["lag"] == {"t-0": 3}

        # The next sync of that offsets partition makes the tombstone durable: g is gone.
        partition = adapter.coordinator.partition_for("g")
        other = next(f"h{i}" for i in range(1000) if adapter.coordinator.partition_for(f"h{i}") == partition)
        assert codes(await adapter.offset_commit(COMMIT_V9, commit(other, 1, 0))) == [0]
        metrics = await admin_get(broker, "/metrics")
        assert 'group="g"' not in metrics
        broker.admin.sample_lag()
        assert broker.admin.lag_history.samples("g") == []
    finally:
        await broker.stop()


async def test_default_durability_reads_what_is_applied_and_never_syncs(tmp_path: Path) -> None:
    broker, adapter = await started(storage="disk", data_dir=str(tmp_path))
    try:
        synced: list[Any] = []

        async def spy(plog: Any) -> None:
            synced.append(plog)

        adapter.state.committer.sync = spy  # type: ignore[method-assign]
        pending = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, 5)))
        await asyncio.sleep(0)  # handled and queued, not yet answered
        assert not pending.done()
        assert await named(adapter, 7, 0) == [(5, "m", 0)]  # written out before the fetch
        assert codes(await pending) == [0]
        assert await every(adapter, 8) == {("t", 0): 5}
        assert synced == []
    finally:
        await broker.stop()


# ---------------------------------------------------------------- the view alone


def om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 0)


def test_a_sync_makes_durable_only_the_writes_made_before_it_was_asked_for() -> None:
    view = UnsyncedOffsets()
    plog = MemoryLog(LogConfig())
    other = MemoryLog(LogConfig())
    committed: dict[tuple[str, str, int], OffsetAndMetadata | None] = {("g", "t", 0): om(1)}

    def write(offset: int | None) -> None:
        value = None if offset is None else om(offset)
        record = rec.offset_tombstone(0, "g", "t", 0) if value is None else rec.offset_commit_record(0, "g", "t", 0, value)
        view.written(plog, 0, [record], lambda g, t, p: committed.get((g, t, p)))
        committed[("g", "t", 0)] = value

    def shown() -> int:
        response = of.OffsetFetchResponse(
            topics=[
                of.OffsetFetchResponseTopic(
                    name="t", partitions=[of.OffsetFetchResponsePartition(partition_index=0, committed_offset=-2)]
                )
            ]
        )
        view.show_durable(7, of.OffsetFetchRequest(group_id="g", topics=[]), response)
        return response.topics[0].partitions[0].committed_offset

    write(2)
    mark = view.sync_mark()
    write(3)
    write(None)
    assert shown() == 1
    view.synced(other, view.sync_mark())  # another partition's sync covers nothing here
    assert shown() == 1
    view.synced(plog, mark)
    assert shown() == 2
    view.synced(plog, view.sync_mark())
    assert not view
    assert shown() == -2  # nothing unsynced: the coordinator's answer as it was


def test_the_durable_offsets_of_a_group_overlay_the_applied_ones() -> None:
    view = UnsyncedOffsets()
    plog = MemoryLog(LogConfig())
    durable = {("g", "t", 0): om(1), ("g", "t", 1): om(7)}
    records = [
        rec.offset_commit_record(0, "g", "t", 0, om(2)),  # moved: shown at 1
        rec.offset_tombstone(0, "g", "t", 1),  # deleted: still shown at 7
        rec.offset_commit_record(0, "g", "t", 2, om(5)),  # new: not shown yet
    ]
    view.written(plog, 0, records, lambda g, t, p: durable.get((g, t, p)))
    applied = {("t", 0): om(2), ("t", 2): om(5), ("t", 3): om(9)}

    assert view.durable_offsets("g", applied) == {("t", 0): om(1), ("t", 1): om(7), ("t", 3): om(9)}
    assert applied == {("t", 0): om(2), ("t", 2): om(5), ("t", 3): om(9)}  # not changed in place
    assert view.durable_offsets("other", applied) is applied
    view.synced(plog, view.sync_mark())
    assert view.durable_offsets("g", applied) is applied


def test_forgetting_an_offsets_partition_drops_its_writes() -> None:
    view = UnsyncedOffsets()
    plog = MemoryLog(LogConfig())
    view.written(plog, 4, [rec.offset_commit_record(4, "g", "t", 0, om(2))], lambda g, t, p: None)
    assert view
    view.forget([4])
    assert not view


def test_the_groups_with_durable_offsets_overlay_the_applied_ones() -> None:
    view = UnsyncedOffsets()
    plog = MemoryLog(LogConfig())
    durable = {("gone", "t", 0): om(1), ("kept", "t", 0): om(2)}
    records = [
        rec.offset_tombstone(0, "gone", "t", 0),  # its only offset deleted: still has one
        rec.offset_commit_record(0, "new", "t", 0, om(5)),  # its first offset: none yet
        rec.offset_tombstone(0, "kept", "t", 0),  # one of two deleted: still has the other
    ]
    view.written(plog, 0, records, lambda g, t, p: durable.get((g, t, p)))
    applied = {"new": {("t", 0): om(5)}, "kept": {("t", 1): om(3)}, "plain": {("t", 0): om(4)}}

    def offsets(group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        return applied.get(group_id, {})

    assert view.groups_with_offsets(set(applied), offsets) == {"gone", "kept", "plain"}
    view.synced(plog, view.sync_mark())
    assert view.groups_with_offsets(set(applied), offsets) == {"new", "kept", "plain"}
