"""One connection's authentication state: its listener, its principal, its SASL exchange.

A SASL listener serves nothing but ApiVersions, SaslHandshake and SaslAuthenticate
until the exchange completes; after a v0 SaslHandshake the client's next frames are
raw SASL tokens (no Kafka request header), answered the same way. Principals are
Kafka's: "User:<name>" after SASL, "User:<certificate subject>" after a TLS client
certificate, "User:ANONYMOUS" otherwise.
"""

from __future__ import annotations

from ..listeners import Listener
from .credentials import CredentialStore
from .sasl import SaslFailure, SaslServer, new_server

ANONYMOUS = "User:ANONYMOUS"

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class IllegalSaslState(Exception):
    """A SASL request that the exchange's state does not allow (ILLEGAL_SASL_STATE)."""


class ConnectionSession:
    def __init__(
        self, listener: Listener, credentials: CredentialStore, mechanisms: tuple[str, ...],
        certificate_subject: str | None = None,
    ) -> None:
        self.listener = listener
        self.credentials = credentials
        self.mechanisms = mechanisms
        self.principal = f"User:{certificate_subject}" if certificate_subject and not listener.uses_sasl else ANONYMOUS
        self.authenticated = not listener.uses_sasl
        self.raw_tokens = False
        self._server: SaslServer | None = None

    def admits(self, api_key: int) -> bool:
        return self.authenticated or api_key in BEFORE_AUTHENTICATION

    def handshake(self, mechanism: str, version: int) -> bool:
        """Start an exchange with ``mechanism``; False when it is not enabled here."""
        if self.authenticated or self._server is not None:
            raise IllegalSaslState("SaslHandshake is not expected now: authentication already started or complete")
        if mechanism not in self.mechanisms:
            return False
        self._server = new_server(mechanism, self.credentials)
        self.raw_tokens = version == 0
        return True

    def authenticate(self, token: bytes) -> bytes:
        """Feed the client's token; the server's answer. Raises SaslFailure."""
        server = self._server
        if server is None or self.authenticated:
            raise IllegalSaslState("SaslAuthenticate is not expected now: no SaslHandshake, or already authenticated")
        answer = server.evaluate(token)
        if server.complete:
            self.authenticated = True
            self.raw_tokens = False
            self.principal = f"User:{server.username}"
        return answer


__all__ = ["ANONYMOUS", "ConnectionSession", "IllegalSaslState", "SaslFailure"]
