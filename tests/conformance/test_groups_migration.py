"""Online migration between the group protocols with confluent-kafka (librdkafka) members.

Rolling upgrade, as a user rolls a consumer fleet onto ``group.protocol=consumer``:
three classic members (eager ``range`` or ``cooperative-sticky``) consume a
6-partition topic while a producer writes; one at a time, a classic member is
closed and a consumer-protocol member started in its place. The first new member
converts the classic group into a consumer group (Kafka 4's default
``group.consumer.migration.policy=bidirectional``); the remaining classic members
keep working inside it through JoinGroup/SyncGroup/Heartbeat until they are
replaced. Checked: no partition ever owned by two members, every record processed,
commits equal to what was processed, and the group ends a consumer group.

Rolling downgrade: the same the other way round; when the last consumer-protocol
member leaves, the group becomes a classic group again.
"""

from __future__ import annotations

import uuid

import pytest
from test_groups_harness import (
    Member,
    PacedProducer,
    admin_client,
    describe_group,
    finish_and_verify,
    listed_groups,
    mono_ns,
    progressed,
    start_java_member,
    start_python_member,
    wait_stable,
)

pytestmark = pytest.mark.conformance

PARTITIONS = 6


def _group_type(admin, group: str) -> str:
    return listed_groups(admin)[group].type.name


def _roll(admin, group: str, members: list[Member], live: list[Member], new_member,
          types: list[str]) -> None:
    """Replace the live members one by one (close, then start the new one), waiting each time
    for the group to settle with records flowing through every live member; after step i
    the group's type must be ``types[i]``."""
    for i, expected in enumerate(types):
        old = live.pop(0)
        old.close()
        fresh = new_member(i)
        members.append(fresh)
        live.append(fresh)
        since = mono_ns()
        wait_stable(admin, group, live, partitions=PARTITIONS, timeout=60)
        progressed(live, since, timeout=30)
        assert _group_type(admin, group) == expected, f"after replacing {old.name} with {fresh.name}"


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"])
def test_rolling_upgrade_from_classic_to_consumer(consumer_broker, topic_name, assignor):
    from confluent_kafka import ConsumerGroupType
    from conformance_helpers import ck_create_topic

    bootstrap = consumer_broker.bootstrap
    group = f"g-upgrade-{assignor}-{uuid.uuid4().hex[:8]}"
    ck_create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    admin = admin_client(bootstrap)
    producer = PacedProducer(bootstrap, topic_name, rate=150, cap=20_000).start()
    members: list[Member] = []
    try:
        live = [start_python_member("confluent", f"classic{i}", bootstrap, topic_name, group, assignor=assignor)
                for i in range(3)]
        members += live
        wait_stable(admin, group, live, partitions=PARTITIONS, timeout=30)
        assert _group_type(admin, group) == "CLASSIC"
        progressed(live, mono_ns() - 1, timeout=30)

        def consumer_member(i: int) -> Member:
            return start_python_member("confluent", f"consumer{i}", bootstrap, topic_name, group,
                                       group_protocol="consumer")

        # The first consumer-protocol member converts the group; the classic members that
        # remain work inside it until they are replaced.
        _roll(admin, group, members, live, consumer_member, ["CONSUMER"] * 3)
        assert describe_group(admin, group).type == ConsumerGroupType.CONSUMER
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, consumer_broker, group, topic_name, members, acks)
        print(f"{assignor}: upgraded with {len(acks)} records, {report}")
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


def test_rolling_downgrade_from_consumer_to_classic(consumer_broker, topic_name):
    from conformance_helpers import ck_create_topic

    bootstrap = consumer_broker.bootstrap
    group = f"g-downgrade-{uuid.uuid4().hex[:8]}"
    ck_create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    admin = admin_client(bootstrap)
    producer = PacedProducer(bootstrap, topic_name, rate=150, cap=20_000).start()
    members: list[Member] = []
    try:
        live = [start_python_member("confluent", f"consumer{i}", bootstrap, topic_name, group,
                                    group_protocol="consumer") for i in range(3)]
        members += live
        wait_stable(admin, group, live, partitions=PARTITIONS, timeout=30)
        assert _group_type(admin, group) == "CONSUMER"

        def classic_member(i: int) -> Member:
            return start_python_member("confluent", f"classic{i}", bootstrap, topic_name, group,
                                       assignor="cooperative-sticky")

        # A consumer group with classic members until its last consumer-protocol member leaves.
        _roll(admin, group, members, live, classic_member, ["CONSUMER", "CONSUMER", "CLASSIC"])
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, consumer_broker, group, topic_name, members, acks)
        print(f"downgraded with {len(acks)} records, {report}")
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


def test_rolling_upgrade_of_java_consumers(consumer_broker, topic_name, java_driver):
    """The Java client (kafka-clients), cooperative-sticky classic members replaced by
    group.protocol=consumer ones: the same upgrade with the reference client."""
    from conformance_helpers import ck_create_topic

    bootstrap = consumer_broker.bootstrap
    group = f"g-upgrade-java-{uuid.uuid4().hex[:8]}"
    ck_create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    admin = admin_client(bootstrap)
    producer = PacedProducer(bootstrap, topic_name, rate=150, cap=20_000).start()
    members: list[Member] = []
    try:
        live = [start_java_member(java_driver, f"classic{i}", bootstrap, topic_name, group,
                                  assignor="cooperative-sticky") for i in range(2)]
        members += live
        wait_stable(admin, group, live, partitions=PARTITIONS, timeout=60)
        assert _group_type(admin, group) == "CLASSIC"

        def consumer_member(i: int) -> Member:
            return start_java_member(java_driver, f"consumer{i}", bootstrap, topic_name, group,
                                     assignor="uniform", group_protocol="consumer")

        _roll(admin, group, members, live, consumer_member, ["CONSUMER"] * 2)
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, consumer_broker, group, topic_name, members, acks)
        print(f"java: upgraded with {len(acks)} records, {report}")
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


def test_clients_without_the_new_protocol_stay_in_an_upgraded_group(consumer_broker, topic_name):
    """aiokafka and kafka-python speak only the classic protocol: a confluent-kafka member with
    group.protocol=consumer upgrades their group, and they go on side by side with it (a mixed
    group, as Kafka 4 runs it) until it leaves and the group is classic again."""
    from conformance_helpers import ck_create_topic

    bootstrap = consumer_broker.bootstrap
    group = f"g-mixed-old-{uuid.uuid4().hex[:8]}"
    ck_create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    admin = admin_client(bootstrap)
    producer = PacedProducer(bootstrap, topic_name, rate=150, cap=20_000).start()
    members: list[Member] = []
    try:
        old = [start_python_member(client, client, bootstrap, topic_name, group, assignor="range")
               for client in ("aiokafka", "kafka-python")]
        members += old
        wait_stable(admin, group, old, partitions=PARTITIONS, timeout=60)
        new = start_python_member("confluent", "consumer", bootstrap, topic_name, group, group_protocol="consumer")
        members.append(new)
        since = mono_ns()
        wait_stable(admin, group, [*old, new], partitions=PARTITIONS, timeout=60)
        progressed([*old, new], since, timeout=30)
        assert _group_type(admin, group) == "CONSUMER"
        new.close()
        since = mono_ns()
        wait_stable(admin, group, old, partitions=PARTITIONS, timeout=60)
        progressed(old, since, timeout=30)
        assert _group_type(admin, group) == "CLASSIC"
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, consumer_broker, group, topic_name, members, acks)
        print(f"mixed with old clients: {len(acks)} records, {report}")
    finally:
        producer._stop.set()
        for m in members:
            m.reap()
