"""Static membership (KIP-345) with the Java client, and groups mixing client implementations.

Static: three Java members with group.instance.id. One is killed (-9) and
restarted with the same instance id within the session timeout: it gets its
partitions back in the same generation and nobody else is revoked. Another one
closes (a static member sends no LeaveGroup): the broker keeps it until its
session expires, then rebalances once.

Mixed: librdkafka and Java (and kafka-python, aiokafka) members in one group
with the same assignor name (range); whoever is leader computes the assignment
for all of them and every member gets partitions.
"""

from __future__ import annotations

import uuid

import pytest
from conformance_helpers import ck_create_topic
from test_groups_harness import (
    TOPIC_PARTITIONS,
    PacedProducer,
    admin_client,
    assignment_of,
    describe_group,
    finish_and_verify,
    mono_ns,
    start_java_member,
    start_python_member,
    wait_stable,
)

pytestmark = [pytest.mark.conformance, pytest.mark.java]

STATIC_SESSION_MS = 6000
STATIC_HEARTBEAT_MS = 500


def _rebalance_events(member, since: int = 0) -> list[dict]:
    return [e for e in member.snapshot() if e["event"] in ("assigned", "revoked", "lost") and e["t"] > since]


def test_static_member_restart_and_expiry(group_broker, java_driver, topic_name):
    b = group_broker
    group = f"g-static-{uuid.uuid4().hex[:8]}"
    ck_create_topic(b.bootstrap, topic_name, partitions=TOPIC_PARTITIONS)
    admin = admin_client(b.bootstrap)
    members = []

    def start(name, instance, client_id=None):
        m = start_java_member(java_driver, name, b.bootstrap, topic_name, group, assignor="range",
                              instance_id=instance, session_ms=STATIC_SESSION_MS, heartbeat_ms=STATIC_HEARTBEAT_MS,
                              client_id=client_id)
        members.append(m)
        return m

    producer = PacedProducer(b.bootstrap, topic_name, rate=150).start()
    try:
        s1, s2, s3 = start("s1", "i1"), start("s2", "i2"), start("s3", "i3")
        desc = wait_stable(admin, group, [s1, s2, s3])
        assert {md.client_id: md.group_instance_id for md in desc.members} == {"s1": "i1", "s2": "i2", "s3": "i3"}
        member_ids = {md.group_instance_id: md.member_id for md in desc.members}
        gens = {s.name: [e["generation"] for e in s.snapshot() if e["event"] == "assigned"][-1] for s in (s1, s2, s3)}
        assert len(set(gens.values())) == 1, f"members of a stable group in different generations: {gens}"
        gen = gens["s1"]
        before = {s.name: s.owned() for s in (s1, s2, s3)}

        # kill -9 s2 and start it again with the same instance id, well within the session timeout.
        t_kill = mono_ns()
        s2.kill()
        s2b = start("s2b", "i2", client_id="s2")  # the same application, restarted
        got = s2b.wait_for(lambda e: e["event"] == "assigned", 20, "the restarted static member's assignment")
        restart_s = (got["t"] - t_kill) / 1e9
        assert restart_s < STATIC_SESSION_MS / 1000, f"restart took {restart_s:.1f}s, longer than the session"
        assert set(got["owned"]) == before["s2"], f"restarted member got {got['owned']}, had {before['s2']}"
        assert got["generation"] == gen, f"restarted static member joined generation {got['generation']}, not {gen}"
        desc = wait_stable(admin, group, [s1, s2b, s3])
        now_ids = {md.group_instance_id: md.member_id for md in desc.members}
        assert now_ids["i2"] != member_ids["i2"], "the restarted instance must get a new member id"
        assert (now_ids["i1"], now_ids["i3"]) == (member_ids["i1"], member_ids["i3"])
        for s in (s1, s3):
            assert s.owned() == before[s.name]
            evs = _rebalance_events(s, since=t_kill)
            assert not evs, f"{s.name} saw a rebalance when a static member was restarted: {evs}"
        # s2b processes from where s2 committed (checked by finish_and_verify) and everyone goes on.
        t = mono_ns()
        for s in (s1, s2b, s3):
            s.wait_for(lambda e: e["event"] == "committed" and e["t"] > t, 20, "a commit after the restart")

        # s3 closes: a static member sends no LeaveGroup, so the broker keeps it until its session
        # expires, then rebalances once (generation + 1) and s1/s2b take its partitions.
        t_close = mono_ns()
        s3.close()
        desc = describe_group(admin, group)
        assert "i3" in {md.group_instance_id for md in desc.members}, (
            f"a closed static member must stay until its session expires: {[md.group_instance_id for md in desc.members]}"
        )
        desc = wait_stable(admin, group, [s1, s2b], timeout=STATIC_SESSION_MS / 1000 + 20)
        reassigned = min(s.wait_for(lambda e: e["event"] == "assigned" and e["t"] > t_close, 5, "reassignment")["t"]
                         for s in (s1, s2b))
        waited = (reassigned - t_close) / 1e9
        assert waited >= (STATIC_SESSION_MS - STATIC_HEARTBEAT_MS - 200) / 1000, (
            f"the closed static member was removed after {waited:.2f}s, before its session timeout"
        )
        for s in (s1, s2b):
            gens = [e["generation"] for e in s.snapshot() if e["event"] == "assigned"]
            assert gens[-1] == gen + 1, f"{s.name}: generations {gens}; expected one rebalance {gen} -> {gen + 1}"
        assert sorted(len(assignment_of(md)) for md in desc.members) == [3, 3]

        acks = producer.stop()

        def remove_static_members():
            # Closed static members stay until their sessions expire; an admin removes them at
            # once with one LeaveGroup naming their instance ids (KIP-345).
            events = java_driver.run(b.bootstrap, "admin-remove-members", group, "i1", "i2")
            assert [e["group_instance_id"] for e in events if e["event"] == "removed"] == ["i1", "i2"]

        _committed, report = finish_and_verify(admin, b, group, topic_name, members, acks,
                                               after_close=remove_static_members,
                                               empty_timeout=STATIC_SESSION_MS / 1000 - 1)
        print({"restart_s": restart_s, "expiry_s": waited, "report": report})
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


def _mixed(b, java_driver, topic, kinds):
    group = f"g-mixed-{uuid.uuid4().hex[:8]}"
    ck_create_topic(b.bootstrap, topic, partitions=TOPIC_PARTITIONS)
    admin = admin_client(b.bootstrap)
    members = []
    producer = PacedProducer(b.bootstrap, topic, rate=150).start()
    try:
        for i, kind in enumerate(kinds):
            name = f"{kind}-{i}"
            if kind == "java":
                m = start_java_member(java_driver, name, b.bootstrap, topic, group, assignor="range")
            else:
                m = start_python_member(kind, name, bootstrap=b.bootstrap, topic=topic, group=group, assignor="range")
            members.append(m)
            # One at a time, so the first kind is the leader that computes the assignment.
            desc = wait_stable(admin, group, members)
        assert desc.partition_assignor == "range"
        sizes = {md.client_id: len(assignment_of(md)) for md in desc.members}
        assert all(sizes.values()) and max(sizes.values()) - min(sizes.values()) <= 1, sizes
        t = mono_ns()
        for m in members:
            m.wait_for(lambda e: e["event"] == "record" and e["t"] > t, 20, "a record")
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, b, group, topic, members, acks)
        print(kinds, sizes, report)
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


@pytest.mark.parametrize("kinds", [("confluent", "java"), ("java", "confluent")], ids=["ck-leader", "java-leader"])
def test_confluent_and_java_in_one_group(group_broker, java_driver, topic_name, kinds):
    _mixed(group_broker, java_driver, topic_name, kinds)


def test_four_client_implementations_in_one_group(group_broker, java_driver, topic_name):
    _mixed(group_broker, java_driver, topic_name, ("kafka-python", "java", "aiokafka", "confluent"))
