"""The transactional AIOProducer / Producer against a real in-process broker.

What a transaction wrote is read back with a read_committed confluent-kafka consumer
(an independent client) and from the partition logs (batch attributes, markers)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from slipstream.broker.broker import Broker
from slipstream.client.cluster import Cluster
from slipstream.client.consumer import Consumer as SlipConsumer
from slipstream.client.producer import AIOProducer, Producer
from slipstream.client.transactions import (
    ConsumerGroupMetadata,
    TransactionError,
    TransactionStateError,
    TxnState,
    end_transaction,
)
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.records import iter_batches


def _topic(broker: Broker, partitions: int = 2) -> str:
    assert broker.state is not None
    name = f"t-{uuid.uuid4().hex[:8]}"
    broker.state.topics.create(name, partitions, {})
    return name


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    eof: set[int] = set()
    try:
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF
                eof.add(msg.partition())
                if len(eof) == partitions:
                    break
                continue
            eof.discard(msg.partition())
            values.append(msg.value().decode())
    finally:
        consumer.close()
    return sorted(values)


def control_types(broker: Broker, topic: str, partition: int) -> list[int | None]:
    assert broker.state is not None
    plog = broker.state.topics.partition(topic, partition)
    assert plog is not None
    out: list[int | None] = []
    for chunk in plog.read(0, 1 << 20).chunks:
        for header, records in iter_batches(chunk):
            out.append(records[0].control_type if header.is_control else None)
    return out


async def test_commit_and_abort() -> None:
    async with Broker(storage="memory", port=0) as broker:
        topic = _topic(broker)
        async with AIOProducer(broker.bootstrap_servers, transactional_id="tx-a", linger_ms=1) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            for i in range(6):
                await producer.send(topic, f"c{i}".encode(), partition=i % 2)
            await producer.commit_transaction()
            producer.begin_transaction()
            acks = [await producer.send(topic, f"a{i}".encode(), partition=i % 2) for i in range(4)]
            await producer.flush()
            assert all(a.done() and a.exception() is None for a in acks)
            await producer.abort_transaction()
            # A transaction with nothing in it ends without asking the broker.
            producer.begin_transaction()
            await producer.commit_transaction()
        values = await asyncio.to_thread(read_committed, broker.bootstrap_servers, topic, 2)
        assert values == sorted(f"c{i}" for i in range(6))
        # Partition 0: c0 c2 c4 (one transactional batch or more), COMMIT, a0 a2, ABORT.
        kinds = control_types(broker, topic, 0)
        assert [k for k in kinds if k is not None] == [1, 0]


async def test_records_not_sent_before_an_abort_fail_as_aborted() -> None:
    from slipstream.client import TransactionAbortedError

    async with Broker(storage="memory", port=0) as broker:
        topic = _topic(broker)
        async with AIOProducer(broker.bootstrap_servers, transactional_id="tx-x", linger_ms=60_000) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            acks = [await producer.send(topic, f"u{i}".encode(), partition=0) for i in range(3)]
            await producer.abort_transaction()  # the records are still lingering: never sent
            for ack in acks:
                assert ack.done()
                error = ack.exception()
                assert isinstance(error, TransactionAbortedError)
                assert isinstance(error, TransactionError) and error.abortable
                assert str(error) == "the transaction was aborted before this record was sent"
        assert await asyncio.to_thread(read_committed, broker.bootstrap_servers, topic, 2) == []


async def test_state_rules() -> None:
    async with Broker(storage="memory", port=0) as broker:
        topic = _topic(broker)
        async with AIOProducer(broker.bootstrap_servers, transactional_id="tx-b") as producer:
            with pytest.raises(TransactionStateError):
                await producer.send(topic, b"x")  # before init_transactions
            with pytest.raises(TransactionStateError):
                producer.begin_transaction()
            await producer.init_transactions()
            with pytest.raises(TransactionStateError):
                await producer.send(topic, b"x")  # before begin_transaction
            with pytest.raises(TransactionStateError):
                await producer.commit_transaction()
            producer.begin_transaction()
            with pytest.raises(TransactionStateError):
                producer.begin_transaction()
        with pytest.raises(ValueError):
            AIOProducer(broker.bootstrap_servers, transactional_id="x", enable_idempotence=False)


async def test_new_instance_fences_the_old_one() -> None:
    async with Broker(storage="memory", port=0) as broker:
        topic = _topic(broker, 1)
        old = await AIOProducer(broker.bootstrap_servers, transactional_id="tx-c", linger_ms=1).start()
        await old.init_transactions()
        old.begin_transaction()
        await old.send(topic, b"zombie")
        await old.flush()
        async with AIOProducer(broker.bootstrap_servers, transactional_id="tx-c") as fresh:
            await fresh.init_transactions()  # aborts the old transaction (retrying CONCURRENT_TRANSACTIONS)
            fresh.begin_transaction()
            await fresh.send(topic, b"fresh")
            await fresh.commit_transaction()
        with pytest.raises(TransactionError) as info:
            await old.commit_transaction()
        assert info.value.fatal and info.value.code == ErrorCode.PRODUCER_FENCED
        assert old._txn is not None and old._txn.state is TxnState.FATAL_ERROR
        with pytest.raises(TransactionError):
            old.begin_transaction()
        await old.close()
        assert await asyncio.to_thread(read_committed, broker.bootstrap_servers, topic, 1) == ["fresh"]


async def _leave_open(bootstrap: str, tid: str, topic: str, value: bytes) -> tuple[int, int]:
    """A producer that writes ``value`` in a transaction, flushes and closes without ending it."""
    producer = await AIOProducer(bootstrap, transactional_id=tid, linger_ms=1).start()
    try:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(topic, value)
        await producer.flush()
        return producer.producer_id, producer.producer_epoch
    finally:
        await producer.close()


async def test_end_transaction_completes_a_transaction_left_open() -> None:
    async with Broker(storage="memory", port=0) as broker:
        topic = _topic(broker, 1)
        bootstrap = broker.bootstrap_servers
        pid, epoch = await _leave_open(bootstrap, "tx-2pc", topic, b"kept")
        cluster = Cluster(bootstrap)  # fresh: no metadata yet
        try:
            await end_transaction(cluster, "tx-2pc", pid, epoch, commit=True)
            await end_transaction(cluster, "tx-2pc", pid, epoch, commit=True)  # a retry is harmless
            with pytest.raises(TransactionError) as wrong_way:
                await end_transaction(cluster, "tx-2pc", pid, epoch, commit=False)
            assert wrong_way.value.code == ErrorCode.INVALID_TXN_STATE

            pid, epoch = await _leave_open(bootstrap, "tx-2pc", topic, b"dropped")
            await end_transaction(cluster, "tx-2pc", pid, epoch, commit=False)

            pid, epoch = await _leave_open(bootstrap, "tx-2pc", topic, b"fenced")
            await _leave_open(bootstrap, "tx-2pc", topic, b"newer")  # fences (and aborts) the one before
            with pytest.raises(TransactionError) as fenced:
                await end_transaction(cluster, "tx-2pc", pid, epoch, commit=True)
            assert fenced.value.fatal
        finally:
            await cluster.close()
        assert await asyncio.to_thread(read_committed, bootstrap, topic, 1) == ["kept"]


def test_blocking_producer_with_offsets_of_a_group() -> None:
    with Broker(storage="memory", port=0) as broker:
        source, sink = _topic(broker, 1), _topic(broker, 1)
        group = f"g-{uuid.uuid4().hex[:6]}"
        with Producer(broker.bootstrap_servers) as plain:
            for i in range(5):
                plain.produce(source, f"v{i}".encode())
        consumer = SlipConsumer(broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False)
        producer = Producer(broker.bootstrap_servers, transactional_id="tx-d")
        try:
            consumer.subscribe([source])
            got: list[str] = []
            for _ in range(100):
                got.extend(m.value.decode() for m in consumer.poll(0.1) if m.value)  # type: ignore[union-attr]
                if len(got) == 5:
                    break
            assert got == [f"v{i}" for i in range(5)]
            metadata = consumer.group_metadata()
            assert metadata.group_id == group and metadata.generation_id >= 1 and metadata.member_id
            producer.init_transactions()
            # An aborted copy leaves neither output nor offsets.
            producer.begin_transaction()
            producer.produce(sink, b"copy-aborted")
            producer.send_offsets_to_transaction({(source, 0): 5}, metadata)
            producer.abort_transaction()
            assert consumer.committed([(source, 0)]) == {(source, 0): None}
            producer.begin_transaction()
            for value in got:
                producer.produce(sink, f"copy-{value}".encode())
            producer.send_offsets_to_transaction({(source, 0): 5}, metadata)
            producer.commit_transaction()
            assert consumer.committed([(source, 0)]) == {(source, 0): 5}
            # A stale generation is refused: abortable.
            producer.begin_transaction()
            stale = ConsumerGroupMetadata(group, metadata.generation_id + 7, metadata.member_id)
            with pytest.raises(TransactionError) as info:
                producer.send_offsets_to_transaction({(source, 0): 5}, stale)
            assert info.value.abortable and info.value.code == ErrorCode.ILLEGAL_GENERATION
            producer.abort_transaction()
        finally:
            producer.close()
            consumer.close()
        assert read_committed(broker.bootstrap_servers, sink, 1) == sorted(f"copy-v{i}" for i in range(5))


def test_offsets_of_a_consumer_protocol_group() -> None:
    """KIP-848 members: the generation is the member epoch, checked by TxnOffsetCommit."""
    with Broker(storage="memory", port=0) as broker:
        source, sink = _topic(broker, 1), _topic(broker, 1)
        group = f"g-{uuid.uuid4().hex[:6]}"
        with Producer(broker.bootstrap_servers) as plain:
            plain.produce(source, b"v0")
        consumer = SlipConsumer(broker.bootstrap_servers, group_id=group, group_protocol="consumer",
                                auto_offset_reset="earliest", enable_auto_commit=False)
        producer = Producer(broker.bootstrap_servers, transactional_id="tx-e")
        try:
            consumer.subscribe([source])
            got = []
            for _ in range(100):
                got.extend(consumer.poll(0.1))
                if got:
                    break
            metadata = consumer.group_metadata()
            assert metadata.generation_id >= 1 and metadata.member_id
            producer.init_transactions()
            producer.begin_transaction()
            producer.produce(sink, b"copy-v0")
            producer.send_offsets_to_transaction({(source, 0): 1}, metadata)
            producer.commit_transaction()
            assert consumer.committed([(source, 0)]) == {(source, 0): 1}
            producer.begin_transaction()
            stale = ConsumerGroupMetadata(group, metadata.generation_id + 1, metadata.member_id)
            with pytest.raises(TransactionError) as info:
                producer.send_offsets_to_transaction({(source, 0): 1}, stale)
            assert info.value.code == ErrorCode.ILLEGAL_GENERATION
            producer.abort_transaction()
        finally:
            producer.close()
            consumer.close()
