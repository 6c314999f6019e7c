"""pytest plugin: a ``slipstream_broker`` fixture, so any project can test Kafka code in-process.

Installed with the package (entry point ``pytest11``). The broker runs on an
ephemeral port on its own thread with in-memory storage; point any client at
``slipstream_broker.bootstrap_servers``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..broker.broker import Broker


@pytest.fixture
def slipstream_broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as broker:
        yield broker
