"""The server side of the SASL mechanisms, sans-I/O: one object per authentication.

``evaluate(token)`` takes the client's next token and returns the server's answer,
or raises ``SaslFailure`` with the message the client is shown. ``complete`` is set
once the client is authenticated as ``username``.

PLAIN (RFC 4616) is checked against the user's stored SCRAM credential (the password
is salted with the stored salt and compared with StoredKey), so no password is kept
for it either. SCRAM-SHA-256/512 follow RFC 5802/7677 as Kafka does: no channel
binding, extensions accepted and ignored, the authorization id must be the user.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ...protocol.scram import (
    MECHANISMS,
    ScramError,
    ScramMechanism,
    b64,
    new_nonce,
    parse_attributes,
    unb64,
    unescape_name,
    xor,
)
from .credentials import CredentialStore, ScramCredential

PLAIN = "PLAIN"
_FAILED = -1


class SaslFailure(Exception):
    """Authentication failed; the message goes to the client (SASL_AUTHENTICATION_FAILED)."""


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    username: str | None

    def evaluate(self, token: bytes) -> bytes: ...


def _invalid_credentials(mechanism: str) -> SaslFailure:
    # One message for unknown users and wrong passwords alike: nothing to learn from it.
    return SaslFailure(f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")


class PlainServer:
    mechanism = PLAIN

    def __init__(self, credentials: CredentialStore) -> None:
        self.credentials = credentials
        self.complete = False
        self.username: str | None = None
        self._used = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete or self._used:
            raise SaslFailure("PLAIN authentication is already complete or has failed")
        self._used = True
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from username")
        if not self._password_matches(user, password):
            raise _invalid_credentials(PLAIN)
        self.username = user
        self.complete = True
        return b""

    def _password_matches(self, user: str, password: str) -> bool:
        import hmac  # (where used: see protocol/scram.py)

        for name, credential in self.credentials.of_user(user).items():
            mechanism = MECHANISMS[name]
            salted = mechanism.salted_password(password, credential.salt, credential.iterations)
            if hmac.compare_digest(mechanism.stored_key(salted), credential.stored_key):
                return True
        return False


class ScramServer:
    def __init__(
        self, mechanism: ScramMechanism, credentials: CredentialStore, nonce: Callable[[], str] = new_nonce
    ) -> None:
        self.scram = mechanism
        self.mechanism = mechanism.name
        self.credentials = credentials
        self._nonce = nonce
        self.complete = False
        self.username: str | None = None
        self._step = 0
        self._credential: ScramCredential | None = None
        self._first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._full_nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            self._step = _FAILED
            raise SaslFailure(f"Invalid {self.mechanism} message: not UTF-8") from None
        step, self._step = self._step, _FAILED  # a failed exchange cannot be resumed
        try:
            if step == 0:
                return self._first(text)
            if step == 1:
                return self._final(text)
        except ScramError as exc:
            raise SaslFailure(f"Invalid {self.mechanism} message: {exc}") from None
        raise SaslFailure(f"{self.mechanism} authentication is already complete or has failed")

    def _first(self, text: str) -> bytes:
        # gs2-header: "n,," or "y,," or "n,a=authzid," then client-first-message-bare.
        flag, sep1, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not sep1 or not sep2:
            raise ScramError("expected a GS2 header (n,,)")
        if flag.startswith("p="):
            raise ScramError("channel binding is not supported")
        if flag not in ("n", "y"):
            raise ScramError(f"invalid GS2 flag {flag!r}")
        attrs = parse_attributes(bare)
        if "m" in attrs:
            raise ScramError("mandatory extensions are not supported")
        user = unescape_name(attrs.get("n", ""))
        client_nonce = attrs.get("r", "")
        if not user or not client_nonce:
            raise ScramError("the first message needs n=user and r=nonce")
        if authz and (not authz.startswith("a=") or unescape_name(authz[2:]) != user):
            raise SaslFailure("Authentication failed: authorization id must be the same as the user name")
        credential = self.credentials.get(user, self.mechanism)
        if credential is None:
            raise _invalid_credentials(self.mechanism)
        self.username = user
        self._credential = credential
        self._gs2_header = f"{flag},{authz},"
        self._first_bare = bare
        self._full_nonce = client_nonce + self._nonce()
        self._server_first = f"r={self._full_nonce},s={b64(credential.salt)},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        assert self._credential is not None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("the final message has no proof (p=)")
        attrs = parse_attributes(without_proof)
        if unb64(attrs.get("c", "")) != self._gs2_header.encode():
            raise ScramError("channel binding data does not match the GS2 header")
        # Kafka accepts a nonce that ends with ours: librdkafka before 2.1 sends the client
        # nonce followed by the whole server nonce (which repeats it).
        if not attrs.get("r", "").endswith(self._full_nonce):
            raise ScramError("the nonce does not match")
        proof = unb64(proof_part)
        m = self.scram
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = m.hmac(self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _invalid_credentials(self.mechanism)
        client_key = xor(proof, signature)
        import hmac  # (where used: see protocol/scram.py)

        if not hmac.compare_digest(m.digest(client_key), self._credential.stored_key):
            raise _invalid_credentials(self.mechanism)
        self._step = 2
        self.complete = True
        return f"v={b64(m.hmac(self._credential.server_key, auth_message))}".encode()


def new_server(mechanism: str, credentials: CredentialStore) -> SaslServer:
    if mechanism == PLAIN:
        return PlainServer(credentials)
    return ScramServer(MECHANISMS[mechanism], credentials)
