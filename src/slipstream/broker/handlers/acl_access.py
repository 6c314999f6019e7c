"""Who may use the ACL APIs (CreateAcls, DeleteAcls, DescribeAcls), as Kafka decides:
without an authorizer configured every answer is SECURITY_DISABLED; otherwise the API's
operation on the cluster is needed (Alter to change ACLs, Describe to list them), else
CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation
from ..security.authorizer import Authorizer


@dataclass(frozen=True, slots=True)
class AclApiRefusal:
    """The error every result of a refused ACL request carries."""

    code: int
    message: str


def acl_api_authorizer(ctx: RequestContext, operation: Operation, refusal: str) -> Authorizer | AclApiRefusal:
    """The broker's authorizer when ``operation`` on the cluster is allowed; else why not
    (``refusal`` is the message when the principal lacks it)."""
    authorizer = ctx.state.authorizer
    if authorizer is None:
        return AclApiRefusal(
            ErrorCode.SECURITY_DISABLED, "No authorizer is configured on the broker (authorizer=acl)."
        )
    if not ctx.authorized_cluster(operation):
        return AclApiRefusal(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, refusal)
    return authorizer
