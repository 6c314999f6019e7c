"""The rebalance history while real clients rebalance a classic group for several causes.

confluent-kafka members (processes of test_groups_harness) join one by one, a Java
kafka-clients member joins and closes (its LeaveGroup carries a reason, KIP-800), one
confluent member is killed (SIGKILL: its session expires). The broker's admin listener
must tell each rebalance in order with the right cause, ``slipstream groups history``
must print it as a timeline, and after kill -9 of the broker the history is rebuilt
from ``__consumer_offsets`` (generations and assignments, marked replayed).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from conformance_helpers import causes, member_id_of, stable_with, wait_history, wait_ready
from test_groups_harness import start_java_member, start_python_member

from slipstream.cli.group_history import fetch_history
from slipstream.testing.broker_process import (
    CONSUMER_BROKER_ARGS,
    GROUP_BROKER_ARGS,
    BrokerProcess,
    running_broker,
)
from slipstream.testing.ports import free_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(180)]

PARTITIONS = 4
JAVA_CLOSE_REASON = "the consumer is being closed"  # kafka-clients' LeaveGroup reason on close()


@pytest.fixture
def admin_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    args = (*GROUP_BROKER_ARGS, "--admin-port", str(port), "--set", "group.initial.rebalance.delay.ms=0")
    for broker in running_broker(tmp_path, args):
        yield broker, f"http://127.0.0.1:{port}"


def test_history_tells_each_rebalance_with_its_cause(admin_broker, java_driver, topic_name) -> None:
    broker, base = admin_broker
    wait_ready(base)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)]).values():
        f.result(15)
    group = f"history-{topic_name}"
    members = []
    try:
        a = start_python_member("confluent", "conf-a", broker.bootstrap, topic_name, group)
        members.append(a)
        events = wait_history(base, group, lambda ev: any(e["kind"] == "generation-completed" for e in ev), "a")
        id_a = member_id_of(events, "conf-a")
        b = start_python_member("confluent", "conf-b", broker.bootstrap, topic_name, group)
        members.append(b)
        events = wait_history(base, group, lambda ev: any(
            e["kind"] == "member-joined" and e["client_id"] == "conf-b" for e in ev), "b to join")
        id_b = member_id_of(events, "conf-b")
        wait_history(base, group, stable_with({id_a, id_b}), "a and b stable")
        j = start_java_member(java_driver, "java-c", broker.bootstrap, topic_name, group)
        members.append(j)
        events = wait_history(base, group, lambda ev: any(
            e["kind"] == "member-joined" and e["client_id"] == "java-c" for e in ev), "the Java member to join", 60)
        id_j = member_id_of(events, "java-c")
        wait_history(base, group, stable_with({id_a, id_b, id_j}), "three members stable")

        j.close()  # LeaveGroup v5 with the Java client's reason
        wait_history(base, group, stable_with({id_a, id_b}), "a and b stable after the Java member left")
        b.kill()  # no LeaveGroup: the session (3 s) expires
        events = wait_history(base, group, stable_with({id_a}), "a alone after b's session expired")
        # The CLI's timeline, from a separate process as a user runs it (a still lives: nothing new).
        out = subprocess.run(
            [sys.executable, "-m", "slipstream", "groups", "history", group, "--admin-url", base, "--full-ids"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    finally:
        for m in members:
            m.reap()

    # In order: a joined, b joined, the Java member joined, left with its reason, b expired.
    assert causes(events) == [
        ("member-joined", "member-joined"),
        ("member-joined", "member-joined"),
        ("member-joined", "member-joined"),
        ("member-left", "member-left"),
        ("session-expired", "session-expired"),
    ]
    joins = [e for e in events if e["kind"] == "member-joined" and e["how"] == "new"]
    assert [e["member_id"] for e in joins] == [id_a, id_b, id_j]
    (left,) = [e for e in events if e["kind"] == "member-left"]
    assert (left["member_id"], left["reason"]) == (id_j, JAVA_CLOSE_REASON)
    (expired,) = [e for e in events if e["kind"] == "session-expired"]
    assert expired["member_id"] == id_b and expired["session_timeout_ms"] == 3000
    assert expired["last_heartbeat_ms"] is not None and 0 < expired["at_ms"] - expired["last_heartbeat_ms"] <= 4000
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs)
    times = [e["at_ms"] for e in events]
    assert times == sorted(times)
    # What moved: after b expired, a owns every partition again.
    last_sent = [e for e in events if e["kind"] == "assignment-sent"][-1]
    assert last_sent["decoded"] and last_sent["partitions"] == {id_a: PARTITIONS}
    assert {m["to"] for m in last_sent["moves"]} == {id_a}

    assert f'member {id_j} left (reason: "{JAVA_CLOSE_REASON}")' in out
    assert f"member {id_b}'s session expired (last heartbeat" in out
    summaries = [line for line in out.splitlines() if line[14:].startswith("generation ") and ", after " in line]
    assert len(summaries) == 5, out
    assert f"after member {id_b}'s session expired" in summaries[-1]

    # kill -9 and restart: the history is rebuilt from the records.
    generations = [e["generation"] for e in events if e["kind"] == "generation-started"]
    broker.restart()
    wait_ready(base)
    replayed, _last = fetch_history(base, group)
    assert replayed and all(e["replayed"] for e in replayed)
    assert [e["generation"] for e in replayed if e["kind"] == "generation-started"][-1] == generations[-1]
    assert [e for e in replayed if e["kind"] == "assignment-sent"][-1]["partitions"] == {id_a: PARTITIONS}


@pytest.fixture
def consumer_admin_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    args = (*CONSUMER_BROKER_ARGS, "--admin-port", str(port))
    for broker in running_broker(tmp_path, args):
        yield broker, f"http://127.0.0.1:{port}"


def test_consumer_protocol_history_tells_epochs_reconciliation_and_fencing(consumer_admin_broker, topic_name) -> None:
    """confluent-kafka members with group.protocol=consumer (KIP-848): one joins, a second
    joins (the first revokes half its partitions), the second closes, the first is killed."""
    broker, base = consumer_admin_broker
    wait_ready(base)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)]).values():
        f.result(15)
    group = f"history-kip848-{topic_name}"

    def reconciled(member_id: str, partitions: int) -> Callable[[list[dict[str, Any]]], bool]:
        def check(events: list[dict[str, Any]]) -> bool:
            steps = [e for e in events if e["kind"] == "member-epoch-advanced" and e["member_id"] == member_id]
            owned: set[str] = set()
            for s in steps:
                owned = (owned - set(s["revoking"])) | set(s["assigning"])
            return bool(steps) and steps[-1]["state"] == "stable" and len(owned) == partitions
        return check

    members = []
    try:
        a = start_python_member("confluent", "kip848-a", broker.bootstrap, topic_name, group, group_protocol="consumer")
        members.append(a)
        events = wait_history(base, group, lambda ev: any(e["kind"] == "member-joined" for e in ev), "a to join")
        id_a = member_id_of(events, "kip848-a")
        wait_history(base, group, reconciled(id_a, PARTITIONS), "a to own every partition")
        b = start_python_member("confluent", "kip848-b", broker.bootstrap, topic_name, group, group_protocol="consumer")
        members.append(b)
        events = wait_history(base, group, lambda ev: any(
            e["kind"] == "member-joined" and e["client_id"] == "kip848-b" for e in ev), "b to join")
        id_b = member_id_of(events, "kip848-b")
        wait_history(base, group, reconciled(id_b, PARTITIONS // 2), "b to get its half")
        b.close()
        wait_history(base, group, lambda ev: any(e["kind"] == "member-fenced" and e["member_id"] == id_b for e in ev),
                     "b to leave")
        a.kill()
        events = wait_history(base, group, lambda ev: any(
            e["kind"] == "member-fenced" and e["member_id"] == id_a for e in ev), "a's session to expire")
    finally:
        for m in members:
            m.reap()

    bumps = [(e["epoch"], e["cause"]) for e in events if e["kind"] == "group-epoch-bumped"]
    assert bumps == [
        (1, "group created"),
        (2, f"member {id_b} joined"),
        (3, f"member {id_b} left"),
        (4, f"member {id_a} was fenced: its session expired"),
    ]
    fenced = [(e["member_id"], e["cause"]) for e in events if e["kind"] == "member-fenced"]
    assert fenced == [(id_b, "left"), (id_a, "session-expired")]
    (left,) = [e for e in events if e["kind"] == "member-left"]
    assert left["member_id"] == id_b and not left["temporarily"]
    # a handed two partitions over: a revoking step, then b's assigning step of those partitions.
    revoked = [e for e in events if e["kind"] == "member-epoch-advanced" and e["member_id"] == id_a and e["revoking"]]
    assert revoked and revoked[0]["state"] == "unrevoked-partitions" and len(revoked[0]["revoking"]) == PARTITIONS // 2
    gained = {p for e in events if e["kind"] == "member-epoch-advanced" and e["member_id"] == id_b for p in e["assigning"]}
    assert gained == set(revoked[0]["revoking"])
    targets = [e["epoch"] for e in events if e["kind"] == "target-assignment-computed"]
    assert targets[:2] == [1, 2]
