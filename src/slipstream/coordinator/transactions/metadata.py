"""What the coordinator keeps per transactional id, and its ``__transaction_state`` value."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...protocol import txn_records as tr
from .state import TxnState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka rotates the producer id once the epoch reaches Short.MaxValue - 1, keeping
# one epoch in reserve to fence the last producer.
MAX_EPOCH = (1 << 15) - 1

TopicPartition = tuple[str, int]


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """A transactional id's state after a record is written (Kafka's TxnTransitMetadata)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    # Not in the record (value v0 has no room): kept in memory so a retried
    # InitProducerId after an epoch bump or id rotation can be recognised.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def to_value(self) -> tr.TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(index)
        partitions = (
            None
            if self.state is TxnState.EMPTY
            else [tr.TransactionLogPartitions(topic=t, partition_ids=ids) for t, ids in by_topic.items()]
        )
        return tr.TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=self.state.id,
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
        )

    @classmethod
    def from_value(cls, value: tr.TransactionLogValue) -> TxnTransit:
        state = TxnState.from_id(value.transaction_status)
        partitions: set[TopicPartition] = set()
        if state is not TxnState.EMPTY and value.transaction_partitions:
            for entry in value.transaction_partitions:
                partitions.update((entry.topic, index) for index in entry.partition_ids)
        return cls(
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.transaction_timeout_ms,
            state=state,
            partitions=frozenset(partitions),
            start_ms=value.transaction_start_timestamp_ms,
            last_update_ms=value.transaction_last_update_timestamp_ms,
        )


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id as replayed from the log."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def transit(self, **changes: object) -> TxnTransit:
        """This metadata with ``changes`` applied, as a transit to write."""
        values: dict[str, object] = {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state,
            "partitions": frozenset(self.partitions),
            "start_ms": self.start_ms,
            "last_update_ms": self.last_update_ms,
            "last_producer_id": self.last_producer_id,
            "last_producer_epoch": self.last_producer_epoch,
        }
        values.update(changes)
        return TxnTransit(**values)  # type: ignore[arg-type]

    def apply(self, transit: TxnTransit) -> None:
        self.producer_id = transit.producer_id
        self.producer_epoch = transit.producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.last_producer_id = transit.last_producer_id
        self.last_producer_epoch = transit.last_producer_epoch
