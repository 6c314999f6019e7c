"""AlterUserScramCredentials (key 51), version 0; flexible (KIP-554).

Deletes and upserts SCRAM credentials. The client salts the password itself
(salt, iterations, salted_password = Hi(password, salt, i)): the password never
crosses the wire. One result per affected user. Mechanism codes: 1
SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BYTES, INT8, INT16, INT32, STRING, Array, Struct, field


class ScramCredentialDeletion(Struct):
    name: str = field(STRING)
    mechanism: int = field(INT8)


class ScramCredentialUpsertion(Struct):
    name: str = field(STRING)
    mechanism: int = field(INT8)
    iterations: int = field(INT32)
    salt: bytes = field(BYTES)
    salted_password: bytes = field(BYTES)


class AlterUserScramCredentialsRequest(Struct):
    deletions: list[ScramCredentialDeletion] = field(Array(ScramCredentialDeletion))
    upsertions: list[ScramCredentialUpsertion] = field(Array(ScramCredentialUpsertion))


class AlterUserScramCredentialsResult(Struct):
    user: str = field(STRING)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")


class AlterUserScramCredentialsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    results: list[AlterUserScramCredentialsResult] = field(Array(AlterUserScramCredentialsResult))


SPEC = register(
    ApiSpec(
        51, "AlterUserScramCredentials", AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse, 0, 0, 0,
    )
)
