"""DescribeUserScramCredentials (key 50), version 0; flexible (KIP-554).

Which SCRAM mechanisms each user has a credential for, with its iteration count
(never the salt or keys). Users null or empty: every user. An unknown user named
explicitly is RESOURCE_NOT_FOUND; a name given twice is DUPLICATE_RESOURCE.
Mechanism codes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, field


class DescribeUserScramCredentialsRequestUser(Struct):
    name: str = field(STRING)


class DescribeUserScramCredentialsRequest(Struct):
    users: list[DescribeUserScramCredentialsRequestUser] | None = field(
        Array(DescribeUserScramCredentialsRequestUser), nullable="0+"
    )


class DescribeUserScramCredentialsCredentialInfo(Struct):
    mechanism: int = field(INT8)
    iterations: int = field(INT32)


class DescribeUserScramCredentialsResult(Struct):
    user: str = field(STRING)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    credential_infos: list[DescribeUserScramCredentialsCredentialInfo] = field(
        Array(DescribeUserScramCredentialsCredentialInfo)
    )


class DescribeUserScramCredentialsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    results: list[DescribeUserScramCredentialsResult] = field(Array(DescribeUserScramCredentialsResult))


SPEC = register(
    ApiSpec(
        50, "DescribeUserScramCredentials", DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse, 0, 0, 0,
    )
)
