"""Turning a session's SASL outcome into what the client receives.

``AuthenticationFailed`` carries the SaslAuthenticate response a handler wants sent
before the connection closes; ``raw_sasl_token`` serves the tokens that follow a v0
SaslHandshake, which travel size-prefixed with no Kafka header.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from .sasl import SaslFailure
from .session import ConnectionSession, IllegalSaslState

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")


class AuthenticationFailed(Exception):
    def __init__(self, message: str, response: Any) -> None:
        super().__init__(message)
        self.message = message
        self.response = response


def raw_sasl_token(session: ConnectionSession, frame: bytearray) -> list[bytes | bytearray | memoryview]:
    try:
        answer = session.authenticate(bytes(frame))
    except (SaslFailure, IllegalSaslState) as exc:
        log.info("SASL authentication failed on listener %s: %s", session.listener.name, exc)
        raise AuthenticationFailed(str(exc), None) from None
    return [_SIZE.pack(len(answer)), answer]
