"""SaslHandshake (key 17). Served v0-1.

This broker has no SASL listener: every mechanism is answered with
UNSUPPORTED_SASL_MECHANISM (33) and an empty list of enabled mechanisms, so a
client configured for SASL gets a clear refusal ("broker supports: none")
instead of a dropped connection. Clients should connect with PLAINTEXT.
v1 only differs in what follows a successful handshake (SaslAuthenticate
requests instead of raw tokens), which never happens here.
"""

from __future__ import annotations

import logging

from ...protocol.apis.sasl_handshake import SPEC, SaslHandshakeRequest, SaslHandshakeResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 1

UNSUPPORTED_SASL_MECHANISM = 33

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    log.info(
        "refused SASL %s from %s: SASL is not enabled on this broker (use PLAINTEXT)",
        request.mechanism,
        ctx.client_host,
    )
    return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=[])


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
