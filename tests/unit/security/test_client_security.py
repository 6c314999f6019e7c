"""The client's security settings: names (ours, Kafka's, librdkafka's, Spark's kafka.
options with a JAAS line), validation, and that they travel to Spark executors."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from slipstream.cli.certs import make_dev_certs
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.security import ClientSecurity
from slipstream.spark.options import OptionError, parse_source_options, security_of


def test_kafka_names_and_ours_give_the_same_settings() -> None:
    ours = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "alice", "pw", ssl_cafile="/ca.pem")
    kafka = ClientSecurity.from_config({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "scram-sha-512", "sasl.username": "alice",
        "sasl.password": "pw", "ssl.truststore.location": "/ca.pem", "bootstrap.servers": "ignored:1",
    })
    librdkafka = ClientSecurity.from_config({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "pw", "ssl.ca.location": "/ca.pem",
    })
    assert ours == kafka == librdkafka
    assert "pw" not in repr(ours)
    assert not ClientSecurity.from_config({"ssl.endpoint.identification.algorithm": ""}).ssl_check_hostname


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"security_protocol": "TLS"}, "security_protocol must be one of"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI", "sasl_username": "a", "sasl_password": "b"},
         "sasl_mechanism must be one of"),
        ({"security_protocol": "SASL_SSL"}, "needs sasl_username and sasl_password"),
    ],
)
def test_bad_settings_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClientSecurity(**settings)
    with pytest.raises(ValueError, match=message):
        ConsumerConfig(**settings).validate()


def test_spark_kafka_options_with_a_jaas_line() -> None:
    options = {
        "kafka.bootstrap.servers": "h:9093", "subscribe": "t",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="spark" password="p\\"w";',
        "kafka.ssl.truststore.location": "/certs/ca.pem",
    }
    security = parse_source_options(options, streaming=False).security
    assert security == ClientSecurity("SASL_SSL", "SCRAM-SHA-256", "spark", 'p"w', ssl_cafile="/certs/ca.pem")
    assert security_of({"kafka.bootstrap.servers": "h:1"}) == ClientSecurity()
    with pytest.raises(OptionError, match="needs sasl_username"):
        security_of({"kafka.security.protocol": "SASL_PLAINTEXT"})


def test_settings_pickle_after_their_tls_context_was_made(tmp_path: Path) -> None:
    make_dev_certs(tmp_path)
    security = ClientSecurity("SSL", ssl_cafile=str(tmp_path / "ca.pem"), ssl_certfile=str(tmp_path / "client.pem"),
                              ssl_keyfile=str(tmp_path / "client-key.pem"))
    context = security.ssl_context()
    assert context is not None and context is security.ssl_context()
    copy = pickle.loads(pickle.dumps(security))
    assert copy == security
    assert ClientSecurity().ssl_context() is None
