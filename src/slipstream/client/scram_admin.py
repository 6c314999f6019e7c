"""Managing SCRAM users over the wire (DescribeUserScramCredentials, AlterUserScramCredentials).

The password never leaves the client: it is salted here (random salt, PBKDF2 with the
mechanism's hash) and only the salted password is sent, as KIP-554 specifies.
"""

from __future__ import annotations

import secrets

from ..protocol.apis.alter_user_scram_credentials import SPEC as ALTER
from ..protocol.apis.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from ..protocol.apis.describe_user_scram_credentials import SPEC as DESCRIBE
from ..protocol.apis.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequestUser,
)
from ..protocol.errors import KafkaError
from ..protocol.scram import DEFAULT_ITERATIONS, MECHANISMS, MECHANISMS_BY_CODE
from .cluster import Cluster

RESOURCE_NOT_FOUND = 91


async def describe_scram_users(cluster: Cluster, users: list[str] | None = None) -> dict[str, dict[str, int]]:
    """user -> {mechanism: iterations}; every user when ``users`` is None. Unknown users are left out."""
    conn = await cluster.controller_connection()
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else [DescribeUserScramCredentialsRequestUser(name=u) for u in users]
    )
    response = await conn.request(DESCRIBE, request)
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message or "DescribeUserScramCredentials failed")
    out: dict[str, dict[str, int]] = {}
    for result in response.results:
        if result.error_code == RESOURCE_NOT_FOUND:
            continue
        if result.error_code:
            raise KafkaError(result.error_code, f"{result.user}: {result.error_message}")
        out[result.user] = {
            MECHANISMS_BY_CODE[info.mechanism].name if info.mechanism in MECHANISMS_BY_CODE else str(info.mechanism): info.iterations
            for info in result.credential_infos
        }
    return out


async def alter_scram_user(
    cluster: Cluster, user: str, *, password: str | None = None, mechanisms: list[str],
    iterations: int = DEFAULT_ITERATIONS, delete: bool = False,
) -> None:
    """Set (``password``) or remove (``delete``) the user's credential for each mechanism."""
    upsertions, deletions = [], []
    for name in mechanisms:
        mechanism = MECHANISMS.get(name.upper())
        if mechanism is None:
            raise ValueError(f"unknown SCRAM mechanism {name!r} ({', '.join(MECHANISMS)})")
        if delete:
            deletions.append(ScramCredentialDeletion(name=user, mechanism=mechanism.code))
        else:
            if not password:
                raise ValueError("a password is needed")
            salt = secrets.token_bytes(32)
            upsertions.append(
                ScramCredentialUpsertion(
                    name=user, mechanism=mechanism.code, iterations=iterations, salt=salt,
                    salted_password=mechanism.salted_password(password, salt, iterations),
                )
            )
    conn = await cluster.controller_connection()
    response = await conn.request(ALTER, AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions))
    for result in response.results:
        if result.error_code:
            raise KafkaError(result.error_code, f"{result.user}: {result.error_message}")
