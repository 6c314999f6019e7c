"""Listeners in-process: parsing, config sources, the advertised endpoint per listener,
the principal a connection carries, and the users/certs commands."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slipstream.broker.broker import Broker
from slipstream.broker.config import build
from slipstream.broker.listeners import Listener, parse_advertised, parse_listeners
from slipstream.cli import main
from slipstream.cli.certs import make_dev_certs
from slipstream.client.cluster import Cluster
from slipstream.client.connection import AuthenticationFailed, ConnectionClosed
from slipstream.client.scram_admin import describe_scram_users
from slipstream.client.security import ClientSecurity

pytestmark = pytest.mark.timeout(60)


def test_default_is_one_plaintext_listener_on_host_and_port() -> None:
    assert parse_listeners("", "", "127.0.0.1", 9092) == [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)]
    config = build(env={})
    assert (config.listeners, config.host, config.port) == ("", "127.0.0.1", 9092)


def test_named_listeners_with_a_protocol_map() -> None:
    found = parse_listeners(
        "INTERNAL://:9094,external://0.0.0.0:9095,SASL_SSL://127.0.0.1:0",
        "INTERNAL:SASL_PLAINTEXT, EXTERNAL:SSL", "127.0.0.1", 9092,
    )
    assert found == [
        Listener("INTERNAL", "SASL_PLAINTEXT", "127.0.0.1", 9094),
        Listener("EXTERNAL", "SSL", "0.0.0.0", 9095),
        Listener("SASL_SSL", "SASL_SSL", "127.0.0.1", 0),
    ]
    assert parse_advertised("EXTERNAL://broker.example.com:19095", found) == {"EXTERNAL": ("broker.example.com", 19095)}


@pytest.mark.parametrize(
    ("listeners", "protocol_map", "message"),
    [
        ("CLIENT://:9093", "", "no security protocol for listener 'CLIENT'"),
        ("PLAINTEXT://:9093,PLAINTEXT://:9094", "", "used twice"),
        ("PLAINTEXT://:9093,SSL://:9093", "", "port 9093 is used by two"),
        ("PLAINTEXT:9093", "", "NAME://host:port"),
        ("PLAINTEXT://host", "", "needs a port"),
        ("A://:1", "A:TLS", "'TLS' is not one of"),
    ],
)
def test_bad_listener_settings_are_refused_with_a_clear_message(listeners: str, protocol_map: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_listeners(listeners, protocol_map, "127.0.0.1", 9092)


def test_settings_come_from_file_env_and_flags(tmp_path: Path) -> None:
    conf = tmp_path / "broker.properties"
    conf.write_text("listeners=PLAINTEXT://:9092,SASL_PLAINTEXT://:9093\nsasl.enabled.mechanisms=SCRAM-SHA-512\n")
    config = build(
        str(conf),
        env={"SLIPSTREAM_ADVERTISED_LISTENERS": "SASL_PLAINTEXT://kafka.local:9093"},
        flags={"scram.bootstrap.users": "alice:pw"},
    )
    assert config.listeners == "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"
    assert config.sasl_mechanisms() == ("SCRAM-SHA-512",)
    assert config.advertised_listeners == "SASL_PLAINTEXT://kafka.local:9093"
    assert config.scram_bootstrap_users == "alice:pw"
    with pytest.raises(ValueError, match=r"needs ssl\.certfile"):
        build(env={"SLIPSTREAM_LISTENERS": "SSL://:9093"})
    with pytest.raises(ValueError, match="unsupported GSSAPI"):
        build(env={"SLIPSTREAM_SASL_ENABLED_MECHANISMS": "GSSAPI"})
    with pytest.raises(ValueError, match=r"ssl\.client\.auth"):
        build(flags={"ssl.client.auth": "maybe"})


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("certs")
    make_dev_certs(directory, clients=["client"])
    return directory


@pytest.fixture
async def broker(certs: Path, tmp_path: Path) -> AsyncIterator[Broker]:
    async with Broker(
        storage="disk", data_dir=str(tmp_path / "data"), port=0,
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        advertised_listeners="SASL_PLAINTEXT://localhost:0",
        ssl_certfile=str(certs / "broker.pem"), ssl_keyfile=str(certs / "broker-key.pem"),
        ssl_cafile=str(certs / "ca.pem"), ssl_client_auth="required",
        scram_bootstrap_users="alice:alice-pw",
    ) as b:
        yield b


async def _metadata_broker(bootstrap: str, security: ClientSecurity) -> tuple[str, int]:
    cluster = Cluster(bootstrap, security=security)
    try:
        await cluster.refresh_metadata()
        (node,) = cluster.brokers.values()
        return node.host, node.port
    finally:
        await cluster.close()


async def test_each_listener_advertises_itself_and_carries_its_principal(broker: Broker, certs: Path) -> None:
    plain = ClientSecurity()
    tls = ClientSecurity("SSL", ssl_cafile=str(certs / "ca.pem"), ssl_certfile=str(certs / "client.pem"),
                         ssl_keyfile=str(certs / "client-key.pem"))
    sasl = ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-pw")
    assert broker.bootstrap_servers == f"127.0.0.1:{broker.ports['PLAINTEXT']}"
    assert await _metadata_broker(broker.bootstrap_for("PLAINTEXT"), plain) == ("127.0.0.1", broker.ports["PLAINTEXT"])
    # The certificate's host names include localhost: connect as the client would.
    assert await _metadata_broker(f"localhost:{broker.ports['SSL']}", tls) == ("127.0.0.1", broker.ports["SSL"])
    assert await _metadata_broker(broker.bootstrap_for("SASL_PLAINTEXT"), sasl) == ("localhost", broker.ports["SASL_PLAINTEXT"])

    seen: dict[str, str] = {}
    conns = []
    for bootstrap, security in ((broker.bootstrap_for("PLAINTEXT"), plain),
                                (f"localhost:{broker.ports['SSL']}", tls),
                                (broker.bootstrap_for("SASL_PLAINTEXT"), sasl)):
        cluster = Cluster(bootstrap, security=security)
        await cluster.any_connection()
        conns.append(cluster)
    await asyncio.sleep(0.05)
    for conn in broker._connections:
        assert conn.session is not None
        seen[conn.session.listener.name] = conn.session.principal
    for cluster in conns:
        await cluster.close()
    assert seen == {
        "PLAINTEXT": "User:ANONYMOUS",
        "SSL": "User:CN=client,O=Slipstream Dev",
        "SASL_PLAINTEXT": "User:alice",
    }


async def test_users_command_online_and_offline(broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = broker.bootstrap_for("PLAINTEXT")
    # The CLI runs its own event loop: run it in a thread beside the broker's.
    code = await asyncio.to_thread(main, ["users", "add", "bob", "--password", "bob-pw", "-b", bootstrap])
    assert code == 0
    assert await asyncio.to_thread(main, ["users", "list", "-b", bootstrap]) == 0
    listing = capsys.readouterr().out
    assert "alice" in listing and "bob" in listing and "SCRAM-SHA-512 (iterations=4096)" in listing
    bob = ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-pw")
    assert (await _metadata_broker(broker.bootstrap_for("SASL_PLAINTEXT"), bob))[0] == "localhost"
    assert await asyncio.to_thread(
        main, ["users", "delete", "bob", "--mechanism", "SCRAM-SHA-512", "-b", bootstrap]
    ) == 0
    with pytest.raises(AuthenticationFailed):
        await _metadata_broker(broker.bootstrap_for("SASL_PLAINTEXT"), bob)
    cluster = Cluster(bootstrap)
    try:
        assert (await describe_scram_users(cluster))["bob"] == {"SCRAM-SHA-256": 4096}
    finally:
        await cluster.close()

    offline = tmp_path / "offline"
    assert main(["users", "add", "carol", "--password", "c", "--data-dir", str(offline)]) == 0
    assert main(["users", "list", "--data-dir", str(offline)]) == 0
    assert "carol" in capsys.readouterr().out
    assert b'"c"' not in (offline / "scram-credentials.json").read_bytes()
    assert main(["users", "delete", "nobody", "--data-dir", str(offline)]) == 1


def test_certs_command_writes_a_ca_and_certificates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", str(tmp_path), "--host", "kafka.local", "--client", "app1", "--client", "app2"]) == 0
    names = {Path(line).name for line in capsys.readouterr().out.split()}
    assert names == {"ca.pem", "ca-key.pem", "broker.pem", "broker-key.pem", "app1.pem", "app1-key.pem",
                     "app2.pem", "app2-key.pem"}
    assert (tmp_path / "app1-key.pem").stat().st_mode & 0o077 == 0


def test_serve_takes_listeners_as_flags() -> None:
    from slipstream.cli import build_parser

    args = build_parser(serve_only=True).parse_args(
        ["serve", "--listeners", "PLAINTEXT://:9092,SASL_SSL://:9093", "--advertised-listeners", "SASL_SSL://kafka:9093"]
    )
    assert (args.listeners, args.advertised_listeners) == ("PLAINTEXT://:9092,SASL_SSL://:9093", "SASL_SSL://kafka:9093")


def test_per_listener_security_overrides_the_broker_wide_settings() -> None:
    config = build(flags={
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener_security_protocol_map": "INTERNAL:SSL,EXTERNAL:SASL_SSL,SECURE:SASL_SSL",
        "ssl_certfile": "/certs/broker.pem", "ssl_cafile": "/certs/ca.pem", "ssl_client_auth": "required",
        "sasl_enabled_mechanisms": "SCRAM-SHA-512",
        "listener.name.external.ssl.certfile": "/certs/public.pem",
        "listener.name.external.ssl.keyfile": "/certs/public-key.pem",
        "listener.name.external.sasl.enabled.mechanisms": "plain,scram-sha-256",
        "listener.name.external.connections.max.reauth.ms": "60000",
        "listener.name.secure.ssl.client.auth": "requested",
    })
    internal, external, secure = parse_listeners(
        config.listeners, config.listener_security_protocol_map, config.host, config.port
    )
    own = config.listener_security(internal)
    assert (own.certfile, own.cafile, own.client_auth, own.mechanisms, own.max_reauth_ms) == (
        "/certs/broker.pem", "/certs/ca.pem", "required", ("SCRAM-SHA-512",), 0
    )
    own = config.listener_security(external)
    # KIP-684: the broker-wide ssl.client.auth does not apply to SASL_SSL listeners ...
    assert (own.certfile, own.keyfile, own.cafile, own.client_auth, own.mechanisms, own.max_reauth_ms) == (
        "/certs/public.pem", "/certs/public-key.pem", "/certs/ca.pem", "none", ("PLAIN", "SCRAM-SHA-256"), 60000
    )
    # ... unless set for that listener by name.
    assert config.listener_security(secure).client_auth == "requested"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listener.name.nope.ssl.certfile": "/x.pem"}, "'NOPE' is not a listener"),
        ({"listener.name.plaintext.log.dirs": "/x"}, "'log.dirs' cannot be set per listener"),
        ({"listener.name.ssl": "x"}, "expected listener.name.<listener>.<setting>"),
        ({"listeners": "SSL://127.0.0.1:0", "listener.name.ssl.ssl.keyfile": "/k.pem"},
         "listener SSL (SSL) needs ssl.certfile (or listener.name.ssl.ssl.certfile)"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI"},
         "sasl.enabled.mechanisms of listener SASL_PLAINTEXT: unsupported GSSAPI"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.certfile": "/c.pem", "listener.name.ssl.ssl.client.auth": "maybe"},
         "ssl.client.auth of listener SSL must be one of"),
    ],
)
def test_bad_per_listener_settings_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build(flags=settings)


async def test_two_tls_listeners_with_their_own_certificates_and_client_auth(tmp_path: Path) -> None:
    """Each listener presents its own certificate (from its own CA) and asks for a client
    certificate or not, as its listener.name.* settings say."""
    internal_ca, external_ca = tmp_path / "internal", tmp_path / "external"
    make_dev_certs(internal_ca, clients=["service"])
    make_dev_certs(external_ca)
    async with Broker(
        storage="memory", port=0, listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        listener_security_protocol_map="INTERNAL:SSL,EXTERNAL:SSL",
        ssl_certfile=str(internal_ca / "broker.pem"), ssl_keyfile=str(internal_ca / "broker-key.pem"),
        ssl_cafile=str(internal_ca / "ca.pem"), ssl_client_auth="required",
        listener_overrides={"EXTERNAL": {
            "ssl_certfile": str(external_ca / "broker.pem"), "ssl_keyfile": str(external_ca / "broker-key.pem"),
            "ssl_client_auth": "none",
        }},
    ) as broker:
        internal = ClientSecurity(
            security_protocol="SSL", ssl_cafile=str(internal_ca / "ca.pem"),
            ssl_certfile=str(internal_ca / "service.pem"), ssl_keyfile=str(internal_ca / "service-key.pem"),
        )
        external = ClientSecurity(security_protocol="SSL", ssl_cafile=str(external_ca / "ca.pem"))
        assert await _metadata_broker(broker.bootstrap_for("INTERNAL"), internal)
        assert await _metadata_broker(broker.bootstrap_for("EXTERNAL"), external)
        # The external listener's certificate is not trusted by the internal CA, and vice versa.
        wrong_ca = ClientSecurity(security_protocol="SSL", ssl_cafile=str(internal_ca / "ca.pem"))
        with pytest.raises(ConnectionClosed, match="CERTIFICATE_VERIFY_FAILED"):
            await _metadata_broker(broker.bootstrap_for("EXTERNAL"), wrong_ca)
