"""``slipstream groups ...`` run in-process (``slipstream.cli.main``) against an in-process broker.

Groups are made by confluent-kafka consumers; outputs and exit codes are checked,
and what reset-offsets writes is read back through confluent-kafka's AdminClient.
One broker for the module; each test uses its own groups.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slipstream.broker.broker import Broker
from slipstream.cli import main
from slipstream.cli.groups import parse_datetime_ms

pytestmark = pytest.mark.timeout(60)

TIMEOUT_S = 15.0
ORDERS = "orders"  # the live group's topic
ORDERS_COUNTS = {0: 5, 1: 3, 2: 0}
LIVE = "cli-live"
LIVE_COMMITS = {0: 2, 1: 3}

EVENTS = "events"  # the reset-offsets topic: records with known timestamps
BASE = datetime(2024, 1, 1, tzinfo=UTC)
BASE_MS = int(BASE.timestamp() * 1000)
EVENTS_COUNTS = {0: 6, 1: 2}  # record i has timestamp BASE + i seconds
EVENTS_LOG_START = {0: 1, 1: 0}  # records before offset 1 of partition 0 are deleted
RESET_FROM = {0: 4, 1: 1}  # committed offsets before each reset


def consumer_config(bootstrap: str, group: str, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "heartbeat.interval.ms": 100,
        "partition.assignment.strategy": "range",
        "log_level": 0,
    }


def join(consumer: Consumer, topic: str, partitions: int) -> None:
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while len(consumer.assignment()) < partitions:
        assert time.monotonic() < deadline, "timed out waiting for an assignment"
        consumer.poll(0.05)


def commit(consumer: Consumer, topic: str, offsets: dict[int, int]) -> None:
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)


def empty_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int], partitions: int) -> None:
    """A consumer group that joined, committed ``offsets`` and left: Empty, with offsets."""
    consumer = Consumer(consumer_config(bootstrap, group, f"{group}-client"))
    try:
        join(consumer, topic, partitions)
        commit(consumer, topic, offsets)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, Any]]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        new = [NewTopic(ORDERS, len(ORDERS_COUNTS), 1), NewTopic(EVENTS, len(EVENTS_COUNTS), 1)]
        for future in admin.create_topics(new, operation_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
        producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 0})
        for partition, count in ORDERS_COUNTS.items():
            for i in range(count):
                producer.produce(ORDERS, f"o{i}".encode(), partition=partition)
        for partition, count in EVENTS_COUNTS.items():
            for i in range(count):
                producer.produce(EVENTS, f"e{i}".encode(), partition=partition, timestamp=BASE_MS + i * 1000)
        assert producer.flush(TIMEOUT_S) == 0
        for future in admin.delete_records(
            [TopicPartition(EVENTS, p, o) for p, o in EVENTS_LOG_START.items() if o], operation_timeout=TIMEOUT_S
        ).values():
            future.result(TIMEOUT_S)

        live = Consumer(consumer_config(bootstrap, LIVE, "cli-live-1"))
        join(live, ORDERS, len(ORDERS_COUNTS))
        commit(live, ORDERS, LIVE_COMMITS)
        try:
            yield {"broker": broker, "bootstrap": bootstrap, "admin": admin, "live": live}
        finally:
            live.close()


def run(capsys: pytest.CaptureFixture[str], env: dict[str, Any], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["groups", *argv, "-b", env["bootstrap"]])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str, header: str) -> list[list[str]]:
    """The rows of the table whose header line starts with ``header``, split on whitespace."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    table = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        table.append(line.split())
    return table


def committed_by_confluent(env: dict[str, Any], group: str, topic: str) -> dict[int, int]:
    futures = env["admin"].list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    result = futures[group].result(TIMEOUT_S)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


# ---------------------------------------------------------------------------- list / describe


def test_groups_list(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    empty_group(env["bootstrap"], "cli-listed", ORDERS, {0: 1}, len(ORDERS_COUNTS))
    code, out, err = run(capsys, env, "list")
    assert (code, err) == (0, "")
    table = {r[0]: r[1:] for r in rows(out, "GROUP")}
    assert table[LIVE] == ["Stable", "consumer", "classic"]
    assert table["cli-listed"] == ["Empty", "consumer", "classic"]
    code, out, _ = run(capsys, env, "list", "--state", "Empty")
    assert code == 0
    listed = [r[0] for r in rows(out, "GROUP")]
    assert "cli-listed" in listed and LIVE not in listed


def test_groups_describe_live_group(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, env, "describe", LIVE)
    assert (code, err) == (0, "")
    header = out.splitlines()[0]
    assert f"group {LIVE}" in header
    assert "state Stable" in header
    assert "protocol consumer/range" in header
    assert "members 1" in header
    member_id = env["live"].memberid()
    members = rows(out, "MEMBER-ID")
    assert members == [[member_id, "-", "cli-live-1", "/127.0.0.1", f"{ORDERS}:", "0,1,2"]]
    partitions = rows(out, "TOPIC")
    assert partitions == [
        [ORDERS, "0", "2", "5", "3", member_id, "cli-live-1", "/127.0.0.1"],
        [ORDERS, "1", "3", "3", "0", member_id, "cli-live-1", "/127.0.0.1"],
        [ORDERS, "2", "-", "0", "-", member_id, "cli-live-1", "/127.0.0.1"],
    ]


def test_groups_describe_consumer_protocol_group(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """A KIP-848 group shows its protocol, epochs and per member its epoch and target."""
    conf = {k: v for k, v in consumer_config(env["bootstrap"], "cli-kip848", "cli-848").items()
            if k not in ("heartbeat.interval.ms", "partition.assignment.strategy")}
    member = Consumer({**conf, "group.protocol": "consumer"})
    try:
        join(member, ORDERS, len(ORDERS_COUNTS))
        commit(member, ORDERS, {0: 1})
        code, out, err = run(capsys, env, "describe", "cli-kip848")
        assert (code, err) == (0, "")
        header = out.splitlines()[0]
        assert "state Stable" in header and "protocol consumer/uniform" in header
        assert "group-epoch 1" in header and "target-assignment-epoch 1" in header
        (row,) = rows(out, "MEMBER-ID")
        assert row[0] == member.memberid()
        assert row[2:] == ["cli-848", "/127.0.0.1", "1", f"{ORDERS}:", "0,1,2", f"{ORDERS}:", "0,1,2"]
        lags = rows(out, "TOPIC")
        assert lags[0][:5] == [ORDERS, "0", "1", "5", "4"]
        code, out, _ = run(capsys, env, "list")
        assert {r[0]: r[1:] for r in rows(out, "GROUP")}["cli-kip848"] == ["Stable", "consumer", "consumer"]
    finally:
        member.close()


def test_groups_describe_empty_group(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    empty_group(env["bootstrap"], "cli-empty", ORDERS, {0: 4, 1: 1}, len(ORDERS_COUNTS))
    code, out, _ = run(capsys, env, "describe", "cli-empty")
    assert code == 0
    assert "state Empty" in out and "members 0" in out
    assert "INSTANCE-ID" not in out  # no member table
    assert rows(out, "TOPIC") == [
        [ORDERS, "0", "4", "5", "1", "-", "-", "-"],
        [ORDERS, "1", "1", "3", "2", "-", "-", "-"],
    ]


def test_groups_describe_unknown_group(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, env, "describe", "cli-nobody")
    assert code == 1
    assert out == ""
    assert "group 'cli-nobody' does not exist" in err


# ---------------------------------------------------------------------------- reset-offsets

MODES = {
    "earliest": (["--to-earliest"], {0: 1, 1: 0}),
    "latest": (["--to-latest"], {0: 6, 1: 2}),
    # The first record at or after +2.5 s: offset 3 of p0; p1 has none that late -> its log end.
    "datetime": (["--to-datetime", "2024-01-01T00:00:02.500Z"], {0: 3, 1: 2}),
    "datetime-zone": (["--to-datetime", "2024-01-01T02:00:01+02:00"], {0: 1, 1: 1}),
    "offset": (["--to-offset", "5"], {0: 5, 1: 2}),  # p1 clamped to its log end
    "offset-low": (["--to-offset", "0"], {0: 1, 1: 0}),  # p0 clamped to its log start
    "shift-back": (["--shift-by", "-2"], {0: 2, 1: 0}),  # p1 clamped
    "shift-forward": (["--shift-by", "3"], {0: 6, 1: 2}),  # both clamped
}


@pytest.mark.parametrize("mode", list(MODES))
def test_reset_offsets_dry_run_then_execute(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    group = f"cli-reset-{mode}"
    empty_group(env["bootstrap"], group, EVENTS, RESET_FROM, len(EVENTS_COUNTS))
    flags, expected = MODES[mode]

    code, out, err = run(capsys, env, "reset-offsets", group, "--topic", EVENTS, *flags)
    assert (code, err) == (0, "")
    plan = rows(out, "GROUP")
    assert plan == [
        [group, EVENTS, str(p), str(RESET_FROM[p]), str(expected[p])] for p in sorted(EVENTS_COUNTS)
    ]
    assert "dry run" in out
    assert committed_by_confluent(env, group, EVENTS) == RESET_FROM

    code, out, err = run(capsys, env, "reset-offsets", group, "--topic", EVENTS, *flags, "--execute")
    assert (code, err) == (0, "")
    assert rows(out, "GROUP") == plan
    assert "dry run" not in out
    assert f"committed new offsets of 2 partition(s) for group {group}" in out
    assert committed_by_confluent(env, group, EVENTS) == expected

    # The group's consumers resume from there.
    consumer = Consumer(consumer_config(env["bootstrap"], group, "resumer"))
    try:
        join(consumer, EVENTS, len(EVENTS_COUNTS))
        committed = consumer.committed([TopicPartition(EVENTS, p) for p in EVENTS_COUNTS], timeout=TIMEOUT_S)
        assert {tp.partition: tp.offset for tp in committed} == expected
    finally:
        consumer.close()


def test_reset_offsets_of_a_new_group_and_chosen_partitions(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, env, "reset-offsets", "cli-fresh", "--topic", f"{EVENTS}:1", "--to-latest", "--execute")
    assert code == 0
    assert rows(out, "GROUP") == [["cli-fresh", EVENTS, "1", "-", "2"]]
    assert committed_by_confluent(env, "cli-fresh", EVENTS) == {1: 2}


def test_reset_offsets_refused_for_live_group(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--execute"]):
        code, out, err = run(capsys, env, "reset-offsets", LIVE, "--topic", ORDERS, "--to-earliest", *extra)
        assert code == 1
        assert out == ""
        assert f"cannot reset offsets of group '{LIVE}': it is Stable with 1 member(s)" in err
        assert "inactive (Empty)" in err
    assert committed_by_confluent(env, LIVE, ORDERS) == LIVE_COMMITS


def test_reset_offsets_errors(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, env, "reset-offsets", "cli-err", "--topic", EVENTS, "--to-datetime", "yesterday")
    assert code == 1
    assert "--to-datetime expects an ISO 8601 time" in err
    code, _, err = run(capsys, env, "reset-offsets", "cli-err", "--topic", EVENTS, "--shift-by", "1")
    assert code == 1
    assert f"cannot shift {EVENTS}-0: group 'cli-err' has no committed offset" in err
    code, _, err = run(capsys, env, "reset-offsets", "cli-err", "--topic", "no-such-topic", "--to-latest")
    assert code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, _, err = run(capsys, env, "reset-offsets", "cli-err", "--topic", f"{EVENTS}:7", "--to-latest")
    assert code == 1
    assert "no partition 7" in err
    # Exactly one mode is required.
    with pytest.raises(SystemExit) as excinfo:
        main(["groups", "reset-offsets", "g", "--topic", EVENTS, "--to-earliest", "--to-latest"])
    assert excinfo.value.code == 2
    assert committed_by_confluent(env, "cli-err", EVENTS) == {}


def test_parse_datetime_ms() -> None:
    assert parse_datetime_ms("2024-01-01T00:00:00Z") == BASE_MS
    assert parse_datetime_ms("2024-01-01T01:00:00.250+01:00") == BASE_MS + 250
    with pytest.raises(ValueError):
        parse_datetime_ms("01/01/2024")


# ---------------------------------------------------------------------------- delete


def test_groups_delete(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, env, "delete", LIVE)
    assert code == 1
    assert out == ""
    assert "NON_EMPTY_GROUP" in err and LIVE in err

    empty_group(env["bootstrap"], "cli-doomed", ORDERS, {0: 1}, len(ORDERS_COUNTS))
    code, out, err = run(capsys, env, "delete", "cli-doomed")
    assert (code, out, err) == (0, "deleted group cli-doomed\n", "")
    code, out, _ = run(capsys, env, "list")
    assert "cli-doomed" not in out
    assert committed_by_confluent(env, "cli-doomed", ORDERS) == {}

    code, _, err = run(capsys, env, "delete", "cli-doomed")
    assert code == 1
    assert "GROUP_ID_NOT_FOUND" in err


def test_groups_delete_offsets(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    empty_group(env["bootstrap"], "cli-pruned", ORDERS, {0: 1, 1: 2, 2: 0}, len(ORDERS_COUNTS))
    code, out, err = run(capsys, env, "delete-offsets", "cli-pruned", "--topic", f"{ORDERS}:0,2")
    assert (code, err) == (0, "")
    assert "partitions 0,2" in out
    assert committed_by_confluent(env, "cli-pruned", ORDERS) == {1: 2}

    code, _, err = run(capsys, env, "delete-offsets", LIVE, "--topic", ORDERS)
    assert code == 1
    assert "GROUP_SUBSCRIBED_TO_TOPIC" in err
    assert committed_by_confluent(env, LIVE, ORDERS) == LIVE_COMMITS


def test_unreachable_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["groups", "list", "-b", f"127.0.0.1:{port}"])
    _, err = capsys.readouterr()
    assert code == 1
    assert "cannot reach" in err or "no bootstrap server reachable" in err


def test_pipeline_script_prints_the_spark_submit_entry_script(capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys
    from pathlib import Path

    assert main(["pipeline", "script"]) == 0
    script = Path(capsys.readouterr().out.strip())
    assert script.is_file() and script.name == "spark_submit.py"
    # Run as spark-submit runs it (a plain script): it is the pipeline command.
    done = subprocess.run([sys.executable, str(script), "list"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pageview-stats" in done.stdout
