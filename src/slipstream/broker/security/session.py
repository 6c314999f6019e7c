"""One connection's authentication state: its listener, its principal, its SASL exchange.

A SASL listener serves nothing but ApiVersions, SaslHandshake and SaslAuthenticate
until the exchange completes; after a v0 SaslHandshake the client's next frames are
raw SASL tokens (no Kafka request header), answered the same way. Principals are
Kafka's: "User:<name>" after SASL, "User:<certificate subject>" after a TLS client
certificate, "User:ANONYMOUS" otherwise.

With ``connections.max.reauth.ms`` (KIP-368) a SASL session has a lifetime, told to
the client in SaslAuthenticate v1+. Before it ends the client re-authenticates on the
same connection (a v1 SaslHandshake with the same mechanism, then SaslAuthenticate, as
the same principal); a connection whose session has ended is closed at its next request.
"""

from __future__ import annotations

from collections.abc import Callable

from ..listeners import Listener
from .credentials import CredentialStore
from .sasl import SaslFailure, SaslServer, new_server

ANONYMOUS = "User:ANONYMOUS"

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
# Kafka refuses a second re-authentication started within a second of the previous one.
MIN_REAUTH_INTERVAL_MS = 1000


class IllegalSaslState(Exception):
    """A SASL request that the exchange's state does not allow (ILLEGAL_SASL_STATE)."""


def _no_clock() -> int:
    return 0


class ConnectionSession:
    def __init__(
        self, listener: Listener, credentials: CredentialStore, mechanisms: tuple[str, ...],
        certificate_subject: str | None = None, max_reauth_ms: int = 0, clock: Callable[[], int] = _no_clock,
    ) -> None:
        self.listener = listener
        self.credentials = credentials
        self.mechanisms = mechanisms
        self.principal = f"User:{certificate_subject}" if certificate_subject and not listener.uses_sasl else ANONYMOUS
        self.authenticated = not listener.uses_sasl
        self.raw_tokens = False
        self.max_reauth_ms = max_reauth_ms
        self.clock = clock
        # When the session ends (clock ms); None: never.
        self.expires_at_ms: int | None = None
        self.reauthentications = 0
        self._server: SaslServer | None = None
        self._mechanism: str | None = None
        self._requested_mechanism: str | None = None
        self._reauthenticating = False
        self._reauth_started_ms: int | None = None

    def admits(self, api_key: int) -> bool:
        if self._reauthenticating:
            # Kafka's client sends nothing else while it re-authenticates.
            return api_key == SASL_AUTHENTICATE
        return self.authenticated or api_key in BEFORE_AUTHENTICATION

    @property
    def exchange_complete(self) -> bool:
        """Authenticated, with no re-authentication under way."""
        return self.authenticated and not self._reauthenticating

    def expired(self) -> bool:
        """True once the session's lifetime has passed without a re-authentication."""
        return self.expires_at_ms is not None and not self._reauthenticating and self.clock() >= self.expires_at_ms

    def handshake(self, mechanism: str, version: int) -> bool:
        """Start an exchange with ``mechanism``; False when it is not enabled here."""
        if self.authenticated:
            return self._begin_reauthentication(mechanism, version)
        if self._server is not None:
            raise IllegalSaslState("SaslHandshake is not expected now: authentication already started")
        if mechanism not in self.mechanisms:
            return False
        self._server = new_server(mechanism, self.credentials)
        self._mechanism = mechanism
        self.raw_tokens = version == 0
        return True

    def _begin_reauthentication(self, mechanism: str, version: int) -> bool:
        now = self.clock()
        if not self.listener.uses_sasl or self.expires_at_ms is None or version == 0:
            raise IllegalSaslState("SaslHandshake is not expected now: already authenticated")
        if self._reauth_started_ms is not None and now - self._reauth_started_ms < MIN_REAUTH_INTERVAL_MS:
            raise IllegalSaslState("SaslHandshake is not expected now: re-authenticated less than a second ago")
        if mechanism not in self.mechanisms:
            return False
        self._reauth_started_ms = now
        self._reauthenticating = True
        # A different mechanism is answered at SaslAuthenticate, as Kafka does.
        self._server = new_server(mechanism, self.credentials) if mechanism == self._mechanism else None
        self._requested_mechanism = mechanism
        return True

    def authenticate(self, token: bytes) -> bytes:
        """Feed the client's token; the server's answer. Raises SaslFailure."""
        if self._reauthenticating:
            return self._reauthenticate(token)
        server = self._server
        if server is None or self.authenticated:
            raise IllegalSaslState("SaslAuthenticate is not expected now: no SaslHandshake, or already authenticated")
        answer = server.evaluate(token)
        if server.complete:
            self.authenticated = True
            self.raw_tokens = False
            self.principal = f"User:{server.username}"
            self._start_lifetime()
        return answer

    def _reauthenticate(self, token: bytes) -> bytes:
        server = self._server
        if server is None:
            raise SaslFailure(
                f"SASL mechanism '{self._requested_mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._mechanism}'"
            )
        answer = server.evaluate(token)
        if server.complete:
            principal = f"User:{server.username}"
            if principal != self.principal:
                raise SaslFailure(f"Cannot change principals during re-authentication from {self.principal}: {principal}")
            self._reauthenticating = False
            self.reauthentications += 1
            self._start_lifetime()
        return answer

    def _start_lifetime(self) -> None:
        if self.max_reauth_ms > 0:
            self.expires_at_ms = self.clock() + self.max_reauth_ms

    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client: 0 when the session never ends."""
        return self.max_reauth_ms if self.expires_at_ms is not None else 0


__all__ = ["ANONYMOUS", "ConnectionSession", "IllegalSaslState", "SaslFailure"]
