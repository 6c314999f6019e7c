"""TLS and SASL against a broker process with four listeners, with real clients.

PLAINTEXT (the fixture's port), SASL_SSL and SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256/512)
and SSL with required client certificates; certificates from ``slipstream certs``,
the first user from ``scram.bootstrap.users``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import KafkaError as KpKafkaError

from slipstream.cli.certs import make_dev_certs
from slipstream.client.admin import Admin
from slipstream.client.aio_consumer import AIOConsumer
from slipstream.client.cluster import Cluster
from slipstream.client.connection import AuthenticationFailed
from slipstream.client.producer import AIOProducer
from slipstream.client.scram_admin import alter_scram_user, describe_scram_users
from slipstream.client.security import ClientSecurity
from slipstream.testing.ports import free_port

pytestmark = pytest.mark.conformance

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"


class SecureBroker:
    def __init__(self, tmp: Path, process_class: type[Any]) -> None:
        self.certs = tmp / "certs"
        make_dev_certs(self.certs, clients=["client"])
        self.ports = {name: free_port() for name in ("SASL_SSL", "SSL", "SASL_PLAINTEXT")}
        self.process = process_class(tmp / "data", tmp / "broker.log", extra_args=self.args())
        listeners = [f"PLAINTEXT://127.0.0.1:{self.process.port}"] + [
            f"{name}://127.0.0.1:{port}" for name, port in self.ports.items()
        ]
        self.process.extra_args = (*self.args(), "--set", "listeners=" + ",".join(listeners))

    def args(self) -> tuple[str, ...]:
        c = self.certs
        return (
            "--set", f"ssl.certfile={c / 'broker.pem'}", "--set", f"ssl.keyfile={c / 'broker-key.pem'}",
            "--set", f"ssl.cafile={c / 'ca.pem'}", "--set", "ssl.client.auth=required",
            "--set", f"scram.bootstrap.users={ADMIN}:{ADMIN_PASSWORD}",
        )

    def bootstrap(self, listener: str) -> str:
        port = self.process.port if listener == "PLAINTEXT" else self.ports[listener]
        return f"127.0.0.1:{port}"

    def ck(self, listener: str, user: str = ADMIN, password: str = ADMIN_PASSWORD,
           mechanism: str = "SCRAM-SHA-512", **extra: object) -> dict[str, object]:
        conf: dict[str, object] = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if "SSL" in listener:
            conf["ssl.ca.location"] = str(self.certs / "ca.pem")
        if listener == "SSL":
            conf["ssl.certificate.location"] = str(self.certs / "client.pem")
            conf["ssl.key.location"] = str(self.certs / "client-key.pem")
        if listener.startswith("SASL"):
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
        conf.update(extra)
        return conf

    def kp(self, listener: str, user: str = ADMIN, password: str = ADMIN_PASSWORD,
           mechanism: str = "SCRAM-SHA-512") -> dict[str, object]:
        conf: dict[str, object] = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": listener}
        if "SSL" in listener:
            conf["ssl_cafile"] = str(self.certs / "ca.pem")
        if listener == "SSL":
            conf["ssl_certfile"] = str(self.certs / "client.pem")
            conf["ssl_keyfile"] = str(self.certs / "client-key.pem")
        if listener.startswith("SASL"):
            conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
        return conf

    def ours(self, listener: str, user: str = ADMIN, password: str = ADMIN_PASSWORD,
             mechanism: str = "SCRAM-SHA-512") -> ClientSecurity:
        conf = {k.replace(".", "_"): v for k, v in self.ck(listener, user, password, mechanism).items()}
        return ClientSecurity(
            security_protocol=listener, sasl_mechanism=mechanism,
            sasl_username=user if listener.startswith("SASL") else None,
            sasl_password=password if listener.startswith("SASL") else None,
            ssl_cafile=str(self.certs / "ca.pem") if "SSL" in listener else None,
            ssl_certfile=str(conf["ssl_certificate_location"]) if listener == "SSL" else None,
            ssl_keyfile=str(conf["ssl_key_location"]) if listener == "SSL" else None,
        )


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory, broker_process_class: type[Any]) -> Iterator[SecureBroker]:
    b = SecureBroker(tmp_path_factory.mktemp("secure"), broker_process_class)
    b.process.start()
    try:
        yield b
    finally:
        b.process.stop()


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:10]}"


def _ck_roundtrip(conf_p: dict[str, object], conf_c: dict[str, object], topic: str, n: int = 20) -> list[bytes]:
    admin = AdminClient(conf_p)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=20)
    producer = Producer(conf_p)
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**conf_c, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_confluent_sasl_ssl_produce_consume_in_a_group_admin(secure: SecureBroker, mechanism: str) -> None:
    conf = secure.ck("SASL_SSL", mechanism=mechanism)
    topic = _topic()
    got = _ck_roundtrip(conf, conf, topic)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))
    md = AdminClient(conf).list_topics(timeout=10)
    # Metadata advertises the listener the client came through.
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", secure.ports["SASL_SSL"])]


def test_confluent_ssl_with_client_certificate(secure: SecureBroker) -> None:
    conf = secure.ck("SSL")
    got = _ck_roundtrip(conf, conf, _topic())
    assert len(got) == 20
    md = AdminClient(conf).list_topics(timeout=10)
    assert [b.port for b in md.brokers.values()] == [secure.ports["SSL"]]


def test_confluent_ssl_without_client_certificate_is_refused(secure: SecureBroker) -> None:
    conf = {k: v for k, v in secure.ck("SSL").items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=2)


@pytest.mark.parametrize(("user", "password"), [(ADMIN, "wrong"), ("nobody", ADMIN_PASSWORD)])
def test_confluent_bad_credentials_get_authentication_failed(secure: SecureBroker, user: str, password: str) -> None:
    errors: list[str] = []
    conf = secure.ck("SASL_SSL", user=user, password=password, error_cb=lambda e: errors.append(e.str()))
    producer = Producer(conf)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any("invalid credentials" in e for e in errors), errors
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=2)


def test_kafka_python_sasl_ssl_scram_and_ssl_client_cert(secure: SecureBroker) -> None:
    for listener in ("SASL_SSL", "SSL"):
        conf = secure.kp(listener)
        topic = _topic()
        admin = KafkaAdminClient(**conf)
        admin.create_topics([KpNewTopic(topic, num_partitions=2, replication_factor=1)])
        admin.close()
        producer = KafkaProducer(**conf)
        for i in range(10):
            producer.send(topic, f"{listener}-{i}".encode())
        producer.flush(20)
        producer.close()
        consumer = KafkaConsumer(
            topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000, **conf
        )
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 10:
                break
        consumer.commit()
        consumer.close()
        assert sorted(got) == sorted(f"{listener}-{i}".encode() for i in range(10))


def test_kafka_python_wrong_password_is_refused(secure: SecureBroker, caplog: pytest.LogCaptureFixture) -> None:
    # kafka-python retries bootstrapping until its timeout; the refusal it met is in its log.
    with pytest.raises(KpKafkaError):
        KafkaAdminClient(**secure.kp("SASL_SSL", password="wrong"), request_timeout_ms=1500, bootstrap_timeout_ms=1500)
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "invalid credentials" in caplog.text


@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN"), ("SSL", "")])
def test_our_client_produces_and_consumes_over_secured_listeners(
    secure: SecureBroker, listener: str, mechanism: str
) -> None:
    security = secure.ours(listener, mechanism=mechanism or "PLAIN")
    kwargs = {f: getattr(security, f) for f in security.__dataclass_fields__}
    topic = _topic()

    async def run() -> list[bytes]:
        cluster = Cluster(secure.bootstrap(listener), security=security)
        try:
            await Admin(cluster).create_topic(topic, 2)
        finally:
            await cluster.close()
        async with AIOProducer(secure.bootstrap(listener), **kwargs) as producer:
            for i in range(10):
                await (await producer.send(topic, f"m{i}".encode()))
        got: list[bytes] = []
        async with AIOConsumer(
            secure.bootstrap(listener), group_id=f"g-{topic}", auto_offset_reset="earliest", **kwargs
        ) as consumer:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                got.extend(m.value for m in await consumer.getmany(timeout_s=0.5))
            await consumer.commit()
        return got

    assert sorted(asyncio.run(run())) == sorted(f"m{i}".encode() for i in range(10))


def test_our_client_wrong_password_is_authentication_failed(secure: SecureBroker) -> None:
    async def run() -> None:
        cluster = Cluster(secure.bootstrap("SASL_SSL"), security=secure.ours("SASL_SSL", password="nope"))
        try:
            await cluster.any_connection()
        finally:
            await cluster.close()

    with pytest.raises(AuthenticationFailed, match="invalid credentials") as info:
        asyncio.run(run())
    assert info.value.code == 58


def _frame(api_key: int, version: int, body: bytes, client_id: bytes = b"raw") -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    sock.settimeout(5)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_a_request_before_authentication_closes_the_connection(secure: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(_frame(3, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert _read_until_closed(sock) == b""


def test_plain_v0_handshake_then_raw_tokens(secure: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure.ports["SASL_PLAINTEXT"])) as sock:
        sock.settimeout(5)
        sock.sendall(_frame(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        size = struct.unpack(">i", sock.recv(4))[0]
        body = sock.recv(size)
        assert struct.unpack(">ih", body[:6]) == (7, 0)  # correlation id, no error
        token = b"\0" + ADMIN.encode() + b"\0" + ADMIN_PASSWORD.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert sock.recv(4) == b"\0\0\0\0"  # the empty PLAIN answer, raw
        sock.sendall(_frame(3, 1, struct.pack(">i", -1)))  # now Metadata is served
        size = struct.unpack(">i", sock.recv(4))[0]
        assert size > 8


def test_a_failed_authentication_is_answered_then_closed(secure: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure.ports["SASL_PLAINTEXT"])) as sock:
        sock.settimeout(5)
        sock.sendall(_frame(17, 1, struct.pack(">h", 5) + b"PLAIN"))
        size = struct.unpack(">i", sock.recv(4))[0]
        sock.recv(size)
        token = b"\0admin\0wrong"
        sock.sendall(_frame(36, 1, struct.pack(">i", len(token)) + token))
        data = _read_until_closed(sock)
        assert struct.unpack(">ih", data[4:10]) == (7, 58)
        assert b"invalid credentials" in data


def test_plaintext_client_to_a_tls_listener_fails_and_the_broker_goes_on(secure: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure.ports["SASL_SSL"])) as sock:
        sock.sendall(_frame(18, 0, b""))
        data = _read_until_closed(sock)
        assert not data.startswith(b"\0\0\0")  # no Kafka answer, at most a TLS alert
    conf = secure.ck("PLAINTEXT")
    assert AdminClient(conf).list_topics(timeout=10).brokers  # still serving


def test_tls_client_to_the_plaintext_listener_fails(secure: SecureBroker) -> None:
    context = ssl.create_default_context(cafile=str(secure.certs / "ca.pem"))
    with socket.create_connection(("127.0.0.1", secure.process.port)) as raw, pytest.raises((ssl.SSLError, OSError)):
        raw.settimeout(5)
        context.wrap_socket(raw, server_hostname="localhost")


def test_users_added_over_the_wire_survive_kill_9(secure: SecureBroker) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"

    async def add() -> dict[str, dict[str, int]]:
        cluster = Cluster(secure.bootstrap("SASL_SSL"), security=secure.ours("SASL_SSL"))
        try:
            await alter_scram_user(cluster, user, password="pw-" + user, mechanisms=["SCRAM-SHA-512"])
            return await describe_scram_users(cluster)
        finally:
            await cluster.close()

    described = asyncio.run(add())
    assert described[user] == {"SCRAM-SHA-512": 4096}
    assert ADMIN in described
    secure.process.restart()
    conf = secure.ck("SASL_SSL", user=user, password="pw-" + user)
    assert AdminClient(conf).list_topics(timeout=10).brokers
    with pytest.raises(KafkaException):
        AdminClient(secure.ck("SASL_SSL", user=user, password="pw-" + user, mechanism="SCRAM-SHA-256")).list_topics(timeout=5)


def test_kcat_old_librdkafka_over_sasl_ssl_and_ssl(secure: SecureBroker, kcat_bin: str) -> None:
    topic = _topic()

    def kcat(listener: str, *args: str, stdin: str | None = None) -> str:
        settings = [x for k, v in secure.ck(listener).items() if k != "bootstrap.servers"
                    for x in ("-X", f"{k.replace('sasl.mechanism', 'sasl.mechanisms')}={v}")]
        res = subprocess.run([kcat_bin, "-b", secure.bootstrap(listener), *settings, *args],
                             input=stdin, capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout

    kcat("SASL_SSL", "-P", "-t", topic, stdin="one\ntwo\n")
    assert sorted(kcat("SSL", "-C", "-t", topic, "-o", "beginning", "-e", "-q").split()) == ["one", "two"]
    assert f"{secure.ports['SASL_SSL']}" in kcat("SASL_SSL", "-L")


def test_aiokafka_over_sasl_ssl_scram(secure: SecureBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = _topic()

    async def run() -> list[bytes]:
        conf = {
            "bootstrap_servers": secure.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": ADMIN, "sasl_plain_password": ADMIN_PASSWORD,
            "ssl_context": create_ssl_context(cafile=str(secure.certs / "ca.pem")),
        }
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 5 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == [f"a{i}".encode() for i in range(5)]


@pytest.mark.java
def test_java_client_over_sasl_ssl_scram_and_ssl_client_cert(
    secure: SecureBroker, java_driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = secure.certs / "ca.pem"
    keystore = tmp_path / "client-keystore.pem"  # Java's PEM keystore: key and chain in one file
    keystore.write_text((secure.certs / "client-key.pem").read_text() + (secure.certs / "client.pem").read_text())
    settings = {
        "SASL_SSL": [
            "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN}" password="{ADMIN_PASSWORD}";',
            "ssl.truststore.type=PEM", f"ssl.truststore.location={ca}",
        ],
        "SSL": [
            "security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={ca}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}",
        ],
    }
    for listener, lines in settings.items():
        props = tmp_path / f"{listener}.properties"
        props.write_text("\n".join(lines) + "\n")
        monkeypatch.setenv("SLIPSTREAM_DRIVER_CLIENT_PROPERTIES", str(props))
        topic = _topic()
        bootstrap = secure.bootstrap(listener)
        if listener == "SSL":  # admin once; the SASL_SSL topic is auto-created by the produce
            events = java_driver.run(bootstrap, "admin-create", topic, "2")
            assert [e for e in events if e["event"] == "described"], events
        produced = java_driver.run(bootstrap, "produce", topic, "10", "none")
        assert len([e for e in produced if e["event"] == "ack"]) == 10, produced
        if listener == "SSL":
            continue  # a JVM with TLS takes seconds to start: consuming once (SASL_SSL) is enough
        consumed = java_driver.run(bootstrap, "consume", topic, "10", "--from-beginning", "--timeout-ms", "20000")
        assert len([e for e in consumed if e["event"] == "record"]) == 10, consumed
