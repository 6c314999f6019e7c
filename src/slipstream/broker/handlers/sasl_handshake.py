"""SaslHandshake (key 17). Served v0-1.

On a SASL listener (SASL_PLAINTEXT, SASL_SSL) the client names a mechanism; an enabled
one (``sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) starts the
exchange, any other is UNSUPPORTED_SASL_MECHANISM with the enabled list. v1 is
followed by SaslAuthenticate requests; v0 by raw SASL tokens without Kafka headers
(see broker/security/session.py). A handshake once authentication has started or
completed is ILLEGAL_SASL_STATE.

On a listener without SASL every mechanism is answered UNSUPPORTED_SASL_MECHANISM
with an empty list, so a client configured for SASL gets a clear refusal ("broker
supports: none") instead of a dropped connection.
"""

from __future__ import annotations

import logging

from ...protocol.apis.sasl_handshake import SPEC, SaslHandshakeRequest, SaslHandshakeResponse
from ..request_context import RequestContext
from ..security.session import IllegalSaslState

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34

MIN_VERSION = 0
MAX_VERSION = 1

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.session
    if session is None or not session.listener.uses_sasl:
        log.info(
            "refused SASL %s from %s: listener %s has no SASL",
            request.mechanism, ctx.client_host, ctx.listener,
        )
        return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=[])
    enabled = list(session.mechanisms)
    try:
        started = session.handshake(request.mechanism, ctx.api_version)
    except IllegalSaslState:
        return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
    if not started:
        return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    return SaslHandshakeResponse(error_code=0, mechanisms=enabled)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
