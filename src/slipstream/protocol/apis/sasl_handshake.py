"""SaslHandshake (key 17), versions 0-1; never flexible.

The client names a SASL mechanism; the answer lists the mechanisms the
broker enables (UNSUPPORTED_SASL_MECHANISM with that list when the named one
is not among them -- an empty list for a broker without SASL). v0 is
followed by raw SASL tokens framed outside the Kafka protocol; v1 by
SaslAuthenticate requests. Kafka cannot bump this API (KAFKA-9577).
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, STRING, Array, Struct, field


class SaslHandshakeRequest(Struct):
    mechanism: str = field(STRING)


class SaslHandshakeResponse(Struct):
    error_code: int = field(INT16)
    mechanisms: list[str] = field(Array(STRING))


SPEC = register(
    ApiSpec(17, "SaslHandshake", SaslHandshakeRequest, SaslHandshakeResponse, 0, 1, None)
)
