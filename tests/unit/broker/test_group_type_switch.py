"""A group id used by one protocol, then the other: empty groups change type, offsets stay."""

from __future__ import annotations

import time
from typing import Any

import pytest
from broker_helpers import TIMEOUT_S, create_topic
from confluent_kafka import Consumer, TopicPartition

from slipstream.broker.broker import Broker

pytestmark = pytest.mark.timeout(60)


def consume_once(bootstrap: str, group: str, protocol: str, commit_offset: int | None) -> dict[int, int]:
    """Join ``group`` with ``protocol``, wait for the assignment, maybe commit; close.
    Returns the committed offsets it saw at start."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    consumer = Consumer(conf)
    try:
        consumer.subscribe(["switch"])
        deadline = time.monotonic() + TIMEOUT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"no assignment with the {protocol} protocol"
            consumer.poll(0.05)
        seen = {tp.partition: tp.offset for tp in consumer.committed([TopicPartition("switch", 0)], timeout=10)}
        if commit_offset is not None:
            consumer.commit(offsets=[TopicPartition("switch", 0, commit_offset)], asynchronous=False)
        return seen
    finally:
        consumer.close()


def test_an_empty_group_changes_protocol_and_keeps_its_offsets(broker: Broker, admin) -> None:  # type: ignore[no-untyped-def]
    create_topic(admin, "switch", 1)
    bs = broker.bootstrap_servers
    assert consume_once(bs, "flip", "classic", 5) == {0: -1001}
    assert consume_once(bs, "flip", "consumer", 7) == {0: 5}
    assert consume_once(bs, "flip", "classic", None) == {0: 7}
