"""Brokers of one cluster (issue 16), each configured its own way, with real clients.

Listeners: each broker registers all its advertised listeners by name, and an answer
served on listener L names every broker by its L endpoint, leaving out a broker without
L (as Kafka does): Metadata, DescribeTopicPartitions, DescribeCluster, FindCoordinator
and the leader hints of Produce/Fetch. A client that bootstraps on the second listener is never sent to the
first one (advertised at a closed port here, so a client sent there would fail).

ACLs: an ACL created through one broker and deleted through another right away is in
the second broker's DeleteAcls answer (the second broker is paused while the ACL is
created and its DeleteAcls sent, so it cannot have followed the change first).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import ck_create_topic, ck_produce

from slipstream.broker.cluster import database
from slipstream.broker.cluster.assignment import current_leader, live_brokers
from slipstream.coordinator import OFFSETS_TOPIC, partition_for
from slipstream.protocol.errors import ErrorCode
from slipstream.testing.broker_process import BrokerProcess
from slipstream.testing.ports import free_port

pytestmark = pytest.mark.conformance

SESSION_MS = 3000
OFFSETS_PARTITIONS = 6
SECOND = "CLIENTS"  # the second listener's name (a PLAINTEXT one)


@contextlib.contextmanager
def brokers_over(
    tmp_path: Path, url: str, args: dict[int, tuple[str, ...]], ports: dict[int, int] | None = None
) -> Iterator[dict[int, BrokerProcess]]:
    """One broker per node id over the database at ``url``, each with its own extra
    arguments, started together; ``ports``: the port to wait for, when not its own."""
    brokers = {
        node: BrokerProcess(
            tmp_path / f"data-{node}",
            tmp_path / f"broker-{node}.log",
            port=(ports or {}).get(node) or free_port(),
            extra_args=(
                "--storage", "postgres", "--database-url", url,
                "--set", f"node.id={node}",
                "--set", f"cluster.broker.session.ms={SESSION_MS}",
                "--set", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                "--set", "group.initial.rebalance.delay.ms=0",
                *extra,
            ),
        )
        for node, extra in args.items()
    }  # fmt: skip
    try:
        starters = [threading.Thread(target=b.start, kwargs={"timeout": 60}) for b in brokers.values()]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        assert all(b.alive() for b in brokers.values()), [b.log_tail(20) for b in brokers.values()]
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


def database_leaders(url: str) -> tuple[set[int], dict[tuple[str, int], int]]:
    """(live node ids, each partition's live leader) as the database says."""

    async def read() -> tuple[set[int], dict[tuple[str, int], int]]:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            now = await database.now_ms(conn)
            live = [b.node_id for b in live_brokers(await database.brokers(conn), now, SESSION_MS)]
            leases = await database.leases(conn)
        finally:
            await conn.close()
        found = {tp: current_leader(lease, live, now) for tp, lease in leases.items()}
        return set(live), {tp: lease.owner for tp, lease in found.items() if lease is not None}

    return asyncio.run(read())


def wait_settled(url: str, live: set[int], topic: str | None = None, partitions: int = 0) -> dict[tuple[str, int], int]:
    """Until exactly ``live`` are live and every offsets (and ``topic``) partition is led."""
    wanted = [(OFFSETS_TOPIC, p) for p in range(OFFSETS_PARTITIONS)] + [(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + 30
    while True:
        found_live, leaders = database_leaders(url)
        if found_live == live and all(leaders.get(tp) in live for tp in wanted):
            return {tp: leaders[tp] for tp in wanted}
        if time.monotonic() > deadline:
            raise AssertionError(f"cluster did not settle on {live}: live {found_live}, leaders {leaders}")
        time.sleep(0.2)


def eventually(ask: Any, check: Any) -> Any:
    """``ask()`` until ``check(answer)`` holds (a broker's view follows the database within
    a heartbeat); the last answer."""
    deadline = time.monotonic() + 10
    while True:
        answer = ask()
        if check(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def request(port: int, spec: Any, body: Any, version: int) -> Any:
    from slipstream.client.connection import BrokerConnection

    async def ask() -> Any:
        conn = await BrokerConnection("127.0.0.1", port).connect()
        try:
            return await conn.request(spec, body, version=version)
        finally:
            await conn.close()

    return asyncio.run(ask())


def test_a_client_of_the_second_listener_is_sent_only_to_second_listener_endpoints(
    tmp_path: Path, postgres_url: str, topic_name: str
) -> None:
    from slipstream.protocol.apis import describe_cluster as dc
    from slipstream.protocol.apis import describe_topic_partitions as dtp
    from slipstream.protocol.apis import fetch as fe
    from slipstream.protocol.apis import find_coordinator as fc
    from slipstream.protocol.apis import metadata as md
    from slipstream.protocol.apis import produce as pr
    from slipstream.protocol.records import ProducerRecord, build_batch

    second = {1: free_port(), 2: free_port()}
    closed = {1: free_port(), 2: free_port()}  # where PLAINTEXT is advertised: nobody listens

    def two_listeners(node: int) -> tuple[str, ...]:
        return (
            "--set", f"listeners=PLAINTEXT://127.0.0.1:0,{SECOND}://127.0.0.1:{second[node]}",
            "--set", f"listener.security.protocol.map={SECOND}:PLAINTEXT",
            "--set", f"advertised.listeners=PLAINTEXT://127.0.0.1:{closed[node]},{SECOND}://127.0.0.1:{second[node]}",
        )  # fmt: skip

    # Brokers 1 and 2 have both listeners; broker 3 only PLAINTEXT.
    with brokers_over(tmp_path, postgres_url, {1: two_listeners(1), 2: two_listeners(2), 3: ()}, second) as brokers:
        wait_settled(postgres_url, {1, 2, 3})
        ck_create_topic(f"127.0.0.1:{second[1]}", topic_name, partitions=6)
        leaders = wait_settled(postgres_url, {1, 2, 3}, topic_name, 6)
        led = {p: leaders[(topic_name, p)] for p in range(6)}
        assert set(led.values()) == {1, 2, 3}

        # Metadata on the second listener: brokers 1 and 2 at their second endpoints;
        # broker 3's partitions LISTENER_NOT_FOUND (v6+) or LEADER_NOT_AVAILABLE (v5).
        def metadata(version: int) -> Any:
            body = md.MetadataRequest(topics=[md.MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=False)
            return request(second[1], md.SPEC, body, version)

        def partitions(answer: Any) -> dict[int, tuple[int, int]]:
            return {p.partition_index: (p.error_code, p.leader_id) for p in answer.topics[0].partitions}

        expected = {p: (ErrorCode.LISTENER_NOT_FOUND, -1) if n == 3 else (0, n) for p, n in led.items()}
        answer = eventually(lambda: metadata(12), lambda a: partitions(a) == expected)
        assert {(b.node_id, b.port) for b in answer.brokers} == {(1, second[1]), (2, second[2])}
        assert partitions(answer) == expected
        old = {p: (ErrorCode.LEADER_NOT_AVAILABLE, -1) if n == 3 else (0, n) for p, n in led.items()}
        assert partitions(metadata(5)) == old
        # On PLAINTEXT, every broker at its PLAINTEXT endpoint.
        plain = request(
            brokers[3].port, md.SPEC, md.MetadataRequest(topics=[md.MetadataRequestTopic(name=topic_name)]), 12
        )
        assert {(b.node_id, b.port) for b in plain.brokers} == {(1, closed[1]), (2, closed[2]), (3, brokers[3].port)}

        # DescribeTopicPartitions (the Java admin's describeTopics) says the same.
        def partition_descriptions(port: int) -> dict[int, tuple[int, int]]:
            body = dtp.DescribeTopicPartitionsRequest(
                topics=[dtp.DescribeTopicPartitionsRequestTopic(name=topic_name)], response_partition_limit=100
            )
            answer = request(port, dtp.SPEC, body, 0)
            return {p.partition_index: (p.error_code, p.leader_id) for p in answer.topics[0].partitions}

        assert eventually(lambda: partition_descriptions(second[1]), lambda a: a == expected) == expected
        assert eventually(
            lambda: partition_descriptions(brokers[3].port), lambda a: a == {p: (0, n) for p, n in led.items()}
        ) == {p: (0, n) for p, n in led.items()}

        described = request(second[2], dc.SPEC, dc.DescribeClusterRequest(include_cluster_authorized_operations=False), 1)
        assert {(b.broker_id, b.port) for b in described.brokers} == {(1, second[1]), (2, second[2])}

        # FindCoordinator: a group coordinated by broker 2 at its second endpoint, one
        # coordinated by broker 3 COORDINATOR_NOT_AVAILABLE (it has no such listener).
        offsets_leaders = {p: leaders[(OFFSETS_TOPIC, p)] for p in range(OFFSETS_PARTITIONS)}
        group_of = {}
        for i in range(1000):
            group_of.setdefault(offsets_leaders[partition_for(f"g{i}", OFFSETS_PARTITIONS)], f"g{i}")
        keys = [group_of[n] for n in (1, 2, 3) if n in group_of]
        found = request(second[1], fc.SPEC, fc.FindCoordinatorRequest(key_type=0, coordinator_keys=keys), 4)
        answered = {c.key: (c.error_code, c.node_id, c.port) for c in found.coordinators}
        for node, port in second.items():
            if node in group_of:
                assert answered[group_of[node]] == (0, node, port)
        if 3 in group_of:
            assert answered[group_of[3]][0] == ErrorCode.COORDINATOR_NOT_AVAILABLE

        # Leader hints on NOT_LEADER_OR_FOLLOWER, asked of broker 1 on the second listener:
        # broker 2's partition names broker 2 at its second endpoint; broker 3's none.
        hinted = [p for p, n in led.items() if n in (2, 3)]
        batch = memoryview(build_batch([ProducerRecord(b"k", b"to-the-wrong-broker")]))
        produce = pr.ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[pr.ProduceRequestTopicData(
            name=topic_name,
            partition_data=[pr.ProduceRequestPartitionData(index=p, records=batch) for p in hinted],
        )])  # fmt: skip
        produced = request(second[1], pr.SPEC, produce, 10)
        hints = {
            r.index: (r.error_code, r.current_leader.leader_id) for r in produced.responses[0].partition_responses
        }
        assert hints == {p: (ErrorCode.NOT_LEADER_OR_FOLLOWER, 2 if led[p] == 2 else -1) for p in hinted}
        assert {(e.node_id, e.port) for e in produced.node_endpoints} == {(2, second[2])}
        fetch = fe.FetchRequest(max_wait_ms=0, min_bytes=0, session_epoch=-1, topics=[fe.FetchRequestTopic(
            topic_id=answer.topics[0].topic_id,
            partitions=[fe.FetchRequestPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in hinted],
        )])  # fmt: skip
        fetched = request(second[1], fe.SPEC, fetch, 16)
        hints = {r.partition_index: (r.error_code, r.current_leader.leader_id) for r in fetched.responses[0].partitions}
        assert hints == {p: (ErrorCode.NOT_LEADER_OR_FOLLOWER, 2 if led[p] == 2 else -1) for p in hinted}
        assert {(e.node_id, e.port) for e in fetched.node_endpoints} == {(2, second[2])}

        # Broker 3 leaves: brokers 1 and 2 lead everything, and confluent-kafka clients on
        # the second listener produce and consume in a group through it alone.
        brokers[3].stop()
        wait_settled(postgres_url, {1, 2}, topic_name, 6)
        bootstrap = f"127.0.0.1:{second[2]}"
        acks = ck_produce(bootstrap, topic_name, range(60))
        assert len(acks) == 60
        assert group_values(bootstrap, topic_name, f"{topic_name}-group", 60) == {f"v{i}".encode() for i in range(60)}


def group_values(bootstrap: str, topic: str, group: str, count: int) -> set[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    values: set[bytes] = set()
    deadline = time.monotonic() + 40
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value() is not None:
                values.add(message.value())
        consumer.commit(asynchronous=False)  # the group's coordinator, on the second listener
    finally:
        consumer.close()
    return values


def test_an_acl_created_through_one_broker_and_deleted_through_another_is_in_its_answer(
    tmp_path: Path, postgres_url: str, topic_name: str
) -> None:
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import create_acls as ca
    from slipstream.protocol.apis import delete_acls as da
    from slipstream.protocol.apis import describe_acls as ds

    topic, literal, write, allow, any_ = 2, 3, 4, 3, 1
    secured = ("--set", "authorizer=acl", "--set", "super.users=User:ANONYMOUS")
    with brokers_over(tmp_path, postgres_url, {1: secured, 2: secured}) as brokers:

        async def create_then_delete() -> tuple[Any, Any]:
            a = await BrokerConnection("127.0.0.1", brokers[1].port).connect()
            b = await BrokerConnection("127.0.0.1", brokers[2].port).connect()
            paused = brokers[2].pid
            try:
                # Broker 2 is paused from before the creation until its DeleteAcls waits in
                # its socket: when it resumes, the change's notification and the request
                # arrive together, and the request is answered before a heartbeat re-reads
                # the ACLs (several database round trips).
                os.kill(paused, signal.SIGSTOP)
                try:
                    created = await a.request(ca.SPEC, ca.CreateAclsRequest(creations=[ca.CreateAclsRequestCreation(
                        resource_type=topic, resource_name=topic_name, resource_pattern_type=literal,
                        principal="User:alice", host="*", operation=write, permission_type=allow,
                    )]))  # fmt: skip
                    deleting = asyncio.ensure_future(b.request(da.SPEC, da.DeleteAclsRequest(filters=[
                        da.DeleteAclsRequestFilter(
                            resource_type_filter=any_, resource_name_filter=topic_name, pattern_type_filter=any_,
                            principal_filter=None, host_filter=None, operation=any_, permission_type=any_,
                        ),
                    ])))  # fmt: skip
                    await asyncio.sleep(0.1)  # the request written to the paused broker's socket
                finally:
                    os.kill(paused, signal.SIGCONT)
                return created, await deleting
            finally:
                await a.close()
                await b.close()

        created, deleted = asyncio.run(create_then_delete())
        assert [r.error_code for r in created.results] == [0]
        (result,) = deleted.filter_results
        assert result.error_code == 0
        assert [(m.resource_name, m.principal, m.operation) for m in result.matching_acls] == [
            (topic_name, "User:alice", write)
        ]

        def described(node: int) -> Any:
            body = ds.DescribeAclsRequest(
                resource_type_filter=any_, resource_name_filter=topic_name, pattern_type_filter=any_,
                principal_filter=None, host_filter=None, operation=any_, permission_type=any_,
            )
            return request(brokers[node].port, ds.SPEC, body, 3)

        for node in (1, 2):  # gone from both brokers' sets too
            assert eventually(lambda node=node: described(node), lambda a: a.resources == []).resources == []
