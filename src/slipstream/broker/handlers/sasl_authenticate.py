"""SaslAuthenticate (key 36). Served v0-2.

One SASL token each way, after a v1 SaslHandshake. A failed authentication is
answered SASL_AUTHENTICATION_FAILED with a message (the same one for an unknown user
and a wrong password), and the connection is then closed, as Kafka does. Without a
handshake, or once authenticated, ILLEGAL_SASL_STATE. session_lifetime_ms (v1+) is
``connections.max.reauth.ms`` (0, the default: sessions do not end); the client then
re-authenticates on the same connection before it ends (KIP-368, security/session.py).
"""

from __future__ import annotations

import logging

from ...protocol.apis.sasl_authenticate import (
    SPEC,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from ..request_context import RequestContext
from ..security.sasl import SaslFailure
from ..security.sasl_answers import AuthenticationFailed
from ..security.session import IllegalSaslState

ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or not session.listener.uses_sasl:
        return SaslAuthenticateResponse(
            error_code=ILLEGAL_SASL_STATE,
            error_message=f"listener {ctx.listener} does not use SASL",
            auth_bytes=b"",
        )
    try:
        answer = session.authenticate(bytes(request.auth_bytes))
    except IllegalSaslState as exc:
        return SaslAuthenticateResponse(
            error_code=ILLEGAL_SASL_STATE, error_message=str(exc), auth_bytes=b""
        )
    except SaslFailure as exc:
        log.info("SASL authentication failed from %s on %s: %s", ctx.client_host, ctx.listener, exc)
        raise AuthenticationFailed(
            str(exc),
            SaslAuthenticateResponse(
                error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b""
            ),
        ) from None
    lifetime_ms = 0
    if session.exchange_complete:
        lifetime_ms = session.session_lifetime_ms()
        done = "re-authenticated" if session.reauthentications else "authenticated"
        log.info("%s %s as %s on listener %s", ctx.client_host, done, session.principal, ctx.listener)
    return SaslAuthenticateResponse(
        error_code=0, error_message=None, auth_bytes=answer, session_lifetime_ms=lifetime_ms
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
