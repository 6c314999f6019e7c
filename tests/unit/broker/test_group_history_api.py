"""A group's rebalance history through the admin listener and ``slipstream groups history``.

A real librdkafka consumer joins and leaves; the JSON API, the adapter's ``history_for``
and the CLI's timeline all tell the same story.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO

import pytest
from broker_helpers import TIMEOUT_S, create_topic, quiet_admin, raw_request
from confluent_kafka import Consumer

from slipstream.broker.broker import Broker
from slipstream.cli import main
from slipstream.cli.group_history import HistoryUnavailable, fetch_history
from slipstream.protocol.apis.offset_commit import SPEC as OFFSET_COMMIT
from slipstream.protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from slipstream.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def admin_broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0, admin_port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b


def consume_until_assigned(broker: Broker, group: str, *others: Consumer) -> Consumer:
    """A new member, polled (with ``others``, who must rejoin) until it has partitions."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "client.id": "history-test",
            "session.timeout.ms": 6000,
            "log_level": 0,
        }
    )
    consumer.subscribe(["t"])
    deadline = time.monotonic() + TIMEOUT_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.1)
        for other in others:
            other.poll(0.01)
    return consumer


def wait_for_kind(url: str, group: str, kind: str) -> list[dict]:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        events, _last = fetch_history(url, group)
        if any(e["kind"] == kind for e in events):
            return events
        assert time.monotonic() < deadline, f"no {kind} event in {events}"
        time.sleep(0.05)


def test_the_api_the_adapter_and_the_cli_tell_the_same_history(
    admin_broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    url = admin_broker.admin_url
    assert url is not None and admin_broker.groups is not None
    create_topic(quiet_admin(admin_broker.bootstrap_servers), "t", 3)
    consumer = consume_until_assigned(admin_broker, "g")
    joined = wait_for_kind(url, "g", "generation-completed")
    member_id = next(e["member_id"] for e in joined if e["kind"] == "member-joined")
    assert member_id.startswith("history-test")
    sent = next(e for e in joined if e["kind"] == "assignment-sent")
    assert sent["decoded"] and sorted(m["partition"] for m in sent["moves"]) == ["t-0", "t-1", "t-2"]
    # A commit of a stale generation, on the broker's group-committed path: noted as fenced.
    stale = OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=0, member_id=member_id,
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])],
    )
    answer = raw_request(admin_broker, OFFSET_COMMIT, 8, stale)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
    fenced = wait_for_kind(url, "g", "request-fenced")[-1]
    assert (fenced["api"], fenced["member_id"], fenced["request_generation"]) == ("OffsetCommit", member_id, 0)
    consumer.close()
    events = wait_for_kind(url, "g", "member-left")
    left = next(e for e in events if e["kind"] == "member-left")
    # librdkafka's LeaveGroup (v1) carries no reason (KIP-800 came with v5).
    assert left["member_id"] == member_id and left["reason"] is None
    assert admin_broker.groups.history_for("g") == events
    # since: only what came after.
    newer, last_seq = fetch_history(url, "g", since=left["seq"])
    assert all(e["seq"] > left["seq"] for e in newer) and last_seq >= events[-1]["seq"]

    assert main(["groups", "history", "g", "--admin-url", url, "--full-ids"]) == 0
    out = capsys.readouterr().out
    assert f"member {member_id} joined (client history-test" in out
    assert "generation 1: " in out and f"after member {member_id} joined" in out
    assert f"member {member_id} left (no reason given)" in out
    assert main(["groups", "history", "g", "--admin-url", url]) == 0
    short = member_id[: member_id.index("-", len("history-test-")) ]
    assert f"member {short} joined (client history-test" in capsys.readouterr().out
    assert main(["groups", "history", "g", "--admin-url", url, "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == events


def test_unknown_groups_bad_requests_and_no_listener(admin_broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    url = admin_broker.admin_url
    assert url is not None
    with pytest.raises(HistoryUnavailable, match="no group 'nobody'"):
        fetch_history(url, "nobody")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{url}/api/groups/g/history?since=abc", timeout=TIMEOUT_S)
    assert info.value.code == 400
    assert main(["groups", "history", "nobody", "--admin-url", url]) == 1
    assert "knows no group 'nobody'" in capsys.readouterr().err
    assert main(["groups", "history", "g", "--admin-url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the admin listener" in capsys.readouterr().err


def test_the_cli_asks_for_the_admin_url(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SLIPSTREAM_ADMIN_URL", raising=False)
    assert main(["groups", "history", "g"]) == 2
    assert "--admin-url" in capsys.readouterr().err


def test_the_history_bound_is_a_broker_setting() -> None:
    with Broker(storage="memory", port=0, group_history_max_events=2) as b:
        assert b.groups is not None and b.groups.coordinator.history.max_events == 2
    with pytest.raises(ValueError, match=r"group\.history\.max\.events"):
        Broker(storage="memory", port=0, group_history_max_events=0)


def test_follow_prints_new_events_as_they_come(admin_broker: Broker) -> None:
    url = admin_broker.admin_url
    assert url is not None
    create_topic(quiet_admin(admin_broker.bootstrap_servers), "t", 2)
    first = consume_until_assigned(admin_broker, "g")
    wait_for_kind(url, "g", "generation-completed")
    follower = subprocess.Popen(
        [sys.executable, "-m", "slipstream", "groups", "history", "g", "--follow", "--interval", "0.1",
         "--admin-url", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert follower.stdout is not None
        lines = read_until(follower.stdout, 1)
        assert any(" joined (client history-test" in line for line in lines)
        second = consume_until_assigned(admin_broker, "g", first)
        lines = read_until(follower.stdout, 2)
        assert not any(is_summary(line, 1) for line in lines), "printed twice"
        assert any(" -> " in line for line in lines)  # a partition moved to the second member
        second.close()
        first.close()
        read_until(follower.stdout, 3)
    finally:
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=10) == 0, follower.stderr.read() if follower.stderr else ""


def is_summary(line: str, generation: int) -> bool:
    return line[len("09:00:00.000  ") :].startswith(f"generation {generation}: ")


def read_until(stream: IO[str], generation: int) -> list[str]:
    """Lines from the follower up to the generation's summary (the test's timeout guards a hang)."""
    lines = []
    while True:
        line = stream.readline()
        assert line, "the follower stopped"
        lines.append(line.rstrip("\n"))
        if is_summary(line, generation):
            return lines
