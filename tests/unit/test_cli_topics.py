"""``slipstream topics|produce|consume`` run in-process against an in-process broker."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from slipstream.broker.broker import Broker
from slipstream.cli import main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0) as b:
        yield b


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topic_lifecycle(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-t", "-p", "3", "-c", "retention.ms=60000", *b)[0] == 0
    code, _out, err = run(capsys, "topics", "create", "cli-t", *b)
    assert code == 1 and "TOPIC_ALREADY_EXISTS" in err
    code, out, _ = run(capsys, "topics", "list", *b)
    assert code == 0 and "cli-t\t3 partitions" in out
    code, out, _ = run(capsys, "topics", "describe", "cli-t", *b)
    assert code == 0
    assert "partitions 3" in out
    lines = out.splitlines()
    assert lines[2].split() == ["PARTITION", "LEADER", "EARLIEST", "LATEST"]
    assert [line.split()[0] for line in lines[3:6]] == ["0", "1", "2"]
    assert ["retention.ms", "60000"] in [line.split() for line in lines]
    assert run(capsys, "topics", "delete", "cli-t", *b)[0] == 0
    code, _out, err = run(capsys, "topics", "delete", "cli-t", *b)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_bad_topic_name_and_unreachable_cluster(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "topics", "create", "bad name", "-b", broker.bootstrap_servers)
    assert code == 1 and "INVALID_TOPIC_EXCEPTION" in err
    code, _out, err = run(capsys, "topics", "list", "-b", "127.0.0.1:1")
    assert code == 1 and "cannot reach" in err


def test_produce_then_consume(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-pc", "-p", "2", *b)[0] == 0
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    code, _out, err = run(capsys, "produce", "cli-pc", "-k", ":", "--compression", "gzip", *b)
    assert code == 0 and "produced 20 records" in err

    # What the CLI wrote is what a real client reads: keys split off, values intact.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x", "log_level": 0})
    consumer.assign([TopicPartition("cli-pc", p, 0) for p in range(2)])
    seen = {}
    for _ in range(200):
        msg = consumer.poll(0.1)
        if msg is not None and not msg.error():
            seen[msg.key()] = msg.value()
        if len(seen) == 20:
            break
    consumer.close()
    assert seen == {f"k{i}".encode(): f"v{i}".encode() for i in range(20)}

    code, out, _ = run(capsys, "consume", "cli-pc", "--from-beginning", "--max-messages", "20", "--print-key", *b)
    assert code == 0
    assert sorted(out.splitlines()) == sorted(f"k{i}\tv{i}" for i in range(20))

    # Only partition 1, until idle: exactly the records the key hash put there.
    code, out, _ = run(
        capsys, "consume", "cli-pc", "--from-beginning", "--partition", "1", "--idle-timeout", "0.5", *b
    )
    assert code == 0
    assert 0 < len(out.splitlines()) < 20


def test_consume_as_group_commits_what_it_printed(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-g", "-p", "2", *b)[0] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"r{i}\n" for i in range(10))))
    assert run(capsys, "produce", "cli-g", *b)[0] == 0
    code, out, _ = run(capsys, "consume", "cli-g", "--group", "cli-readers", "--from-beginning", "--max-messages", "10", *b)
    assert code == 0 and sorted(out.splitlines()) == sorted(f"r{i}" for i in range(10))
    code, out, _ = run(capsys, "groups", "describe", "cli-readers", *b)
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("cli-g ")]
    assert sum(int(r[2]) for r in rows) == 10  # committed offsets cover every printed record
    assert all(r[4] == "0" for r in rows)  # lag 0
    code, _out, err = run(capsys, "consume", "cli-g", "--group", "x", "--partition", "0", *b)
    assert code == 1 and "exclude each other" in err


def test_produce_to_missing_partition_fails_clearly(
    broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-one", "-p", "1", *b)[0] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("x\n"))
    code, _out, err = run(capsys, "produce", "cli-one", "--partition", "5", *b)
    assert code == 1 and "partition 5" in err


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_consume_isolation_level(broker: Broker, capsys: pytest.CaptureFixture[str], isolation: str) -> None:
    import asyncio

    from slipstream.client.connection import BrokerConnection
    from slipstream.testing.transactions import MixedLog, write_mixed_transactions

    b = ("-b", broker.bootstrap_servers)
    topic = f"cli-txn-{isolation}"
    assert run(capsys, "topics", "create", topic, "-p", "1", *b)[0] == 0

    async def write() -> MixedLog:
        conn = await BrokerConnection("127.0.0.1", broker.port).connect()
        try:
            return await write_mixed_transactions(conn, topic)
        finally:
            await conn.close()

    mixed = asyncio.run(write())
    code, out, _ = run(capsys, "consume", topic, "--from-beginning", "--idle-timeout", "0.5",
                       "--isolation-level", isolation, *b)
    expected = mixed.read_committed if isolation == "read_committed" else mixed.read_uncommitted
    assert code == 0 and out.splitlines() == [v.decode() for v in expected]
