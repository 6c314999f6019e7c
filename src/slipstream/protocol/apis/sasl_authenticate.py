"""SaslAuthenticate (key 36), versions 0-2; flexible from v2.

Carries one SASL token each way after a v1 SaslHandshake (KIP-152). v1 adds
session_lifetime_ms (KIP-368: 0 means the session never needs re-authenticating).
A failure is SASL_AUTHENTICATION_FAILED with a message; the broker then closes
the connection.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BYTES, INT16, INT64, STRING, Struct, field


class SaslAuthenticateRequest(Struct):
    auth_bytes: bytes = field(BYTES)


class SaslAuthenticateResponse(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    auth_bytes: bytes = field(BYTES, default=b"")
    session_lifetime_ms: int = field(INT64, v="1+", default=0)


SPEC = register(
    ApiSpec(36, "SaslAuthenticate", SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2, 2)
)
