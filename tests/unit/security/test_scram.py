"""The SCRAM and PLAIN exchanges as state machines: RFC 5802/7677 vectors, then failures."""

from __future__ import annotations

import pytest

from slipstream.broker.security.credentials import CredentialStore, ScramCredential
from slipstream.broker.security.sasl import PlainServer, SaslFailure, ScramServer
from slipstream.protocol.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramError,
    ScramMechanism,
    escape_name,
    plain_token,
    unb64,
    unescape_name,
)

SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", 0, "sha1")  # only to replay RFC 5802's example


def _store_with(mechanism: ScramMechanism, user: str, password: str, salt: bytes, iterations: int) -> CredentialStore:
    store = CredentialStore(None)
    salted = mechanism.salted_password(password, salt, iterations)
    store.put(user, mechanism.name, ScramCredential.from_salted_password(mechanism, salt, salted, iterations))
    return store


@pytest.mark.parametrize(
    ("mechanism", "client_nonce", "server_nonce", "salt", "proof", "verifier"),
    [
        # RFC 5802 section 5
        (SCRAM_SHA_1, "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j", "QSXCR+Q6sek8bf92",
         "v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=", "rmF9pqV8S7suAoZWja4dJRkFsKQ="),
        # RFC 7677 section 3
        (SCRAM_SHA_256, "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "W22ZaJ0SNY7soEsUEjb6gQ==",
         "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
    ],
)
def test_rfc_vectors_client_and_server(
    mechanism: ScramMechanism, client_nonce: str, server_nonce: str, salt: str, proof: str, verifier: str
) -> None:
    client = ScramClient(mechanism, "user", "pencil", nonce=client_nonce)
    store = _store_with(mechanism, "user", "pencil", unb64(salt), 4096)
    server = ScramServer(mechanism, store, nonce=lambda: server_nonce)
    first = client.first()
    assert first == f"n,,n=user,r={client_nonce}".encode()
    server_first = server.evaluate(first)
    assert server_first == f"r={client_nonce}{server_nonce},s={salt},i=4096".encode()
    client_final = client.final(server_first)
    assert client_final == f"c=biws,r={client_nonce}{server_nonce},p={proof}".encode()
    server_final = server.evaluate(client_final)
    assert server_final == f"v={verifier}".encode()
    assert server.complete and server.username == "user"
    client.verify(server_final)


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_wrong_password_fails_with_one_message_for_all(mechanism: ScramMechanism) -> None:
    store = CredentialStore(None)
    store.put("alice", mechanism.name, ScramCredential.from_password(mechanism, "right"))
    server = ScramServer(mechanism, store)
    client = ScramClient(mechanism, "alice", "wrong")
    final = client.final(server.evaluate(client.first()))
    with pytest.raises(SaslFailure, match="invalid credentials") as wrong:
        server.evaluate(final)
    assert not server.complete
    unknown = ScramServer(mechanism, store)
    with pytest.raises(SaslFailure) as no_user:
        unknown.evaluate(ScramClient(mechanism, "mallory", "x").first())
    assert str(no_user.value) == str(wrong.value)


def test_a_credential_of_the_other_mechanism_does_not_authenticate() -> None:
    store = CredentialStore(None)
    store.put("alice", SCRAM_SHA_256.name, ScramCredential.from_password(SCRAM_SHA_256, "pw"))
    with pytest.raises(SaslFailure):
        ScramServer(SCRAM_SHA_512, store).evaluate(ScramClient(SCRAM_SHA_512, "alice", "pw").first())


def test_client_rejects_a_server_that_does_not_know_the_password() -> None:
    real = CredentialStore(None)
    real.put("alice", "SCRAM-SHA-512", ScramCredential.from_password(SCRAM_SHA_512, "pw"))
    impostor = CredentialStore(None)
    impostor.put("alice", "SCRAM-SHA-512", ScramCredential.from_password(SCRAM_SHA_512, "other"))
    client = ScramClient(SCRAM_SHA_512, "alice", "pw")
    server = ScramServer(SCRAM_SHA_512, impostor)
    client.final(server.evaluate(client.first()))
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + b"AAAA" * 22)


@pytest.mark.parametrize(
    "first",
    [
        b"",
        b"n,,",
        b"p=tls-server-end-point,,n=alice,r=abc",
        b"n,,n=alice",
        b"n,,m=ext,n=alice,r=abc",
        b"n,a=bob,n=alice,r=abc",
        b"\xff\xfe",
        b"n,,n=al=ZZice,r=abc",
    ],
)
def test_malformed_first_messages_fail_cleanly(first: bytes) -> None:
    store = CredentialStore(None)
    store.put("alice", "SCRAM-SHA-256", ScramCredential.from_password(SCRAM_SHA_256, "pw"))
    with pytest.raises(SaslFailure):
        ScramServer(SCRAM_SHA_256, store).evaluate(first)


def test_final_message_with_a_changed_nonce_or_binding_fails() -> None:
    store = CredentialStore(None)
    store.put("alice", "SCRAM-SHA-256", ScramCredential.from_password(SCRAM_SHA_256, "pw"))
    for tamper in (lambda m: m.replace(b"c=biws", b"c=eSws"), lambda m: m.replace(b",p=", b"x,p=")):
        client = ScramClient(SCRAM_SHA_256, "alice", "pw")
        server = ScramServer(SCRAM_SHA_256, store)
        final = client.final(server.evaluate(client.first()))
        with pytest.raises(SaslFailure):
            server.evaluate(tamper(final))
        with pytest.raises(SaslFailure):
            server.evaluate(final)  # a failed exchange cannot be resumed


def test_user_names_with_comma_and_equals_round_trip() -> None:
    assert escape_name("a,b=c") == "a=2Cb=3Dc"
    assert unescape_name("a=2Cb=3Dc") == "a,b=c"
    store = CredentialStore(None)
    store.put("a,b=c", "SCRAM-SHA-256", ScramCredential.from_password(SCRAM_SHA_256, "pw"))
    client = ScramClient(SCRAM_SHA_256, "a,b=c", "pw")
    server = ScramServer(SCRAM_SHA_256, store)
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.username == "a,b=c"


def test_plain_is_checked_against_the_stored_scram_credential() -> None:
    store = CredentialStore(None)
    store.put("alice", "SCRAM-SHA-512", ScramCredential.from_password(SCRAM_SHA_512, "s3cret"))
    ok = PlainServer(store)
    assert ok.evaluate(plain_token("alice", "s3cret")) == b""
    assert ok.complete and ok.username == "alice"
    assert PlainServer(store).evaluate(b"alice\0alice\0s3cret") == b""  # authzid = user is allowed
    for bad in (plain_token("alice", "nope"), plain_token("bob", "s3cret"), b"\0alice", b"bob\0alice\0s3cret",
                plain_token("", "x"), plain_token("alice", "")):
        server = PlainServer(store)
        with pytest.raises(SaslFailure):
            server.evaluate(bad)
        assert not server.complete


def test_store_survives_a_reload_and_keeps_no_password(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = CredentialStore(tmp_path)
    store.put("alice", "SCRAM-SHA-256", ScramCredential.from_password(SCRAM_SHA_256, "hunter2-secret"))
    store.save()
    assert b"hunter2" not in (tmp_path / "scram-credentials.json").read_bytes()
    again = CredentialStore(tmp_path)
    again.load()
    assert again.get("alice", "SCRAM-SHA-256") == store.get("alice", "SCRAM-SHA-256")
    assert PlainServer(again).evaluate(plain_token("alice", "hunter2-secret")) == b""
    again.bootstrap("alice:other,bob:pw", ["SCRAM-SHA-256"])
    assert again.get("alice", "SCRAM-SHA-256") == store.get("alice", "SCRAM-SHA-256")  # existing user kept
    assert again.users() == ["alice", "bob"]


def test_old_librdkafka_nonce_form_is_accepted_as_kafka_does() -> None:
    """librdkafka < 2.1 sends r=<client nonce><server nonce>; Kafka checks endsWith."""
    store = _store_with(SCRAM_SHA_256, "user", "pencil", unb64("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    server = ScramServer(SCRAM_SHA_256, store, nonce=lambda: "SRV")
    server_first = server.evaluate(b"n,,n=user,r=CLI")
    assert server_first.startswith(b"r=CLISRV,")
    mechanism = SCRAM_SHA_256
    salted = mechanism.salted_password("pencil", unb64("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    without_proof = "c=biws,r=CLICLISRV"
    auth = f"n=user,r=CLI,{server_first.decode()},{without_proof}".encode()
    client_key = mechanism.client_key(salted)
    proof = bytes(a ^ b for a, b in zip(client_key, mechanism.hmac(mechanism.digest(client_key), auth), strict=True))
    import base64

    server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert server.complete
