"""DescribeUserScramCredentials (key 50). Served v0.

Which SCRAM mechanisms each user has, with iteration counts (KIP-554). Users null or
empty: every user with a credential. A user named but unknown is RESOURCE_NOT_FOUND,
a user named twice DUPLICATE_RESOURCE (each once, for that user), as Kafka answers.
With an authorizer, Describe on the cluster is needed (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from ...protocol.apis.describe_user_scram_credentials import (
    SPEC,
    DescribeUserScramCredentialsCredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from ...protocol.scram import MECHANISMS
from ..request_context import RequestContext
from ..security.acl import Operation

MIN_VERSION = 0
MAX_VERSION = 0

RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
CLUSTER_AUTHORIZATION_FAILED = 31


async def handle(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorized_cluster(Operation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
            error_message="Describe on the cluster is not allowed", results=[],
        )
    store = ctx.state.credentials
    wanted = [u.name for u in request.users] if request.users else store.users()
    counts: dict[str, int] = {}
    for name in wanted:
        counts[name] = counts.get(name, 0) + 1
    results = []
    for name in dict.fromkeys(wanted):
        creds = store.of_user(name)
        if counts[name] > 1:
            results.append(_error(name, DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
        elif not creds:
            results.append(_error(name, RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            results.append(
                DescribeUserScramCredentialsResult(
                    user=name, error_code=0, error_message=None,
                    credential_infos=[
                        DescribeUserScramCredentialsCredentialInfo(
                            mechanism=MECHANISMS[mech].code, iterations=c.iterations
                        )
                        for mech, c in sorted(creds.items(), key=lambda item: MECHANISMS[item[0]].code)
                    ],
                )
            )
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )


def _error(name: str, code: int, message: str) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(user=name, error_code=code, error_message=message, credential_infos=[])


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
