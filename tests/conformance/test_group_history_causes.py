"""The rebalance history names each cause while real clients make it happen.

test_group_history.py covers new members, a leave with the Java client's reason, a
session expiry and the consumer protocol's epochs; this module makes real clients
(confluent-kafka members of test_groups_harness, the Java kafka-clients driver) rebalance
for the other causes and checks what the admin listener's history says:

- the protocol vote (a confluent member offering [roundrobin, range], a Java one
  [cooperative-sticky, range]);
- partitions added to a subscribed topic (CreatePartitions): in a classic group the broker
  sees the leader rejoin with the same subscription (member-rejoined: a classic broker cannot
  tell more); in a KIP-848 group a group-epoch bump for the topic metadata;
- a known member's JoinGroup (the Java consumer's enforceRebalance): member-rejoined, with the
  reason the application gave;
- a subscription change (a confluent member subscribing to a second topic): metadata-changed;
- a static member restarted under the same ``group.instance.id`` (the old process paused by
  SIGSTOP): static replacement without a rebalance, and the old process, resumed, fenced;
- a member removed at the rebalance timeout (a Java member SIGSTOPped while the group
  rebalances; its session is longer than its rebalance timeout, so the timeout comes first),
  and its zombie fenced when it wakes up;
- the sync deadline (a Java leader whose range assignor is slow never sends SyncGroup in
  time), and its late SyncGroup fenced;
- a KIP-848 member fenced at the rebalance timeout (it keeps heartbeating but never
  acknowledges the revocation: its on_revoke callback stalls).

librdkafka's subscribe() with an unchanged topic list sends no JoinGroup, so the rejoin is
the Java client's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from conformance_helpers import causes, member_id_of, stable_with, wait_history, wait_ready
from test_groups_harness import Member, start_java_member, start_python_member

from slipstream.testing.broker_process import (
    CONSUMER_BROKER_ARGS,
    GROUP_BROKER_ARGS,
    BrokerProcess,
    running_broker,
)
from slipstream.testing.ports import free_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

Events = list[dict[str, Any]]
ENFORCED_REBALANCE_REASON = "the test enforced a rebalance"  # SlipstreamDriver's enforceRebalance reason


def admin_listener_broker(tmp: Any, args: tuple[str, ...]) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    for broker in running_broker(tmp, (*args, "--admin-port", str(port))):
        base = f"http://127.0.0.1:{port}"
        wait_ready(base)
        yield broker, base


@pytest.fixture(scope="module")
def classic_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    args = (*GROUP_BROKER_ARGS, "--set", "group.initial.rebalance.delay.ms=0")
    yield from admin_listener_broker(tmp_path_factory.mktemp("classic"), args)


@pytest.fixture(scope="module")
def consumer_protocol_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    yield from admin_listener_broker(tmp_path_factory.mktemp("consumer"), CONSUMER_BROKER_ARGS)


def create_topic(bootstrap: str, topic: str, partitions: int) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(15)
    return admin


def add_partitions(admin: AdminClient, topic: str, total: int) -> None:
    for f in admin.create_partitions([NewPartitions(topic, total)]).values():
        f.result(15)


def joined(client_id: str, how: str = "new") -> Callable[[Events], bool]:
    return lambda events: any(
        e["kind"] == "member-joined" and e["client_id"] == client_id and e["how"] == how for e in events
    )


def has(kind: str, **fields: Any) -> Callable[[Events], bool]:
    return lambda events: any(e["kind"] == kind and all(e.get(k) == v for k, v in fields.items()) for e in events)


def after(events: Events, seq: int) -> Events:
    return [e for e in events if e["seq"] > seq]


def timeline(base: str, group: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "slipstream", "groups", "history", group, "--admin-url", base, "--full-ids"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout


def pause(member: Member) -> None:
    assert member.proc is not None
    os.kill(member.proc.pid, signal.SIGSTOP)


def resume(member: Member) -> None:
    assert member.proc is not None
    os.kill(member.proc.pid, signal.SIGCONT)


# ================================================================ classic groups


def test_protocol_vote_partitions_added_rejoin_and_subscription_change(
    classic_broker, java_driver, topic_name, tmp_path
) -> None:
    """A confluent member offering [roundrobin, range] and a Java one offering
    [cooperative-sticky, range]; the topic grows; the Java member calls enforceRebalance;
    the confluent member subscribes to a second topic."""
    broker, base = classic_broker
    admin = create_topic(broker.bootstrap, topic_name, 2)
    other_topic = f"{topic_name}-more"
    create_topic(broker.bootstrap, other_topic, 1)
    group = f"causes-{topic_name}"
    trigger = tmp_path / "rebalance"
    members: list[Member] = []
    try:
        a = start_python_member(
            "confluent", "vote-a", broker.bootstrap, topic_name, group, assignor="roundrobin,range",
            usr1_topics=[topic_name, other_topic],
            # the leader learns of new partitions within a second (librdkafka's default: 5 min)
            extra_conf={"topic.metadata.refresh.interval.ms": 1000},
        )
        members.append(a)
        events = wait_history(base, group, has("generation-completed"), "a alone")
        id_a = member_id_of(events, "vote-a")
        j = start_java_member(java_driver, "vote-java", broker.bootstrap, topic_name, group,
                              assignor="cooperative-sticky,range", rebalance_trigger=trigger)
        members.append(j)
        events = wait_history(base, group, joined("vote-java"), "the Java member to join", 60)
        id_j = member_id_of(events, "vote-java")
        voted = wait_history(base, group, stable_with({id_a, id_j}), "a and the Java member stable")

        mark = voted[-1]["seq"]
        add_partitions(admin, topic_name, 4)
        events = wait_history(base, group, lambda ev: any(
            e["kind"] == "assignment-sent" and sum(e["partitions"].values()) == 4 for e in after(ev, mark)),
            "an assignment of the four partitions")
        grown = after(wait_history(base, group, lambda ev: stable_with({id_a, id_j})(after(ev, mark)), "stable"), mark)

        mark = grown[-1]["seq"]
        trigger.touch()
        j.wait_for(lambda e: e["event"] == "rebalance_enforced", 20, "rebalance_enforced")
        enforced = after(wait_history(base, group, lambda ev: has("rebalance-started")(after(ev, mark))
                                      and stable_with({id_a, id_j})(after(ev, mark)), "the enforced rebalance"), mark)

        mark = enforced[-1]["seq"]
        assert a.proc is not None
        a.proc.send_signal(signal.SIGUSR1)
        a.wait_for(lambda e: e["event"] == "resubscribed", 20, "resubscribed")
        changed = after(wait_history(base, group, lambda ev: has("rebalance-started")(after(ev, mark))
                                     and stable_with({id_a, id_j})(after(ev, mark)), "the new subscription"), mark)
        out = timeline(base, group)
    finally:
        for m in members:
            m.reap()

    # The vote: a alone prefers roundrobin; with the Java member range, the one protocol both offer.
    votes = [(e["protocol"], e["votes"]) for e in voted if e["kind"] == "protocol-selected"]
    assert votes == [("roundrobin", {"roundrobin": 1}), ("range", {"range": 2})]
    assert [e["protocol"] for e in voted if e["kind"] == "generation-started"] == ["roundrobin", "range"]
    assert "protocol range chosen (range 2 votes)" in out

    # Partitions added: a classic broker only sees the leader (a) rejoin with the same
    # subscription, so that is the cause it gives; the assignment then covers four partitions.
    assert causes(grown)[0] == ("member-joined", "member-rejoined")
    first = grown[[e["kind"] for e in grown].index("rebalance-started") - 1]
    assert (first["member_id"], first["how"]) == (id_a, "rejoin")
    assert not [e for e in grown if e["kind"] == "metadata-changed"]
    assert sum([e for e in grown if e["kind"] == "assignment-sent"][-1]["partitions"].values()) == 4

    # enforceRebalance: the Java member's JoinGroup carries its new owned partitions and
    # generation but the same topics: a rejoin, with the reason the application gave.
    assert causes(enforced)[0] == ("member-joined", "member-rejoined")
    (started, *_) = [e for e in enforced if e["kind"] == "rebalance-started"]
    rejoined = enforced[enforced.index(started) - 1]
    assert (rejoined["member_id"], rejoined["how"]) == (id_j, "rejoin")
    assert f"(client reason: {ENFORCED_REBALANCE_REASON})" in started["reason"]
    assert not [e for e in enforced if e["kind"] == "metadata-changed"]

    # A new subscription is a metadata change naming the topics.
    assert causes(changed)[0] == ("metadata-changed", "metadata-changed")
    meta = next(e for e in changed if e["kind"] == "metadata-changed")
    assert meta["member_id"] == id_a and sorted(meta["topics"]) == sorted([topic_name, other_topic])
    assert f"member {id_a}: subscription metadata changed: " in out


def test_static_replacement_and_fenced_zombie(classic_broker, topic_name) -> None:
    """A static confluent member is paused (SIGSTOP) and restarted under its group.instance.id;
    the old process, resumed, is fenced."""
    broker, base = classic_broker
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"causes-{topic_name}"
    members: list[Member] = []
    try:
        old = start_python_member("confluent", "static-1", broker.bootstrap, topic_name, group,
                                  instance_id="inst-1", session_ms=10000)
        members.append(old)
        before = wait_history(base, group, has("generation-completed"), "the static member alone")
        id_old = member_id_of(before, "static-1")
        pause(old)
        new = start_python_member("confluent", "static-1", broker.bootstrap, topic_name, group,
                                  instance_id="inst-1", session_ms=10000)
        members.append(new)
        wait_history(base, group, joined("static-1", "static-replacement"), "the replacement")
        resume(old)
        events = after(wait_history(base, group, has("request-fenced", member_id=id_old), "the zombie's fence"),
                       before[-1]["seq"])
        out = timeline(base, group)
    finally:
        for m in members:
            m.reap()
    (generation,) = [e["generation"] for e in before if e["kind"] == "generation-completed"]
    replaced = next(e for e in events if e["kind"] == "member-joined")
    id_new = replaced["member_id"]
    assert (replaced["how"], replaced["instance_id"], replaced["replaced_member_id"]) == (
        "static-replacement", "inst-1", id_old)
    assert id_new != id_old
    # Same protocol: the replacement takes the old member's place without a rebalance.
    assert not [e for e in events if e["kind"] == "rebalance-started"]
    fence = next(e for e in events if e["kind"] == "request-fenced")
    assert (fence["member_id"], fence["instance_id"], fence["api"], fence["error"]) == (
        id_old, "inst-1", "Heartbeat", "FENCED_INSTANCE_ID")
    assert fence["request_generation"] == fence["current_generation"] == generation
    assert f"member {id_new} joined, replacing {id_old} as instance inst-1" in out
    assert f"Heartbeat from member {id_old} (instance inst-1) fenced: FENCED_INSTANCE_ID" in out


def test_removed_at_rebalance_timeout_and_fenced_zombie(classic_broker, java_driver, topic_name) -> None:
    """A Java member (session 10 s, rebalance timeout 3 s) is paused; a confluent member joins;
    the Java member never rejoins and is removed at the rebalance timeout, before its session
    would expire. Resumed, its next request names a member the group no longer has."""
    broker, base = classic_broker
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"causes-{topic_name}"
    members: list[Member] = []
    try:
        a = start_python_member("confluent", "rt-a", broker.bootstrap, topic_name, group, max_poll_ms=3000)
        members.append(a)
        wait_history(base, group, has("generation-completed"), "a alone")
        j = start_java_member(java_driver, "rt-java", broker.bootstrap, topic_name, group,
                              session_ms=10000, max_poll_ms=3000)
        members.append(j)
        events = wait_history(base, group, joined("rt-java"), "the Java member to join", 60)
        id_a, id_j = member_id_of(events, "rt-a"), member_id_of(events, "rt-java")
        before = wait_history(base, group, stable_with({id_a, id_j}), "a and the Java member stable")
        (java_generation, *_) = [e["generation"] for e in before if e["kind"] == "generation-completed"][-1:]
        pause(j)
        c = start_python_member("confluent", "rt-c", broker.bootstrap, topic_name, group, max_poll_ms=3000)
        members.append(c)
        wait_history(base, group, has("removed-at-rebalance-timeout"), "the Java member's removal")
        resume(j)
        events = after(wait_history(base, group, has("request-fenced", member_id=id_j), "the zombie's fence", 20),
                       before[-1]["seq"])
        out = timeline(base, group)
    finally:
        for m in members:
            m.reap()
    id_c = member_id_of(events, "rt-c")
    assert causes(events)[0] == ("member-joined", "member-joined")
    (removed,) = [e for e in events if e["kind"] == "removed-at-rebalance-timeout"]
    assert removed["member_ids"] == [id_j]
    assert 3000 <= removed["waited_ms"] < 10000  # the rebalance timeout, not the 10 s session
    assert not [e for e in events if e["kind"] == "session-expired"]
    generation = next(e for e in events if e["kind"] == "generation-started")
    assert set(generation["member_ids"]) == {id_a, id_c}
    fence = next(e for e in events if e["kind"] == "request-fenced")
    assert (fence["member_id"], fence["error"]) == (id_j, "UNKNOWN_MEMBER_ID")
    assert fence["api"] in ("Heartbeat", "LeaveGroup", "OffsetCommit"), fence
    if fence["api"] != "LeaveGroup":  # LeaveGroup carries no generation
        assert fence["request_generation"] == java_generation
    assert f"member {id_j} never rejoined within " in out and "removed at the rebalance timeout" in out


def test_removed_at_sync_deadline_and_fenced_sync(classic_broker, java_driver, topic_name, tmp_path) -> None:
    """A Java leader (rebalance timeout 3 s, session 10 s) whose assignor takes 6 s when a
    confluent member joins: it never sends SyncGroup in time and is removed at the sync
    deadline; its late SyncGroup names a member the group no longer has."""
    broker, base = classic_broker
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"causes-{topic_name}"
    stall = tmp_path / "stall"
    members: list[Member] = []
    try:
        j = start_java_member(java_driver, "sync-java", broker.bootstrap, topic_name, group,
                              session_ms=10000, max_poll_ms=3000, stall_assignment=(stall, 6000))
        members.append(j)
        before = wait_history(base, group, has("generation-completed"), "the Java member alone", 60)
        id_j = member_id_of(before, "sync-java")
        stall.touch()
        b = start_python_member("confluent", "sync-b", broker.bootstrap, topic_name, group, max_poll_ms=3000)
        members.append(b)
        j.wait_for(lambda e: e["event"] == "assignment_stalling", 30, "the stalled assignment")
        events = after(wait_history(base, group, has("request-fenced", member_id=id_j, api="SyncGroup"),
                                    "the late SyncGroup's fence", 30), before[-1]["seq"])
        out = timeline(base, group)
    finally:
        for m in members:
            m.reap()
    id_b = member_id_of(events, "sync-b")
    assert [c for _trigger, c in causes(events)][:2] == ["member-joined", "sync-deadline"]
    stuck = next(e for e in events if e["kind"] == "generation-started")
    (removed,) = [e for e in events if e["kind"] == "removed-at-sync-deadline"]
    assert (removed["member_ids"], removed["generation"]) == ([id_j], stuck["generation"])
    assert 3000 <= removed["waited_ms"] < 6000  # the rebalance timeout, before the assignor is done
    assert set(next(e for e in events if e["kind"] == "generation-started" and e["generation"] > stuck["generation"])
               ["member_ids"]) == {id_b}
    fence = next(e for e in events if e["kind"] == "request-fenced")
    assert (fence["error"], fence["request_generation"]) == ("UNKNOWN_MEMBER_ID", stuck["generation"])
    assert f"member {id_j} never sent SyncGroup for generation {stuck['generation']}" in out


# ================================================================ consumer-protocol (KIP-848) groups


def test_consumer_protocol_partitions_added_and_rebalance_timeout(consumer_protocol_broker, topic_name) -> None:
    """confluent members with group.protocol=consumer: the topic grows (a gets the new
    partitions), then b joins and a must revoke, but its on_revoke callback stalls (its
    heartbeats go on): the broker fences it at its rebalance timeout (max.poll.interval.ms)."""
    broker, base = consumer_protocol_broker
    admin = create_topic(broker.bootstrap, topic_name, 2)
    group = f"causes-kip848-{topic_name}"
    members: list[Member] = []

    def owns(client_id: str, count: int) -> Callable[[Events], bool]:
        def check(events: Events) -> bool:
            ids = [e["member_id"] for e in events if e["kind"] == "member-joined" and e["client_id"] == client_id]
            owned: set[str] = set()
            for e in events:
                if e["kind"] == "member-epoch-advanced" and ids and e["member_id"] == ids[-1]:
                    owned = (owned - set(e["revoking"])) | set(e["assigning"])
            return len(owned) == count
        return check

    try:
        a = start_python_member("confluent", "k-a", broker.bootstrap, topic_name, group, group_protocol="consumer",
                                max_poll_ms=4000, stall_revoke_s=10)
        members.append(a)
        wait_history(base, group, owns("k-a", 2), "a to own both partitions")
        add_partitions(admin, topic_name, 4)
        events = wait_history(base, group, owns("k-a", 4), "a to get the new partitions")
        id_a = member_id_of(events, "k-a")
        b = start_python_member("confluent", "k-b", broker.bootstrap, topic_name, group, group_protocol="consumer")
        members.append(b)
        a.wait_for(lambda e: e["event"] == "stalling", 30, "a's stalled revocation")
        events = wait_history(base, group, owns("k-b", 4), "b to own every partition after a was fenced", 30)
        id_b = member_id_of(events, "k-b")
        out = timeline(base, group)
    finally:
        for m in members:
            m.reap()
    bumps = [(e["epoch"], e["cause"]) for e in events if e["kind"] == "group-epoch-bumped"]
    assert bumps == [
        (1, "group created"),
        (2, "topic metadata changed"),
        (3, f"member {id_b} joined"),
        (4, f"member {id_a} was fenced: it did not revoke its partitions in time"),
    ]
    grown = [e for e in events if e["kind"] == "member-epoch-advanced" and e["member_id"] == id_a][1]
    assert (grown["to_epoch"], len(grown["assigning"]), grown["state"]) == (2, 2, "stable")
    (revoking,) = [e for e in events if e["kind"] == "member-epoch-advanced" and e["revoking"]]
    assert (revoking["member_id"], revoking["state"], len(revoking["revoking"])) == (id_a, "unrevoked-partitions", 2)
    (fenced,) = [e for e in events if e["kind"] == "member-fenced"]
    assert (fenced["member_id"], fenced["cause"]) == (id_a, "rebalance-timeout")
    assert 4000 <= fenced["at_ms"] - revoking["at_ms"] < 10000  # a's rebalance timeout, before its stall ends
    assert f"member {id_a} was fenced: it did not revoke its partitions in time" in out
