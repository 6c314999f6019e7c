"""DescribeCluster, DescribeTopicPartitions and SaslHandshake against the embedded broker."""

from __future__ import annotations

import time

import pytest
from broker_helpers import create_topic, raw_request, result
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from slipstream.broker.broker import Broker
from slipstream.protocol.apis import describe_cluster as dcl
from slipstream.protocol.apis import describe_topic_partitions as dtp
from slipstream.protocol.apis import sasl_handshake as sh

pytestmark = pytest.mark.timeout(30)

NOT_PROVIDED = -2147483648


def state_of(broker: Broker):  # type: ignore[no-untyped-def]
    assert broker.state is not None
    return broker.state


# ---------------------------------------------------------------- DescribeCluster


def test_describe_cluster_confluent(admin: AdminClient, broker: Broker) -> None:
    cluster = result(admin.describe_cluster(include_authorized_operations=True))
    assert cluster.cluster_id == state_of(broker).cluster_id
    assert cluster.controller.id == 0
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", broker.port)]
    assert not cluster.authorized_operations  # not provided: no authorizer


def test_describe_cluster_kafka_python(kadmin: KafkaAdminClient, broker: Broker) -> None:
    cluster = kadmin.describe_cluster()
    assert cluster["cluster_id"] == state_of(broker).cluster_id
    assert cluster["controller_id"] == 0
    assert cluster["brokers"] == [{"broker_id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None}]


def test_describe_cluster_advertised_address() -> None:
    with Broker(storage="memory", port=0, node_id=3, advertised_host="kafka.example", advertised_port=19092) as b:
        response = raw_request(b, dcl.SPEC, 1, dcl.DescribeClusterRequest(endpoint_type=1))
        assert response.error_code == 0
        assert response.endpoint_type == 1
        assert response.controller_id == 3
        assert [(x.broker_id, x.host, x.port) for x in response.brokers] == [(3, "kafka.example", 19092)]


@pytest.mark.parametrize(("version", "endpoint", "code"), [(0, 1, 0), (1, 1, 0), (1, 2, 114), (1, 7, 115)])
def test_describe_cluster_versions(broker: Broker, version: int, endpoint: int, code: int) -> None:
    request = dcl.DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=endpoint)
    response = raw_request(broker, dcl.SPEC, version, request)
    assert response.error_code == code
    assert response.cluster_authorized_operations == NOT_PROVIDED
    assert response.cluster_id == state_of(broker).cluster_id
    if code:
        assert response.error_message and "endpoint" in response.error_message
        assert response.brokers == []
    else:
        assert response.error_message is None
        assert [b.broker_id for b in response.brokers] == [0]


# ---------------------------------------------------------------- DescribeTopicPartitions


def test_describe_topic_partitions_kafka_python(kadmin: KafkaAdminClient, admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "dtp-a", 2)
    answer = kadmin.describe_topic_partitions(["dtp-a", "dtp-missing"])
    assert answer["next_cursor"] is None
    found, missing = answer["topics"]  # name order
    assert (missing["name"], missing["error_code"], missing["partitions"]) == ("dtp-missing", 3, [])
    assert found["error_code"] == 0
    assert found["topic_id"] == state_of(broker).topics.topics["dtp-a"].topic_id
    assert found["is_internal"] is False
    assert [p["partition_index"] for p in found["partitions"]] == [0, 1]
    for p in found["partitions"]:
        assert (p["leader_id"], p["leader_epoch"], p["replica_nodes"], p["isr_nodes"]) == (0, 0, [0], [0])
        assert p["offline_replicas"] == []


def test_describe_topic_partitions_paging(kadmin: KafkaAdminClient, admin: AdminClient) -> None:
    create_topic(admin, "page-a", 3)
    create_topic(admin, "page-b", 2)
    create_topic(admin, "page-c", 1)
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        answer = kadmin.describe_topic_partitions(["page-c", "page-a", "page-b"], response_partition_limit=2, cursor=cursor)
        seen += [(t["name"], p["partition_index"]) for t in answer["topics"] for p in t["partitions"]]
        pages += 1
        cursor = answer["next_cursor"]
        if cursor is None:
            break
        assert pages < 10
    assert seen == [("page-a", 0), ("page-a", 1), ("page-a", 2), ("page-b", 0), ("page-b", 1), ("page-c", 0)]
    assert pages == 3


def _dtp(broker: Broker, names: list[str], limit: int, cursor: tuple[str, int] | None = None):  # type: ignore[no-untyped-def]
    request = dtp.DescribeTopicPartitionsRequest(
        topics=[dtp.DescribeTopicPartitionsRequestTopic(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else dtp.DescribeTopicPartitionsRequestCursor(
            topic_name=cursor[0], partition_index=cursor[1]
        ),
    )
    return raw_request(broker, dtp.SPEC, 0, request)


def test_describe_topic_partitions_cursor_rules(broker: Broker, admin: AdminClient) -> None:
    create_topic(admin, "cur-a", 2)
    create_topic(admin, "cur-b", 2)
    # An empty topic list means all topics, the internal offsets topic included (sorted first).
    everything = _dtp(broker, [], 1)
    assert [t.name for t in everything.topics] == ["__consumer_offsets"]
    # The limit ends exactly at a topic boundary: the cursor points at the next topic.
    first = _dtp(broker, [], 2, ("cur-a", 0))
    assert [(t.name, len(t.partitions)) for t in first.topics] == [("cur-a", 2)]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("cur-b", 0)
    # An empty topic list means all topics, from the cursor on.
    rest = _dtp(broker, [], 10, ("cur-a", 1))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("cur-a", [1]), ("cur-b", [0, 1])
    ]
    assert rest.next_cursor is None
    assert all(p.eligible_leader_replicas == [] and p.last_known_elr == [] for p in rest.topics[1].partitions)
    # A limit below 1 still answers one partition.
    assert sum(len(t.partitions) for t in _dtp(broker, ["cur-a"], 0).topics) == 1
    # Cursor outside the list, or negative: INVALID_REQUEST on every requested topic.
    bad = _dtp(broker, ["cur-a", "cur-b"], 10, ("zzz", 0))
    assert [(t.name, t.error_code) for t in bad.topics] == [("cur-a", 42), ("cur-b", 42)]
    negative = _dtp(broker, ["cur-b"], 10, ("cur-b", -1))
    assert [t.error_code for t in negative.topics] == [42]
    # Illegal names are INVALID_TOPIC_EXCEPTION; unknown ones use none of the limit.
    mixed = _dtp(broker, ["bad name", "cur-b", "ghost"], 3)
    assert [(t.name, t.error_code) for t in mixed.topics] == [("bad name", 17), ("cur-b", 0), ("ghost", 3)]
    assert mixed.next_cursor is None
    # Once the limit is used up, the next topic is where the next page starts (existing or not).
    full = _dtp(broker, ["bad name", "cur-b", "ghost"], 2)
    assert [t.name for t in full.topics] == ["bad name", "cur-b"]
    assert (full.next_cursor.topic_name, full.next_cursor.partition_index) == ("ghost", 0)


def test_describe_topic_partitions_internal_topic(broker: Broker, admin: AdminClient) -> None:
    create_topic(admin, "__internal_test", 1)
    answer = _dtp(broker, ["__internal_test"], 10)
    assert answer.topics[0].is_internal is True


# ---------------------------------------------------------------- SaslHandshake


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_handshake_refused(broker: Broker, version: int) -> None:
    response = raw_request(broker, sh.SPEC, version, sh.SaslHandshakeRequest(mechanism="PLAIN"))
    assert response.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == []


def test_sasl_client_gets_clear_error(broker: Broker) -> None:
    errors: list[KafkaError] = []
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "user",
        "sasl.password": "secret",
        "reconnect.backoff.ms": 1000,
        "log_level": 0,
        "error_cb": errors.append,
    })
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors, "no error reported to a SASL client"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Unsupported SASL mechanism" in errors[0].str()
    # The broker keeps serving plaintext clients.
    assert raw_request(broker, dcl.SPEC, 0, dcl.DescribeClusterRequest()).error_code == 0
