"""KIP-368 re-authentication (connections.max.reauth.ms): the session's rules on a manual
clock, then the broker and Slipstream's client over a real connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from slipstream.broker.broker import Broker
from slipstream.broker.listeners import Listener
from slipstream.broker.security.credentials import CredentialStore
from slipstream.broker.security.session import ConnectionSession, IllegalSaslState, SaslFailure
from slipstream.client.cluster import Cluster
from slipstream.client.connection import BrokerConnection, ConnectionClosed
from slipstream.client.security import ClientSecurity
from slipstream.protocol.apis.metadata import SPEC as METADATA
from slipstream.protocol.apis.metadata import MetadataRequest
from slipstream.protocol.scram import SCRAM_SHA_256, ScramClient, plain_token

SASL = Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 0)
PRODUCE, METADATA_KEY, SASL_AUTHENTICATE = 0, 3, 36


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _store() -> CredentialStore:
    store = CredentialStore(None)
    store.bootstrap("alice:alice-pw,bob:bob-pw", ["SCRAM-SHA-256"])
    return store


def _session(clock: Clock, max_reauth_ms: int = 10_000) -> ConnectionSession:
    return ConnectionSession(
        SASL, _store(), ("SCRAM-SHA-256", "PLAIN"), max_reauth_ms=max_reauth_ms, clock=clock
    )


def _scram(session: ConnectionSession, user: str = "alice", password: str = "alice-pw") -> None:
    client = ScramClient(SCRAM_SHA_256, user, password)
    client.verify(session.authenticate(client.final(session.authenticate(client.first()))))


def _login(session: ConnectionSession, user: str = "alice", password: str = "alice-pw") -> None:
    assert session.handshake("SCRAM-SHA-256", 1)
    _scram(session, user, password)


def test_a_session_lives_for_max_reauth_ms_and_then_expires() -> None:
    clock = Clock()
    session = _session(clock)
    _login(session)
    assert session.exchange_complete and session.principal == "User:alice"
    assert session.session_lifetime_ms() == 10_000
    clock.ms += 9_999
    assert not session.expired()
    clock.ms += 1
    assert session.expired()


def test_without_max_reauth_ms_a_session_never_expires_and_cannot_reauthenticate() -> None:
    clock = Clock()
    session = _session(clock, max_reauth_ms=0)
    _login(session)
    assert session.session_lifetime_ms() == 0
    clock.ms += 10**9
    assert not session.expired()
    with pytest.raises(IllegalSaslState):
        session.handshake("SCRAM-SHA-256", 1)


def test_reauthentication_renews_the_lifetime_even_after_expiry() -> None:
    clock = Clock()
    session = _session(clock)
    _login(session)
    clock.ms += 12_000
    assert session.expired()
    assert session.handshake("SCRAM-SHA-256", 1)
    # While it re-authenticates the session only takes the exchange's own requests.
    assert not session.expired()
    assert session.admits(SASL_AUTHENTICATE) and not session.admits(METADATA_KEY)
    _scram(session)
    assert session.exchange_complete and session.reauthentications == 1
    assert not session.expired() and session.admits(PRODUCE)
    clock.ms += 10_000
    assert session.expired()


def test_reauthentication_as_another_principal_fails() -> None:
    clock = Clock()
    session = _session(clock)
    _login(session)
    clock.ms += 5_000
    assert session.handshake("SCRAM-SHA-256", 1)
    with pytest.raises(SaslFailure, match="Cannot change principals during re-authentication from User:alice"):
        _scram(session, "bob", "bob-pw")


def test_reauthentication_with_another_mechanism_fails_at_authenticate() -> None:
    clock = Clock()
    session = _session(clock)
    _login(session)
    clock.ms += 5_000
    assert session.handshake("PLAIN", 1)  # answered OK, as Kafka does ...
    with pytest.raises(SaslFailure, match="'PLAIN' requested by client is not supported for re-authentication"):
        session.authenticate(plain_token("alice", "alice-pw"))  # ... and refused here


def test_reauthentication_is_refused_within_a_second_and_over_v0() -> None:
    clock = Clock()
    session = _session(clock)
    _login(session)
    clock.ms += 5_000
    assert session.handshake("SCRAM-SHA-256", 1)
    _scram(session)
    clock.ms += 999
    with pytest.raises(IllegalSaslState, match="less than a second"):
        session.handshake("SCRAM-SHA-256", 1)
    clock.ms += 1
    with pytest.raises(IllegalSaslState):
        session.handshake("SCRAM-SHA-256", 0)  # raw tokens cannot follow an authenticated session
    assert session.handshake("SCRAM-SHA-256", 1)


# ------------------------------------------------------------------ over a connection


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with Broker(
        storage="memory", port=0, listeners="SASL_PLAINTEXT://127.0.0.1:0",
        scram_bootstrap_users="alice:alice-pw", connections_max_reauth_ms=60_000,
    ) as b:
        assert b.state is not None
        b.state.clock = Clock()
        yield b


def _security() -> ClientSecurity:
    return ClientSecurity(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice", sasl_password="alice-pw",
    )


async def test_our_client_reauthenticates_before_the_session_ends(broker: Broker) -> None:
    clock = broker.state.clock  # type: ignore[union-attr]
    assert isinstance(clock, Clock)
    conn = await BrokerConnection("127.0.0.1", broker.port, security=_security()).connect()
    try:
        assert conn._reauthenticate_at is not None  # told the lifetime by SaslAuthenticate v1+
        await conn.request(METADATA, MetadataRequest(topics=[]))
        # The broker's session ends; the client's own deadline (85-95% of it) has passed too.
        clock.ms += 60_000
        conn._reauthenticate_at = 0.0
        response = await conn.request(METADATA, MetadataRequest(topics=[]))
        assert response.brokers and conn.reauthentications == 1 and not conn.closed
    finally:
        await conn.close()


async def test_broker_closes_a_connection_whose_session_ended(broker: Broker) -> None:
    clock = broker.state.clock  # type: ignore[union-attr]
    assert isinstance(clock, Clock)
    conn = await BrokerConnection("127.0.0.1", broker.port, security=_security()).connect()
    try:
        conn._reauthenticate_at = None  # a client that does not re-authenticate
        await conn.request(METADATA, MetadataRequest(topics=[]))
        clock.ms += 60_000
        with pytest.raises(ConnectionClosed):
            await conn.request(METADATA, MetadataRequest(topics=[]))
    finally:
        await conn.close()
    # A new connection authenticates afresh and is served.
    cluster = Cluster(f"127.0.0.1:{broker.port}", security=_security())
    try:
        await cluster.refresh_metadata()
        assert cluster.brokers
    finally:
        await cluster.close()
