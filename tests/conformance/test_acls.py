"""ACLs against a broker process (authorizer=acl, super user admin) with real clients over
SASL_PLAINTEXT + SCRAM: confluent-kafka and the Java AdminClient manage ACLs; each client
is refused with Kafka's error where a principal lacks the right (produce without Write,
a group without Read, a topic without Describe is invisible, configs without
AlterConfigs, ACLs without Alter on the cluster) and served where it has it; ACLs
survive kill -9.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from slipstream.testing.ports import free_port

pytestmark = pytest.mark.conformance

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
TIMEOUT = 20


class AclBroker:
    def __init__(self, tmp: Path, process_class: type[Any]) -> None:
        self.sasl_port = free_port()
        self.process = process_class(tmp / "data", tmp / "broker.log")
        users = ",".join(f"{u}:{p}" for u, p in USERS.items())
        self.process.extra_args = (
            # SASL first: it is bound before the PLAINTEXT port start() waits for.
            "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},PLAINTEXT://127.0.0.1:{self.process.port}",
            "--set", "authorizer=acl", "--set", "super.users=User:admin",
            "--set", f"scram.bootstrap.users={users}",
        )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def ck(self, user: str, **extra: object) -> dict[str, object]:
        return {
            "bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": USERS[user],
            "log_level": 0, **extra,
        }

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.ck(user))

    def grant(self, principal: str, operation: AclOperation, rtype: ResourceType, name: str,
              pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
        binding = AclBinding(rtype, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)
        admin = self.admin()  # kept alive until the futures resolve
        for future in admin.create_acls([binding]).values():
            future.result(timeout=TIMEOUT)

    def topic(self) -> str:
        name = f"acl-{uuid.uuid4().hex[:10]}"
        admin = self.admin()
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(timeout=TIMEOUT)
        return name


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, broker_process_class: type[Any]) -> Iterator[AclBroker]:
    b = AclBroker(tmp_path_factory.mktemp("acls"), broker_process_class)
    b.process.start()
    try:
        yield b
    finally:
        b.process.stop()


def produce_errors(conf: dict[str, object], topic: str, n: int = 3) -> list[int | None]:
    """Produce n records; the error code of each delivery (None: delivered)."""
    producer = Producer({**conf, "message.timeout.ms": 10000})
    codes: list[int | None] = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _msg: codes.append(err.code() if err else None))
    producer.flush(TIMEOUT)
    return codes


def consume(conf: dict[str, object], topic: str, group: str, n: int) -> tuple[list[bytes], list[int]]:
    """(values read, error codes seen) after up to n values or TIMEOUT seconds."""
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[int] = []
    try:
        for _ in range(TIMEOUT * 4):
            msg = consumer.poll(0.25)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error().code())
                if msg.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
                    break
                continue
            values.append(msg.value())
            if len(values) >= n:
                break
    finally:
        consumer.close()
    return values, errors


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # the legacy AlterConfigs API on purpose
def test_confluent_kafka_refused_then_allowed(acl_broker: AclBroker) -> None:
    topic = acl_broker.topic()
    alice = acl_broker.ck("alice")
    # Nothing granted: the topic is invisible, producing is refused.
    assert topic not in AdminClient(alice).list_topics(timeout=TIMEOUT).topics
    assert topic in acl_broker.admin().list_topics(timeout=TIMEOUT).topics
    assert set(produce_errors(alice, topic)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}

    # ACLs need Alter on the cluster; configs need AlterConfigs on the topic.
    refused = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    alice_admin = AdminClient(alice)
    with pytest.raises(KafkaException) as no_alter:
        for future in alice_admin.create_acls([refused]).values():
            future.result(timeout=TIMEOUT)
    assert no_alter.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "1000"})
    with pytest.raises(KafkaException) as no_configs:
        for future in alice_admin.alter_configs([resource]).values():
            future.result(timeout=TIMEOUT)
    assert no_configs.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Write lets alice produce; bob reads the topic only once he may also Read the group.
    acl_broker.grant("User:alice", AclOperation.WRITE, ResourceType.TOPIC, topic)
    assert produce_errors(alice, topic) == [None, None, None]
    bob = acl_broker.ck("bob")
    acl_broker.grant("User:bob", AclOperation.READ, ResourceType.TOPIC, topic)
    values, errors = consume(bob, topic, f"g-{topic}", 3)
    assert values == [] and KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    acl_broker.grant("User:bob", AclOperation.READ, ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED)
    values, errors = consume(bob, topic, f"g-{topic}", 3)
    assert values == [b"v0", b"v1", b"v2"]

    admin = acl_broker.admin()
    listed = admin.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ).result(timeout=TIMEOUT)
    assert {(b.restype, b.name, b.resource_pattern_type) for b in listed} >= {
        (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL),
        (ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED),
    }


def test_acls_survive_kill_9(acl_broker: AclBroker) -> None:
    topic = acl_broker.topic()
    acl_broker.grant("User:alice", AclOperation.WRITE, ResourceType.TOPIC, topic)
    acl_broker.process.restart()
    alice = acl_broker.ck("alice")
    assert produce_errors(alice, topic, 1) == [None]
    assert set(produce_errors(acl_broker.ck("bob"), topic, 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    admin = acl_broker.admin()
    deleted = admin.delete_acls([
        AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ])
    for future in deleted.values():
        assert len(future.result(timeout=TIMEOUT)) == 1
    acl_broker.process.restart()
    assert set(produce_errors(alice, topic, 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}


@pytest.mark.java
def test_java_admin_acls_producer_and_consumer(
    acl_broker: AclBroker, java_driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def as_user(user: str) -> None:
        props = tmp_path / f"{user}.properties"
        props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{USERS[user]}";\n'
        )
        monkeypatch.setenv("SLIPSTREAM_DRIVER_CLIENT_PROPERTIES", str(props))

    topic = acl_broker.topic()
    group = f"jg-{topic}"
    bootstrap = acl_broker.bootstrap
    as_user("alice")
    refused = java_driver.run(bootstrap, "acl-create", "TOPIC", topic, "LITERAL", "User:alice", "ALL", "ALLOW")
    assert [e["type"] for e in refused if e["event"] == "refused"] == [
        "org.apache.kafka.common.errors.ClusterAuthorizationException"
    ], refused
    as_user("admin")
    created = java_driver.run(bootstrap, "acl-create", "TOPIC", topic, "LITERAL", "User:alice", "READ", "ALLOW")
    assert [e for e in created if e["event"] == "acl-created"], created
    acl_broker.grant("User:bob", AclOperation.WRITE, ResourceType.TOPIC, "jw-", ResourcePatternType.PREFIXED)
    listed = java_driver.run(bootstrap, "acl-list")
    assert {"type": "TOPIC", "name": topic, "pattern": "LITERAL", "principal": "User:alice", "operation": "READ",
            "permission": "ALLOW", "event": "acl"} in listed
    # bob may write jw-* (so his idempotent producer gets an id) but not this topic.
    as_user("bob")
    denied = java_driver.run(bootstrap, "try-produce", topic)
    assert [e["type"] for e in denied if e["event"] == "refused"] == [
        "org.apache.kafka.common.errors.TopicAuthorizationException"
    ], denied
    # alice reads the topic but not the group.
    as_user("alice")
    polled = java_driver.run(bootstrap, "try-group-poll", topic, group)
    assert [e["type"] for e in polled if e["event"] == "refused"] == [
        "org.apache.kafka.common.errors.GroupAuthorizationException"
    ], polled


def test_kafka_python_positive_and_negative(acl_broker: AclBroker) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    allowed, forbidden = acl_broker.topic(), acl_broker.topic()
    acl_broker.grant("User:alice", AclOperation.WRITE, ResourceType.TOPIC, allowed)
    producer = KafkaProducer(
        bootstrap_servers=acl_broker.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice", sasl_plain_password=USERS["alice"], max_block_ms=10000,
    )
    try:
        assert producer.send(allowed, b"ok").get(timeout=TIMEOUT).offset == 0
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(forbidden, b"no").get(timeout=TIMEOUT)
    finally:
        producer.close()


def test_aiokafka_positive_and_negative(acl_broker: AclBroker) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    allowed, forbidden = acl_broker.topic(), acl_broker.topic()
    acl_broker.grant("User:bob", AclOperation.WRITE, ResourceType.TOPIC, allowed)

    async def run() -> int:
        producer = AIOKafkaProducer(
            bootstrap_servers=acl_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password=USERS["bob"],
            request_timeout_ms=10000,
        )
        await producer.start()
        try:
            sent = await producer.send_and_wait(allowed, b"ok")
            with pytest.raises(TopicAuthorizationFailedError):
                await producer.send_and_wait(forbidden, b"no")
            return int(sent.offset)
        finally:
            await producer.stop()

    assert asyncio.run(run()) == 0


def test_kcat_sees_only_described_topics_and_is_refused_writes(acl_broker: AclBroker, kcat_bin: str) -> None:
    visible, hidden = acl_broker.topic(), acl_broker.topic()
    acl_broker.grant("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, visible)
    settings = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
                "-X", "sasl.username=alice", "-X", f"sasl.password={USERS['alice']}"]
    listing = subprocess.run([kcat_bin, "-b", acl_broker.bootstrap, *settings, "-L"],
                             capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0, listing.stderr
    assert f'topic "{visible}"' in listing.stdout and hidden not in listing.stdout
    produced = subprocess.run([kcat_bin, "-b", acl_broker.bootstrap, *settings, "-P", "-t", visible],
                              input="x\n", capture_output=True, text=True, timeout=30)
    assert "authorization failed" in (produced.stdout + produced.stderr).lower(), produced
