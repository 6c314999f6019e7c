"""The README's transactions example runs as written against a broker (address swapped
in): it copies ``orders`` to ``orders-copy`` and commits the group's offsets with each
transaction, as a read_committed reader and the group's committed offsets show."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from slipstream.broker.broker import Broker
from slipstream.client.producer import Producer

pytestmark = pytest.mark.timeout(120)

README = Path(__file__).resolve().parents[2] / "README.md"
README_ADDRESS = "127.0.0.1:9092"


def transactions_example() -> str:
    text = README.read_text()
    start = text.index("\n## Transactions\n")
    end = text.index("\n## ", start + 1)
    (block,) = re.findall(r"```python\n(.*?)```", text[start:end], re.S)
    return block


def committed_copies(bootstrap: str) -> list[bytes]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition("orders-copy", 0, 0)])
    values = []
    try:
        for _ in range(10):
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                values.append(msg.value())
    finally:
        reader.close()
    return values


def test_transactions_example_copies_exactly_once(tmp_path: Path) -> None:
    code = transactions_example()
    assert README_ADDRESS in code
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as broker:
        bootstrap = broker.bootstrap_servers
        assert broker.state is not None
        broker.state.topics.create("orders", 1, {})
        broker.state.topics.create("orders-copy", 1, {})
        with Producer(bootstrap) as producer:
            producer.produce("orders", b"hello")
            producer.produce("orders", b"world")
        script = tmp_path / "copier.py"
        script.write_text(code.replace(README_ADDRESS, bootstrap))
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        try:
            deadline = time.monotonic() + 30
            copies: list[bytes] = []
            while time.monotonic() < deadline and proc.poll() is None:
                copies = committed_copies(bootstrap)
                if len(copies) >= 2:
                    break
                time.sleep(0.2)
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=10)
        assert copies == [b"hello", b"world"], out
        group = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier"})
        try:
            (committed,) = group.committed([TopicPartition("orders", 0)], timeout=10)
        finally:
            group.close()
        assert committed.offset == 2
