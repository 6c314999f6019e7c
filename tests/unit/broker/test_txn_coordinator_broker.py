"""The transaction coordinator inside the broker, on the wire: a whole transaction with
data and group offsets, restarts (a transaction left in PrepareCommit completes after
the restart), loading, and the broker-side batched AddPartitionsToTxn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker_helpers import raw_connection
from txn_helpers import txn_batch

from slipstream.broker.broker import Broker
from slipstream.coordinator.records import partition_for
from slipstream.protocol.apis import add_offsets_to_txn as aot
from slipstream.protocol.apis import add_partitions_to_txn as apt
from slipstream.protocol.apis import describe_transactions as dt
from slipstream.protocol.apis import end_txn as et
from slipstream.protocol.apis import fetch as f
from slipstream.protocol.apis import find_coordinator as fc
from slipstream.protocol.apis import init_producer_id as ipi
from slipstream.protocol.apis import list_transactions as lt
from slipstream.protocol.apis import offset_fetch as of
from slipstream.protocol.apis import produce as pr
from slipstream.protocol.apis import txn_offset_commit as toc
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.records import iter_batches

E = ErrorCode
TID = "tx-1"
GROUP = "g1"


class Client:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def init(self, tid: str = TID, timeout_ms: int = 60_000) -> ipi.InitProducerIdResponse:
        return await self.conn.request(
            ipi.SPEC, ipi.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms), version=4
        )

    async def add(self, pid: int, epoch: int, topic: str, *partitions: int, version: int = 3) -> dict[int, int]:
        request = apt.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TID,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[apt.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))],
        )
        response = await self.conn.request(apt.SPEC, request, version=version)
        return {p.partition_index: p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}

    async def produce(self, pid: int, epoch: int, topic: str, seq: int) -> int:
        request = pr.ProduceRequest(
            transactional_id=TID,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                pr.ProduceRequestTopicData(
                    name=topic,
                    partition_data=[pr.ProduceRequestPartitionData(index=0, records=txn_batch(pid, seq, epoch=epoch))],
                )
            ],
        )
        response = await self.conn.request(pr.SPEC, request, version=9)
        return int(response.responses[0].partition_responses[0].error_code)

    async def add_offsets(self, pid: int, epoch: int) -> int:
        request = aot.AddOffsetsToTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id=GROUP)
        return int((await self.conn.request(aot.SPEC, request, version=3)).error_code)

    async def txn_commit(self, pid: int, epoch: int, topic: str, offset: int) -> int:
        request = toc.TxnOffsetCommitRequest(
            transactional_id=TID,
            group_id=GROUP,
            producer_id=pid,
            producer_epoch=epoch,
            topics=[
                toc.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=[toc.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)],
                )
            ],
        )
        response = await self.conn.request(toc.SPEC, request, version=3)
        return int(response.topics[0].partitions[0].error_code)

    async def end(self, pid: int, epoch: int, commit: bool) -> int:
        request = et.EndTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=commit)
        return int((await self.conn.request(et.SPEC, request, version=3)).error_code)

    async def state(self, tid: str = TID) -> dt.DescribeTransactionsTransactionState:
        response = await self.conn.request(dt.SPEC, dt.DescribeTransactionsRequest(transactional_ids=[tid]), version=0)
        return response.transaction_states[0]

    async def committed(self, topic: str, require_stable: bool = True) -> tuple[int, int]:
        request = of.OffsetFetchRequest(
            groups=[of.OffsetFetchRequestGroup(group_id=GROUP, topics=[of.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])],
            require_stable=require_stable,
        )
        response = await self.conn.request(of.SPEC, request, version=8)
        p = response.groups[0].topics[0].partitions[0]
        return int(p.error_code), int(p.committed_offset)

    async def wait_state(self, want: str, tid: str = TID) -> None:
        for _ in range(200):
            if (await self.state(tid)).transaction_state == want:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{tid} never reached {want}: {await self.state(tid)}")


def control_batches(b: Broker, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    """(producer id, control type) of every control batch in a partition."""
    assert b.state is not None
    plog = b.state.topics.partition(topic, partition)
    assert plog is not None
    read = plog.read(plog.log_start_offset, 1 << 20)
    out = []
    for chunk in read.chunks:
        for header, records in iter_batches(chunk):
            if header.is_control:
                out.append((header.producer_id, records[0].control_type))
    return out


async def test_commit_with_data_and_offsets_in_memory() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})  # type: ignore[union-attr]
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            found = await conn.request(fc.SPEC, fc.FindCoordinatorRequest(key_type=1, coordinator_keys=[TID]), version=4)
            assert found.coordinators[0].error_code == E.NONE and found.coordinators[0].port == b.port
            r = await c.init()
            assert r.error_code == E.NONE
            pid, epoch = r.producer_id, r.producer_epoch
            assert await c.add(pid, epoch, "t", 0) == {0: E.NONE}
            assert await c.add(pid, epoch, "nope", 0) == {0: E.UNKNOWN_TOPIC_OR_PARTITION}
            assert await c.produce(pid, epoch, "t", 0) == E.NONE
            assert await c.add_offsets(pid, epoch) == E.NONE
            assert await c.txn_commit(pid, epoch, "t", 2) == E.NONE
            assert await c.committed("t") == (E.UNSTABLE_OFFSET_COMMIT, -1)
            state = await c.state()
            assert state.transaction_state == "Ongoing"
            offsets_partition = partition_for(GROUP, b.config.offsets_topic_partitions)
            assert sorted((t.topic, t.partitions) for t in state.topics) == [
                ("__consumer_offsets", [offsets_partition]),
                ("t", [0]),
            ]
            assert await c.end(pid, epoch, True) == E.NONE
            await c.wait_state("CompleteCommit")
            assert await c.committed("t") == (E.NONE, 2)
            assert control_batches(b, "t") == [(pid, 1)]
            assert control_batches(b, "__consumer_offsets", offsets_partition) == [(pid, 1)]
            listed = await conn.request(lt.SPEC, lt.ListTransactionsRequest(state_filters=["CompleteCommit"]), version=1)
            assert [(t.transactional_id, t.producer_id) for t in listed.transaction_states] == [(TID, pid)]
            # The next transaction aborts: its offsets vanish, its data gets an ABORT marker.
            assert await c.add(pid, epoch, "t", 0) == {0: E.NONE}
            assert await c.produce(pid, epoch, "t", 2) == E.NONE
            assert await c.add_offsets(pid, epoch) == E.NONE
            assert await c.txn_commit(pid, epoch, "t", 4) == E.NONE
            assert await c.end(pid, epoch, False) == E.NONE
            await c.wait_state("CompleteAbort")
            assert await c.committed("t") == (E.NONE, 2)
            assert control_batches(b, "t") == [(pid, 1), (pid, 0)]


async def test_prepare_commit_at_crash_completes_after_restart(tmp_path: Path) -> None:
    settings: dict[str, Any] = {"storage": "disk", "data_dir": str(tmp_path), "port": 0}
    b = Broker(**settings)
    await b.start()
    try:
        b.state.topics.create("t", 1, {})  # type: ignore[union-attr]
        assert b.transactions is not None
        # The crash point: PrepareCommit is durable and answered, no marker written yet.
        b.transactions._spawn_markers = lambda job: None  # type: ignore[method-assign]
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            r = await c.init()
            pid, epoch = r.producer_id, r.producer_epoch
            await c.add(pid, epoch, "t", 0)
            assert await c.produce(pid, epoch, "t", 0) == E.NONE
            await c.add_offsets(pid, epoch)
            assert await c.txn_commit(pid, epoch, "t", 2) == E.NONE
            assert await c.end(pid, epoch, True) == E.NONE
            assert (await c.state()).transaction_state == "PrepareCommit"
            assert control_batches(b, "t") == []
    finally:
        await b.stop()

    b = Broker(**settings)
    await b.start()
    try:
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            await c.wait_state("CompleteCommit")
            assert control_batches(b, "t") == [(pid, 1)]
            assert await c.committed("t") == (E.NONE, 2)
            # The producer carries on with its next transaction.
            assert await c.add(pid, epoch, "t", 0) == {0: E.NONE}
            # A new instance fences it: its transaction is aborted, it retries and gets epoch + 2.
            fenced = await c.init()
            assert fenced.error_code == E.CONCURRENT_TRANSACTIONS
            await c.wait_state("CompleteAbort")
            again = await c.init()
            assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 2)
    finally:
        await b.stop()

    # A third start replays the completed state and the group's markers alike.
    b = Broker(**settings)
    await b.start()
    try:
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            state = await c.state()
            assert (state.transaction_state, state.producer_epoch) == ("Empty", epoch + 2)
            assert await c.committed("t") == (E.NONE, 2)
    finally:
        await b.stop()


async def test_batched_verify_only() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 2, {})  # type: ignore[union-attr]
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            r = await c.init()
            pid, epoch = r.producer_id, r.producer_epoch
            await c.add(pid, epoch, "t", 0)
            request = apt.AddPartitionsToTxnRequest(
                transactions=[
                    apt.AddPartitionsToTxnTransaction(
                        transactional_id=TID, producer_id=pid, producer_epoch=epoch, verify_only=True,
                        topics=[apt.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])],
                    ),
                    apt.AddPartitionsToTxnTransaction(
                        transactional_id="unknown", producer_id=pid, producer_epoch=epoch, verify_only=True,
                        topics=[apt.AddPartitionsToTxnTopic(name="t", partitions=[0])],
                    ),
                ]
            )
            response = await conn.request(apt.SPEC, request, version=5)
            errors = {
                (res.transactional_id, p.partition_index): p.partition_error_code
                for res in response.results_by_transaction
                for t in res.topic_results
                for p in t.results_by_partition
            }
            assert errors == {
                (TID, 0): E.NONE,
                (TID, 1): E.TRANSACTION_ABORTABLE,
                ("unknown", 0): E.INVALID_PRODUCER_ID_MAPPING,
            }
            # Verification added nothing.
            assert [(t.topic, t.partitions) for t in (await c.state()).topics] == [("t", [0])]


async def test_read_committed_fetch_skips_aborted_data() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})  # type: ignore[union-attr]
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            r = await c.init()
            pid, epoch = r.producer_id, r.producer_epoch
            await c.add(pid, epoch, "t", 0)
            await c.produce(pid, epoch, "t", 0)
            await c.end(pid, epoch, False)
            await c.wait_state("CompleteAbort")
            request = f.FetchRequest(
                max_wait_ms=0, isolation_level=1, session_epoch=-1,
                topics=[f.FetchRequestTopic(topic="t", partitions=[
                    f.FetchRequestPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ])],
            )
            response = await conn.request(f.SPEC, request, version=12)
            p = response.responses[0].partitions[0]
            assert p.last_stable_offset == 3  # two records and the marker
            assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]


async def test_requests_while_loading_are_answered_load_in_progress() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})  # type: ignore[union-attr]
        assert b.transactions is not None
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            r = await c.init()
            coordinator = b.transactions.coordinator
            coordinator.begin_loading()
            assert (await c.init()).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            assert await c.add(r.producer_id, r.producer_epoch, "t", 0) == {0: E.COORDINATOR_LOAD_IN_PROGRESS}
            assert await c.end(r.producer_id, r.producer_epoch, True) == E.COORDINATOR_LOAD_IN_PROGRESS
            assert (await c.state()).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            coordinator.finish_loading(b.state.clock())  # type: ignore[union-attr]
            assert await c.add(r.producer_id, r.producer_epoch, "t", 0) == {0: E.NONE}


async def test_write_txn_markers_to_an_offsets_partition_ends_its_pending_offsets() -> None:
    """What a coordinator on another broker sends to the group's coordinator: the offsets
    of the producer's transaction commit there (replayed by the group coordinator)."""
    from slipstream.protocol.apis import write_txn_markers as wtm

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})  # type: ignore[union-attr]
        offsets_partition = partition_for(GROUP, b.config.offsets_topic_partitions)
        async with raw_connection(f"127.0.0.1:{b.port}") as conn:
            c = Client(conn)
            pid = 4242  # a producer of a coordinator elsewhere: this broker never saw it
            assert await c.txn_commit(pid, 0, "t", 7) == E.NONE
            assert await c.committed("t") == (E.UNSTABLE_OFFSET_COMMIT, -1)
            request = wtm.WriteTxnMarkersRequest(
                markers=[
                    wtm.WritableTxnMarker(
                        producer_id=pid,
                        producer_epoch=0,
                        transaction_result=True,
                        topics=[wtm.WritableTxnMarkerTopic(name="__consumer_offsets", partition_indexes=[offsets_partition])],
                        coordinator_epoch=3,
                    )
                ]
            )
            response = await conn.request(wtm.SPEC, request, version=1)
            assert [p.error_code for t in response.markers[0].topics for p in t.partitions] == [E.NONE]
            assert await c.committed("t") == (E.NONE, 7)
            assert control_batches(b, "__consumer_offsets", offsets_partition) == [(pid, 1)]
