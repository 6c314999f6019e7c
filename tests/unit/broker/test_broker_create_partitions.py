"""CreatePartitions through confluent-kafka and kafka-python admin clients."""

from __future__ import annotations

import pytest
from broker_helpers import create_topic, error_of, raw_request, result
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient

from slipstream.broker.broker import Broker
from slipstream.protocol.apis.create_partitions import (
    SPEC,
    CreatePartitionsRequest,
    CreatePartitionsRequestAssignment,
    CreatePartitionsRequestTopic,
)

pytestmark = pytest.mark.timeout(30)


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_increase_partitions_confluent(admin: AdminClient, broker: Broker) -> None:
    create_topic(admin, "grow", 2)
    for future in admin.create_partitions([NewPartitions("grow", 5)]).values():
        assert result(future) is None
    assert partition_count(admin, "grow") == 5
    assert len(broker.state.topics.topics["grow"].partitions) == 5  # type: ignore[union-attr]


def test_new_partitions_accept_data(admin: AdminClient, broker: Broker) -> None:
    from confluent_kafka import Producer

    create_topic(admin, "grow-data", 1)
    result(admin.create_partitions([NewPartitions("grow-data", 3)])["grow-data"])
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    delivered: list[tuple[int, int]] = []
    producer.produce(
        "grow-data", b"v", partition=2, on_delivery=lambda e, m: delivered.append((m.partition(), m.offset()))
    )
    assert producer.flush(10) == 0
    assert delivered == [(2, 0)]


def test_shrink_and_same_count_are_invalid_partitions(admin: AdminClient) -> None:
    create_topic(admin, "fixed", 3)
    for count, words in ((2, "cannot be removed"), (3, "already has 3 partitions")):
        with pytest.raises(KafkaException) as excinfo:
            result(admin.create_partitions([NewPartitions("fixed", count)])["fixed"])
        err = error_of(excinfo)
        assert err.code() == KafkaError.INVALID_PARTITIONS
        assert words in err.str()
    assert partition_count(admin, "fixed") == 3


def test_unknown_topic(admin: AdminClient) -> None:
    with pytest.raises(KafkaException) as excinfo:
        result(admin.create_partitions([NewPartitions("missing", 4)])["missing"])
    assert error_of(excinfo).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_validate_only_changes_nothing(admin: AdminClient) -> None:
    create_topic(admin, "dry", 1)
    result(admin.create_partitions([NewPartitions("dry", 4)], validate_only=True)["dry"])
    assert partition_count(admin, "dry") == 1
    with pytest.raises(KafkaException) as excinfo:
        result(admin.create_partitions([NewPartitions("dry", 1)], validate_only=True)["dry"])
    assert error_of(excinfo).code() == KafkaError.INVALID_PARTITIONS


def test_assignments_must_name_this_node(admin: AdminClient) -> None:
    create_topic(admin, "placed", 1)
    result(admin.create_partitions([NewPartitions("placed", 3, replica_assignment=[[0], [0]])])["placed"])
    assert partition_count(admin, "placed") == 3
    with pytest.raises(KafkaException) as excinfo:
        result(admin.create_partitions([NewPartitions("placed", 4, replica_assignment=[[7]])])["placed"])
    err = error_of(excinfo)
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "only node 0" in err.str()
    assert partition_count(admin, "placed") == 3


def test_kafka_python_create_partitions(kadmin: KafkaAdminClient, admin: AdminClient) -> None:
    create_topic(admin, "kp-grow", 1)
    response = kadmin.create_partitions({"kp-grow": 4})
    assert [r.error_code for r in response.results] == [0]
    assert partition_count(admin, "kp-grow") == 4
    with pytest.raises(kerrors.InvalidPartitionsError):
        kadmin.create_partitions({"kp-grow": 2})


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_answers_with_messages(broker: Broker, admin: AdminClient, version: int) -> None:
    create_topic(admin, "versions", 1)
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequestTopic(name="versions", count=2, assignments=None),
            CreatePartitionsRequestTopic(name="nope", count=2, assignments=None),
            CreatePartitionsRequestTopic(
                name="dup", count=2, assignments=[CreatePartitionsRequestAssignment(broker_ids=[0])]
            ),
            CreatePartitionsRequestTopic(name="dup", count=3, assignments=None),
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    response = raw_request(broker, SPEC, version, request)
    codes = [(r.name, r.error_code) for r in response.results]
    assert codes == [("versions", 0), ("nope", 3), ("dup", 42), ("dup", 42)]
    assert response.results[0].error_message is None
    assert "does not exist" in response.results[1].error_message
    assert "more than once" in response.results[2].error_message
    assert partition_count(admin, "versions") == 2


def test_wrong_assignment_count(broker: Broker, admin: AdminClient) -> None:
    create_topic(admin, "counted", 1)
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequestTopic(
                name="counted", count=4, assignments=[CreatePartitionsRequestAssignment(broker_ids=[0])]
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    response = raw_request(broker, SPEC, 3, request)
    assert response.results[0].error_code == 39  # INVALID_REPLICA_ASSIGNMENT
    assert "1 replica assignments given for 3 new partitions" in response.results[0].error_message
