"""In-process broker tests: the embedded Broker on an ephemeral port, driven by real clients.

Each test gets its own broker (memory storage, starts in milliseconds), so tests
share nothing. Blocking clients (confluent-kafka, kafka-python) talk to the
threaded ``with Broker(...)`` form; tests that touch ``broker.state`` directly use
the async form so they run on the broker's own loop.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from broker_helpers import TIMEOUT_S, quiet_admin
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from slipstream.broker.broker import Broker


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b


@pytest.fixture
def admin(broker: Broker) -> AdminClient:
    return quiet_admin(broker.bootstrap_servers)


@pytest.fixture
def kadmin(broker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap_servers,
        request_timeout_ms=int(TIMEOUT_S * 1000),
        client_id="slipstream-unit-kafka-python",
    )
    try:
        yield client
    finally:
        client.close()
