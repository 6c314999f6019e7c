"""Transactions in a cluster whose only listener is secured, with ACLs on (issue 16).

Three brokers over one PostgreSQL database, each with one listener and the ACL
authorizer: SASL_PLAINTEXT, where the brokers reach each other as user ``broker``
(Kafka's ``listener.name.<l>.<mechanism>.sasl.jaas.config``), or SSL with client
certificates required, where they present their own certificate. Either principal holds
no more than Kafka asks of an inter-broker principal: ClusterAction on the cluster,
granted by an ACL. A confluent-kafka transactional producer (a super user) writes
partitions led by every broker and commits offsets of a group coordinated by another
broker than its transaction coordinator: the markers go out to the other brokers
through SASL, and read_committed consumers through each broker see what committed and
nothing of what aborted.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from test_cluster import OFFSETS_PARTITIONS, SESSION_MS, Cluster
from test_cluster_transactions import (
    consume_committed,
    finish,
    group_elsewhere,
    reader_settings,
    txn_coordinator,
    values_of,
)

from slipstream.cli.certs import make_dev_certs
from slipstream.testing.broker_process import BrokerProcess
from slipstream.testing.ports import free_port

pytestmark = pytest.mark.conformance

TXN_PARTITIONS = 4  # as test_cluster_transactions (txn_coordinator assumes it)
PARTITIONS = 6
CALL_TIMEOUT_S = 60
MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class Secured:
    """One way of securing the cluster: the brokers' settings (but the listener's port),
    the admin client's, and the principal the brokers are to each other."""

    protocol: str
    broker_settings: dict[str, str]
    admin: dict[str, str]
    inter_broker_principal: str


def secured(kind: str, tmp_path: Path) -> Secured:
    if kind == "SASL_PLAINTEXT":
        jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-pw";'
        return Secured(
            kind,
            {
                "scram.bootstrap.users": "admin:admin-pw,broker:broker-pw",
                "super.users": "User:admin",
                "sasl.mechanism.inter.broker.protocol": MECHANISM,
                f"listener.name.sasl_plaintext.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            },
            {"security.protocol": kind, "sasl.mechanism": MECHANISM, "sasl.username": "admin", "sasl.password": "admin-pw"},
            "User:broker",
        )
    certs = tmp_path / "certs"
    make_dev_certs(certs, clients=["admin"])
    return Secured(
        kind,
        {
            "ssl.certfile": str(certs / "broker.pem"), "ssl.keyfile": str(certs / "broker-key.pem"),
            "ssl.cafile": str(certs / "ca.pem"), "ssl.client.auth": "required",
            "super.users": "User:CN=admin,O=Slipstream Dev",
        },
        {
            "security.protocol": kind, "ssl.ca.location": str(certs / "ca.pem"),
            "ssl.certificate.location": str(certs / "admin.pem"), "ssl.key.location": str(certs / "admin-key.pem"),
        },
        "User:CN=localhost,O=Slipstream Dev",  # the broker certificate's subject
    )  # fmt: skip


def secure_broker(tmp_path: Path, node: int, url: str, security: Secured) -> BrokerProcess:
    port = free_port()
    settings = {**security.broker_settings, "listeners": f"{security.protocol}://127.0.0.1:{port}", "authorizer": "acl"}
    return BrokerProcess(
        tmp_path / f"data-{node}",
        tmp_path / f"broker-{node}.log",
        port=port,
        extra_args=(
            "--storage", "postgres", "--database-url", url,
            "--set", f"node.id={node}",
            "--set", f"cluster.broker.session.ms={SESSION_MS}",
            "--set", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
            "--set", f"transaction.state.log.num.partitions={TXN_PARTITIONS}",
            "--set", "group.initial.rebalance.delay.ms=0",
            *(arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")),
        ),
    )  # fmt: skip


@pytest.fixture(params=["SASL_PLAINTEXT", "SSL"])
def security(request: pytest.FixtureRequest, tmp_path: Path) -> Secured:
    return secured(request.param, tmp_path)


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str, security: Secured) -> Iterator[Cluster]:
    brokers = [secure_broker(tmp_path, node, postgres_url, security) for node in (1, 2, 3)]
    try:
        starters = [threading.Thread(target=broker.start, kwargs={"timeout": 60}) for broker in brokers]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        assert all(b.alive() for b in brokers), [b.log_tail(20) for b in brokers]
        c = Cluster(brokers, postgres_url)
        c.wait_settled({1, 2, 3})
        yield c
    finally:
        for broker in brokers:
            broker.stop()


def as_admin(security: Secured, bootstrap: str, **settings: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, **security.admin, **settings}


def grant_cluster_action_to_the_brokers(security: Secured, cluster: Cluster) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(as_admin(security, cluster.bootstrap))
    binding = AclBinding(
        ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, security.inter_broker_principal, "*",
        AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW,
    )  # fmt: skip
    assert admin.create_acls([binding])[binding].result(timeout=20) is None


def create_topic(security: Secured, bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(as_admin(security, bootstrap))
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], request_timeout=15)
    futures[topic].result(timeout=20)


def read_committed(security: Secured, bootstrap: str, topic: str, want: set[str], timeout: float = 60) -> set[str]:
    """``test_cluster_transactions.read_committed`` as the admin principal."""
    return consume_committed(Consumer(as_admin(security, bootstrap, **reader_settings())), topic, want, timeout)


def test_a_transaction_over_every_broker_commits_with_markers_sent_as_a_cluster_action_principal(
    security: Secured, cluster: Cluster, topic_name: str
) -> None:
    everyone = {1, 2, 3}
    grant_cluster_action_to_the_brokers(security, cluster)
    create_topic(security, cluster.brokers[0].bootstrap, topic_name)
    leaders = cluster.wait_settled(everyone, topic_name, PARTITIONS)
    assert {leaders[(topic_name, p)] for p in range(PARTITIONS)} == everyone, leaders
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    producer = Producer(as_admin(
        security, cluster.bootstrap, **{"transactional.id": tid, "transaction.timeout.ms": 60_000, "linger.ms": 5},
    ))  # fmt: skip
    producer.init_transactions(CALL_TIMEOUT_S)
    coordinator = txn_coordinator(cluster, tid, everyone)
    group = group_elsewhere(cluster, coordinator, everyone)
    member = Consumer(as_admin(security, cluster.bootstrap, **{"group.id": group}))  # its metadata only
    committed: list[str] = []
    aborted: list[str] = []
    try:
        for label, commit, offset in (("first", True, 10), ("aborted", False, 20), ("second", True, 30)):
            values = values_of(label, 12)
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.produce(topic_name, value.encode(), key=value.encode(), partition=i % PARTITIONS)
            producer.flush(CALL_TIMEOUT_S)
            producer.send_offsets_to_transaction(
                [TopicPartition(topic_name, p, offset) for p in range(PARTITIONS)],
                member.consumer_group_metadata(), CALL_TIMEOUT_S,
            )  # fmt: skip
            assert finish(producer, commit=commit) == commit
            (committed if commit else aborted).extend(values)
    finally:
        member.close()
        producer.flush(5)

    # Read through each broker alone: each one points its reader at the leaders.
    for broker in cluster.brokers:
        seen = read_committed(security, broker.bootstrap, topic_name, set(committed))
        assert seen == set(committed), (sorted(set(committed) - seen)[:5], sorted(seen - set(committed))[:5])
    reader = Consumer(as_admin(security, cluster.bootstrap, **{"group.id": group, "isolation.level": "read_committed"}))
    try:
        got = reader.committed([TopicPartition(topic_name, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in got} == dict.fromkeys(range(PARTITIONS), 30)
    # The coordinator's markers reached the other brokers, every one accepted.
    coordinator_log = cluster.by_node(coordinator).log_text()
    assert "not sent" not in coordinator_log and "CLUSTER_AUTHORIZATION" not in coordinator_log
