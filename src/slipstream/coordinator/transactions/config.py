"""The transaction coordinator's settings (Kafka's broker configs of the same names)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TxnConfig:
    # transaction.max.timeout.ms: a client's transaction.timeout.ms above it answers
    # INVALID_TRANSACTION_TIMEOUT.
    transaction_max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms: an idle id is forgotten after this long.
    transactional_id_expiration_ms: int = 604_800_000
    # transaction.state.log.num.partitions
    transaction_state_num_partitions: int = 50
    # offsets.topic.num.partitions: where AddOffsetsToTxn finds a group's partition.
    offsets_topic_num_partitions: int = 50
