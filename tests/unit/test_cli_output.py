"""``slipstream consume --output text|json`` and the aligned ``topics describe`` table."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from slipstream.broker.broker import Broker
from slipstream.cli import main
from slipstream.cli.record_format import format_record
from slipstream.cli.table import format_table
from slipstream.client import Producer
from slipstream.client.consumer_messages import Message

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0) as b:
        yield b


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_format_record_outputs():
    msg = Message("t", 2, 41, None, b"\xff\x00", 1700, [("h1", b"v1"), ("h2", None)])
    document = json.loads(format_record(msg, "json"))
    assert document == {
        "topic": "t", "partition": 2, "offset": 41, "timestamp": 1700, "key": None,
        "value": {"base64": base64.b64encode(b"\xff\x00").decode()}, "headers": [["h1", "v1"], ["h2", None]],
    }  # fmt: skip
    assert format_record(msg._replace(key=b"k", value=b"hi"), "text") == "p=2 o=41 key=k value=hi headers=[h1=v1,h2=null]"
    assert format_record(msg._replace(key=b"k", value=b"hi"), "value", print_key=True, key_separator="|") == "k|hi"


def test_format_table_aligns_columns():
    lines = format_table(["A", "LONGER"], [["wide-cell", 1], [None, ""]])
    assert lines == ["A          LONGER", "wide-cell  1", "-          -"]


def test_consume_json_and_text(broker: Broker, capsys: pytest.CaptureFixture[str]):
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-out", "-p", "2", *b)[0] == 0
    with Producer(broker.bootstrap_servers, linger_ms=0) as producer:
        producer.produce("cli-out", b"one", key=b"k1", partition=1, headers=[("trace", b"abc")])
        producer.produce("cli-out", b"two", partition=0)
        assert producer.flush(10) == 0
    code, out, _ = run(capsys, "consume", "cli-out", "--from-beginning", "--max-messages", "2", "--output", "json", *b)
    assert code == 0
    records = sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["partition"])
    assert [(r["partition"], r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
        (0, 0, None, "two", []),
        (1, 0, "k1", "one", [["trace", "abc"]]),
    ]
    code, out, _ = run(capsys, "consume", "cli-out", "--from-beginning", "--partition", "1", "--max-messages", "1", "-o", "text", *b)
    assert (code, out) == (0, "p=1 o=0 key=k1 value=one headers=[trace=abc]\n")


def test_topics_describe_is_an_aligned_table(broker: Broker, capsys: pytest.CaptureFixture[str]):
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-desc", "-p", "11", "-c", "cleanup.policy=compact", *b)[0] == 0
    code, out, _ = run(capsys, "topics", "describe", "cli-desc", *b)
    assert code == 0
    lines = out.splitlines()
    header = lines[2]
    rows = lines[3:14]
    assert [r.split()[0] for r in rows] == [str(p) for p in range(11)]
    # Every row's cells start where the header's columns do.
    starts = [header.index(name) for name in ("LEADER", "EARLIEST", "LATEST")]
    for row in rows:
        assert all(row[s - 1] == " " and row[s] != " " for s in starts)
    config_rows = [line.split() for line in lines[15:]]
    assert config_rows[0] == ["CONFIG", "VALUE"] and ["cleanup.policy", "compact"] in config_rows
