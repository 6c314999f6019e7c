"""Inter-broker settings: which listener peers are reached on, how this broker connects
there (TLS, SASL credentials), what start-up refuses, and PeerConnections' choice of
endpoint; then a real connection to a SASL broker with ACLs."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import cast

import pytest

from slipstream.broker.broker import Broker
from slipstream.broker.cluster.assignment import BrokerRow, ListenerEndpoint
from slipstream.broker.cluster.view import ClusterView
from slipstream.broker.config import BrokerConfig, build
from slipstream.broker.inter_broker import InterBrokerClient, jaas_credentials
from slipstream.broker.peer_connections import PeerConnections, PeerUnavailable
from slipstream.broker.state import BrokerState
from slipstream.broker.txn_markers import TxnMarker, write_markers_at_peer
from slipstream.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

POSTGRES = {"storage": "postgres", "database.url": "postgresql://localhost/x"}
TWO_LISTENERS = {
    "listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
    "listener.security.protocol.map": "EXTERNAL:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
}
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3cret";'


def test_by_default_peers_are_reached_on_the_first_listener_without_credentials() -> None:
    client = build(env={}, flags=POSTGRES).inter_broker_client()
    assert client == InterBrokerClient(listener="PLAINTEXT", security_protocol="PLAINTEXT")
    assert client.client_security().security_protocol == "PLAINTEXT"


def test_inter_broker_listener_name_picks_a_listener() -> None:
    config = build(env={}, flags={**POSTGRES, **TWO_LISTENERS, "inter.broker.listener.name": "internal"})
    assert config.inter_broker_client() == InterBrokerClient(listener="INTERNAL", security_protocol="PLAINTEXT")


def test_an_unknown_inter_broker_listener_is_refused_even_without_a_cluster() -> None:
    with pytest.raises(ValueError, match=re.escape("inter.broker.listener.name: 'REPLICATION' is not a listener (EXTERNAL, INTERNAL)")):
        build(env={}, flags={**TWO_LISTENERS, "inter.broker.listener.name": "REPLICATION"})


def test_a_sasl_inter_broker_listener_without_credentials_is_refused_in_a_cluster() -> None:
    with pytest.raises(ValueError, match=re.escape("set inter.broker.sasl.username and inter.broker.sasl.password")) as refused:
        build(env={}, flags={**POSTGRES, **TWO_LISTENERS})
    assert "listener.name.external.scram-sha-256.sasl.jaas.config" in str(refused.value)
    # A broker alone never connects to peers: it needs none.
    assert build(env={}, flags=TWO_LISTENERS).storage == "disk"


def test_credentials_of_our_settings_with_the_first_enabled_mechanism() -> None:
    config = build(env={}, flags={
        **POSTGRES, **TWO_LISTENERS, "inter.broker.sasl.username": "broker", "inter.broker.sasl.password": "pw",
    })  # fmt: skip
    client = config.inter_broker_client()
    assert (client.listener, client.security_protocol, client.sasl_mechanism) == ("EXTERNAL", "SASL_PLAINTEXT", "SCRAM-SHA-256")
    security = client.client_security()
    assert (security.sasl_mechanism, security.sasl_username, security.sasl_password) == ("SCRAM-SHA-256", "broker", "pw")
    assert "pw" not in repr(client) and "pw" not in repr(config)


def test_credentials_of_kafkas_jaas_config_for_the_chosen_mechanism() -> None:
    config = build(env={}, flags={
        **POSTGRES, **TWO_LISTENERS,
        "sasl.mechanism.inter.broker.protocol": "scram-sha-512",
        "listener.name.external.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    })  # fmt: skip
    client = config.inter_broker_client()
    assert (client.sasl_mechanism, client.sasl_username, client.sasl_password) == ("SCRAM-SHA-512", "broker", "s3cret")
    # The JAAS config of another mechanism than the chosen one gives no credentials.
    with pytest.raises(ValueError, match="peers need credentials"):
        build(env={}, flags={
            **POSTGRES, **TWO_LISTENERS, "listener.name.external.plain.sasl.jaas.config": SCRAM_JAAS,
        })  # fmt: skip


def test_the_inter_broker_mechanism_must_be_enabled_on_the_listener() -> None:
    with pytest.raises(ValueError, match=re.escape("sasl.mechanism.inter.broker.protocol 'PLAIN' is not enabled on the inter-broker listener EXTERNAL (SCRAM-SHA-512)")):
        build(env={}, flags={
            **POSTGRES, **TWO_LISTENERS, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "inter.broker.sasl.username": "broker", "inter.broker.sasl.password": "pw",
        })  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "sasl.mechanism.inter.broker.protocol must be one of"),
        ({"listener.name.plaintext.gssapi.sasl.jaas.config": "x"}, "unsupported mechanism GSSAPI"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "ssl.endpoint.identification.algorithm must be https"),
    ],
)
def test_bad_inter_broker_settings_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build(env={}, flags=settings)


def test_a_tls_inter_broker_listener_uses_that_listeners_truststore_and_certificate() -> None:
    config = build(env={}, flags={
        **POSTGRES,
        "listeners": "SSL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.certfile": "/certs/public.pem", "ssl.cafile": "/certs/public-ca.pem",
        "listener.name.internal.ssl.certfile": "/certs/internal.pem",
        "listener.name.internal.ssl.keyfile": "/certs/internal-key.pem",
        "listener.name.internal.ssl.cafile": "/certs/internal-ca.pem",
        "listener.name.internal.plain.sasl.jaas.config": 'PlainLoginModule required username="b" password="p";',
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "ssl.endpoint.identification.algorithm": "",
    })  # fmt: skip
    assert config.inter_broker_client() == InterBrokerClient(
        listener="INTERNAL", security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="b",
        sasl_password="p", ssl_cafile="/certs/internal-ca.pem", ssl_certfile="/certs/internal.pem",
        ssl_keyfile="/certs/internal-key.pem", ssl_check_hostname=False,
    )  # fmt: skip


def test_jaas_options_quoted_escaped_and_bare() -> None:
    assert jaas_credentials(SCRAM_JAAS) == ("broker", "s3cret")
    assert jaas_credentials(r'M required password="a \"b\" c;" username=bare;') == ("bare", 'a "b" c;')
    assert jaas_credentials('M required username="" user_admin="x";') == ("", None)


def peers_of(config: BrokerConfig, *rows: BrokerRow) -> PeerConnections:
    view = ClusterView(node_id=1, live=list(rows))
    return PeerConnections(cast(BrokerState, SimpleNamespace(config=config, cluster=view)))


def test_a_peer_is_reached_at_its_endpoint_for_the_inter_broker_listener() -> None:
    config = build(env={}, flags={**TWO_LISTENERS, "inter.broker.listener.name": "INTERNAL"})
    peers = peers_of(
        config,
        BrokerRow(2, "public-2", 9092, 0, (ListenerEndpoint("EXTERNAL", "public-2", 9092), ListenerEndpoint("INTERNAL", "10.0.0.2", 9093))),
        BrokerRow(3, "public-3", 9092, 0, (ListenerEndpoint("EXTERNAL", "public-3", 9092),)),
        BrokerRow(4, "old-4", 9000, 0),  # registered before listeners were: one endpoint for all
    )  # fmt: skip
    assert peers._address(2) == ("10.0.0.2", 9093)
    assert peers._address(4) == ("old-4", 9000)
    with pytest.raises(PeerUnavailable, match="broker 3 has no INTERNAL listener"):
        peers._address(3)
    with pytest.raises(PeerUnavailable, match="broker 5 is not live"):
        peers._address(5)


async def test_markers_go_to_a_sasl_peer_with_credentials_and_need_cluster_action() -> None:
    """A real SASL_PLAINTEXT broker with ACLs: the inter-broker user (a super user) may
    write markers (the topic is unknown: UNKNOWN_TOPIC_OR_PARTITION, past authorization);
    another user is refused CLUSTER_AUTHORIZATION_FAILED, as in Kafka."""
    marker = TxnMarker(producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0, partitions=(("nowhere", 0),))
    async with Broker(
        storage="memory", port=0, listeners="SASL_PLAINTEXT://127.0.0.1:0", authorizer="acl",
        super_users="User:broker", scram_bootstrap_users="broker:pw,alice:pw",
    ) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        peer = BrokerRow(2, host, int(port), 0, (ListenerEndpoint("SASL_PLAINTEXT", host, int(port)),))
        answers = {}
        for user in ("broker", "alice"):
            config = build(env={}, flags={
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f'M required username="{user}" password="pw";',
            })  # fmt: skip
            peers = peers_of(config, peer)
            try:
                answers[user] = await write_markers_at_peer(peers, 2, marker)
            finally:
                await peers.close()
    assert answers == {
        "broker": {("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
        "alice": {("nowhere", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED},
    }


async def test_wrong_inter_broker_credentials_fail_the_connection() -> None:
    from slipstream.client.connection import AuthenticationFailed

    async with Broker(
        storage="memory", port=0, listeners="SASL_PLAINTEXT://127.0.0.1:0", scram_bootstrap_users="broker:pw",
    ) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        config = build(env={}, flags={
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "inter.broker.sasl.username": "broker",
            "inter.broker.sasl.password": "wrong",
        })  # fmt: skip
        peers = peers_of(config, BrokerRow(2, host, int(port), 0))
        try:
            with pytest.raises(AuthenticationFailed):
                await peers.connection(2)
        finally:
            await peers.close()
