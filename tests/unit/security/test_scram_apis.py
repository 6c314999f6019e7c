"""DescribeUserScramCredentials / AlterUserScramCredentials error cases, and the SASL
handlers' answers in states a well-behaved client never reaches."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from slipstream.broker.broker import Broker
from slipstream.client.connection import BrokerConnection
from slipstream.protocol.apis.alter_user_scram_credentials import SPEC as ALTER
from slipstream.protocol.apis.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from slipstream.protocol.apis.describe_user_scram_credentials import SPEC as DESCRIBE
from slipstream.protocol.apis.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequestUser,
)
from slipstream.protocol.apis.sasl_authenticate import SPEC as SASL_AUTHENTICATE
from slipstream.protocol.apis.sasl_authenticate import SaslAuthenticateRequest
from slipstream.protocol.apis.sasl_handshake import SPEC as SASL_HANDSHAKE
from slipstream.protocol.apis.sasl_handshake import SaslHandshakeRequest
from slipstream.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def conns() -> AsyncIterator[tuple[BrokerConnection, BrokerConnection]]:
    async with Broker(
        storage="memory", port=0, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        scram_bootstrap_users="alice:pw",
    ) as broker:
        plain = await BrokerConnection("127.0.0.1", broker.ports["PLAINTEXT"]).connect()
        sasl = await BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"]).connect()
        try:
            yield plain, sasl
        finally:
            await plain.close()
            await sasl.close()


def upsert(name: str, mechanism: int = 2, iterations: int = 4096, salt: bytes = b"s" * 16) -> ScramCredentialUpsertion:
    salted = SCRAM_SHA_512.salted_password("pw", salt, iterations) if salt else b""
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                    salted_password=salted)


async def test_alter_errors_per_user_and_all_or_nothing(conns: tuple[BrokerConnection, BrokerConnection]) -> None:
    plain, _ = conns
    response = await plain.request(ALTER, AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="ghost", mechanism=1), ScramCredentialDeletion(name="dup", mechanism=2)],
        upsertions=[
            upsert("bob"), upsert("few", iterations=100), upsert("many", iterations=20000), upsert("odd", mechanism=7),
            upsert(""), upsert("nosalt", salt=b""), upsert("dup"),
            ScramCredentialUpsertion(name="carol", mechanism=1, iterations=4096, salt=b"x" * 8,
                                     salted_password=SCRAM_SHA_256.salted_password("c", b"x" * 8, 4096)),
            upsert("carol", iterations=50),  # one bad alteration: none of carol's apply
        ],
    ))
    codes = {r.user: (r.error_code, r.error_message) for r in response.results}
    assert [r.user for r in response.results] == ["ghost", "dup", "bob", "few", "many", "odd", "", "nosalt", "carol"]
    assert codes["bob"] == (0, None)
    assert codes["ghost"][0] == 91 and "does not exist" in codes["ghost"][1]
    assert codes["dup"][0] == 92
    assert codes["few"][0] == 93 and "Too few iterations" in codes["few"][1]
    assert codes["many"][0] == 93 and "Too many iterations" in codes["many"][1]
    assert codes["odd"][0] == 33
    assert codes[""][0] == 93
    assert codes["nosalt"][0] == 93
    assert codes["carol"][0] == 93
    described = await plain.request(DESCRIBE, DescribeUserScramCredentialsRequest(users=None))
    assert {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in described.results} == {
        "alice": [(1, 4096), (2, 4096)], "bob": [(2, 4096)],
    }


async def test_describe_unknown_and_duplicate_users(conns: tuple[BrokerConnection, BrokerConnection]) -> None:
    plain, _ = conns
    names = ["alice", "nobody", "alice"]
    response = await plain.request(DESCRIBE, DescribeUserScramCredentialsRequest(
        users=[DescribeUserScramCredentialsRequestUser(name=n) for n in names]
    ))
    assert [(r.user, r.error_code) for r in response.results] == [("alice", 92), ("nobody", 91)]


async def test_sasl_requests_in_the_wrong_state(conns: tuple[BrokerConnection, BrokerConnection]) -> None:
    plain, sasl = conns
    # No SASL on the PLAINTEXT listener: a clear refusal, not a dropped connection.
    refused = await plain.request(SASL_HANDSHAKE, SaslHandshakeRequest(mechanism="PLAIN"), version=1)
    assert (refused.error_code, refused.mechanisms) == (33, [])
    illegal = await plain.request(SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=b"x"), version=2)
    assert illegal.error_code == 34
    # SaslAuthenticate before a handshake, an unknown mechanism, then a second handshake.
    early = await sasl.request(SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=b"x"), version=2)
    assert early.error_code == 34
    unknown = await sasl.request(SASL_HANDSHAKE, SaslHandshakeRequest(mechanism="GSSAPI"), version=1)
    assert (unknown.error_code, sorted(unknown.mechanisms)) == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    ok = await sasl.request(SASL_HANDSHAKE, SaslHandshakeRequest(mechanism="PLAIN"), version=1)
    assert ok.error_code == 0
    again = await sasl.request(SASL_HANDSHAKE, SaslHandshakeRequest(mechanism="PLAIN"), version=1)
    assert again.error_code == 34
    done = await sasl.request(SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), version=2)
    assert (done.error_code, done.session_lifetime_ms) == (0, 0)
    after = await sasl.request(SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"), version=2)
    assert after.error_code == 34
