"""Topics the broker writes itself and clients may only read.

Kafka refuses a client's append to an internal topic with INVALID_TOPIC_EXCEPTION:
``__consumer_offsets`` is replayed into the group coordinator at every start, so a
record a client forged there would become a group's committed offset or membership.
Their configs are the broker's too: AlterConfigs / IncrementalAlterConfigs on them are
refused (POLICY_VIOLATION), and DeleteTopics refuses them (INVALID_TOPIC_EXCEPTION).
"""

from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from .topics import OFFSETS_TOPIC

TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def refuse_client_append(topic: str) -> None:
    if topic in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {topic} from a client"
        )


def refuse_config_change(topic: str) -> None:
    if topic in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"the configs of internal topic {topic} are managed by the broker and cannot be altered",
        )
