"""AlterUserScramCredentials (key 51). Served v0.

Deletes and upserts SCRAM credentials (KIP-554); the client sends salt, iterations and
the salted password, the broker keeps salt, iterations, StoredKey and ServerKey. One
result per user, in order of first mention; a user's changes apply all or none.
Errors, as Kafka's: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM; an empty
name, empty salt or salted password, or iterations outside 4096..16384
UNACCEPTABLE_CREDENTIAL; one user and mechanism altered twice DUPLICATE_RESOURCE;
deleting a credential that does not exist RESOURCE_NOT_FOUND. The changes are applied
to the stored document as it is now (in a cluster, other brokers change it too), written
(atomically, fsynced) before the answer. With an authorizer, Alter on the cluster is
needed (else every user's result is CLUSTER_AUTHORIZATION_FAILED, nothing changed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...protocol.apis.alter_user_scram_credentials import (
    SPEC,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from ...protocol.scram import MAX_ITERATIONS, MECHANISMS_BY_CODE, MIN_ITERATIONS
from ..request_context import RequestContext
from ..security.acl import Operation
from ..security.credentials import ScramCredential

MIN_VERSION = 0
MAX_VERSION = 0

UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
CLUSTER_AUTHORIZATION_FAILED = 31

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    if not ctx.authorized_cluster(Operation.ALTER):
        users = dict.fromkeys([*(d.name for d in request.deletions), *(u.name for u in request.upsertions)])
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                AlterUserScramCredentialsResult(
                    user=name, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="Alter on the cluster is not allowed"
                )
                for name in users
            ],
        )
    store = ctx.state.credentials
    errors: dict[str, tuple[int, str]] = {}
    order: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    for name, mechanism in [
        *((d.name, d.mechanism) for d in request.deletions),
        *((u.name, u.mechanism) for u in request.upsertions),
    ]:
        order.append(name)
        seen[(name, mechanism)] = seen.get((name, mechanism), 0) + 1

    def fail(name: str, code: int, message: str) -> None:
        errors.setdefault(name, (code, message))

    for d in request.deletions:
        _check_common(d.name, d.mechanism, seen, fail)
        mech = MECHANISMS_BY_CODE.get(d.mechanism)
        if mech is not None and store.get(d.name, mech.name) is None:
            fail(d.name, RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    for u in request.upsertions:
        _check_common(u.name, u.mechanism, seen, fail)
        if u.iterations < MIN_ITERATIONS:
            fail(u.name, UNACCEPTABLE_CREDENTIAL, f"Too few iterations (minimum {MIN_ITERATIONS})")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, UNACCEPTABLE_CREDENTIAL, f"Too many iterations (maximum {MAX_ITERATIONS})")
        if not u.salt or not u.salted_password:
            fail(u.name, UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    deleted = [(d.name, MECHANISMS_BY_CODE[d.mechanism].name) for d in request.deletions if d.name not in errors]
    upserted = [
        (u.name, mech.name, ScramCredential.from_salted_password(mech, bytes(u.salt), bytes(u.salted_password), u.iterations))
        for u in request.upsertions
        if u.name not in errors
        for mech in [MECHANISMS_BY_CODE[u.mechanism]]
    ]
    if deleted or upserted:
        store.apply(deleted, upserted)
        log.info("SCRAM credentials changed for %s", ", ".join(n for n in dict.fromkeys(order) if n not in errors))
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(
                user=name, error_code=errors.get(name, (0, None))[0], error_message=errors.get(name, (0, None))[1]
            )
            for name in dict.fromkeys(order)
        ],
    )


def _check_common(
    name: str, mechanism: int, seen: dict[tuple[str, int], int], fail: Callable[[str, int, str], None]
) -> None:
    if not name:
        fail(name, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism not in MECHANISMS_BY_CODE:
        fail(name, UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism code {mechanism}")
    if seen[(name, mechanism)] > 1:
        fail(name, DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
