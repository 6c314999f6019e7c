"""Transactions written over the wire, for tests and benchmarks: transactional
batches through Produce (with a transactional id) and their COMMIT/ABORT markers
through WriteTxnMarkers, with producer ids from InitProducerId. This is the data path
a transaction coordinator drives; it does not need one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client.connection import BrokerConnection
from ..protocol.apis import init_producer_id as ipid
from ..protocol.apis import produce as pr
from ..protocol.apis import write_txn_markers as wtm
from ..protocol.errors import KafkaError
from ..protocol.records import ProducerRecord, build_batch

TRANSACTIONAL_ID = "slipstream-wire-txn"


@dataclass
class WireTxnWriter:
    """Writes to one partition through ``conn``; tracks each producer's next sequence."""

    conn: BrokerConnection
    topic: str
    partition: int = 0
    timestamp_ms: int = 1_700_000_000_000
    _sequences: dict[int, int] = field(default_factory=dict)

    async def new_producer(self) -> int:
        response = await self.conn.request(ipid.SPEC, ipid.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000), version=4)
        if response.error_code:
            raise KafkaError(response.error_code, "InitProducerId failed")
        self._sequences[response.producer_id] = 0
        return int(response.producer_id)

    async def send(self, values: list[bytes], *, producer_id: int = -1) -> int:
        """One batch of ``values`` (keys k0, k1, ...); transactional when a producer id
        is given. Returns the batch's base offset."""
        seq = self._sequences.get(producer_id, -1)
        records = [ProducerRecord(b"k%d" % i, v, timestamp_ms=self.timestamp_ms) for i, v in enumerate(values)]
        batch = build_batch(
            records, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=seq, is_transactional=producer_id >= 0,
        )
        if producer_id >= 0:
            self._sequences[producer_id] = seq + len(values)
        request = pr.ProduceRequest(
            transactional_id=TRANSACTIONAL_ID if producer_id >= 0 else None, acks=-1, timeout_ms=10_000,
            topic_data=[pr.ProduceRequestTopicData(name=self.topic, partition_data=[
                pr.ProduceRequestPartitionData(index=self.partition, records=memoryview(batch))])],
        )
        response = await self.conn.request(pr.SPEC, request, version=9)
        part = response.responses[0].partition_responses[0]
        if part.error_code:
            raise KafkaError(part.error_code, f"produce failed: {part.error_message}")
        return int(part.base_offset)

    async def end(self, producer_id: int, *, commit: bool) -> None:
        request = wtm.WriteTxnMarkersRequest(markers=[wtm.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=0, transaction_result=commit, coordinator_epoch=0,
            topics=[wtm.WritableTxnMarkerTopic(name=self.topic, partition_indexes=[self.partition])])])
        response = await self.conn.request(wtm.SPEC, request, version=1)
        code = response.markers[0].topics[0].partitions[0].error_code
        if code:
            raise KafkaError(code, "WriteTxnMarkers failed")


@dataclass(frozen=True)
class MixedLog:
    """What :func:`write_mixed_transactions` wrote, as the values each reader must see."""

    read_committed: list[bytes]
    read_uncommitted: list[bytes]  # every data record, in offset order
    last_stable_offset: int  # where the open transaction starts
    end_offset: int


async def write_mixed_transactions(conn: BrokerConnection, topic: str, partition: int = 0) -> MixedLog:
    """Plain records, a committed and an aborted transaction, two interleaved ones (one
    committed, one aborted), more plain records, then a transaction left open with
    plain records after it (hidden from read_committed readers by the LSO)."""
    w = WireTxnWriter(conn, topic, partition)
    committed: list[bytes] = []
    everything: list[bytes] = []

    async def send(values: list[bytes], pid: int = -1, *, visible: bool) -> None:
        await w.send(values, producer_id=pid)
        everything.extend(values)
        if visible:
            committed.extend(values)

    a, b, c, d, e = [await w.new_producer() for _ in range(5)]
    await send([b"plain-0", b"plain-1"], visible=True)
    await send([b"a-0", b"a-1"], a, visible=True)
    await send([b"a-2"], a, visible=True)
    await w.end(a, commit=True)
    await send([b"b-0", b"b-1", b"b-2"], b, visible=False)
    await w.end(b, commit=False)
    await send([b"c-0"], c, visible=True)
    await send([b"d-0", b"d-1"], d, visible=False)
    await send([b"c-1"], c, visible=True)
    await send([b"plain-2"], visible=True)
    await send([b"d-2"], d, visible=False)
    await w.end(d, commit=False)
    await send([b"plain-3"], visible=True)
    await w.end(c, commit=True)
    lso = await w.send([b"e-0"], producer_id=e)  # never ended: the LSO stays here
    everything.append(b"e-0")
    await send([b"plain-4"], visible=False)
    end = await w.send([b"plain-5"]) + 1
    everything.append(b"plain-5")
    return MixedLog(committed, everything, lso, end)


__all__ = ["MixedLog", "WireTxnWriter", "write_mixed_transactions"]
