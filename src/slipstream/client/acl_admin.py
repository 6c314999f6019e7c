"""Managing ACLs over the wire (CreateAcls, DescribeAcls, DeleteAcls), as Kafka's
AdminClient createAcls/describeAcls/deleteAcls do."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.acl_types import AclBinding, Operation, PatternType, Permission, ResourceType
from ..protocol.apis.create_acls import SPEC as CREATE
from ..protocol.apis.create_acls import CreateAclsRequest, CreateAclsRequestCreation
from ..protocol.apis.delete_acls import SPEC as DELETE
from ..protocol.apis.delete_acls import DeleteAclsRequest, DeleteAclsRequestFilter
from ..protocol.apis.describe_acls import SPEC as DESCRIBE
from ..protocol.apis.describe_acls import DescribeAclsRequest
from ..protocol.errors import KafkaError
from .cluster import Cluster


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs to list or delete: ANY / None match everything; pattern type MATCH
    matches every pattern that applies to ``resource_name``."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY


ANY_ACL = AclBindingFilter()


async def create_acls(cluster: Cluster, bindings: list[AclBinding]) -> None:
    """Create the ACLs; the first refused one raises (the others may have been created)."""
    conn = await cluster.controller_connection()
    request = CreateAclsRequest(
        creations=[
            CreateAclsRequestCreation(
                resource_type=int(b.resource_type), resource_name=b.resource_name,
                resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
                operation=int(b.operation), permission_type=int(b.permission),
            )
            for b in bindings
        ]
    )
    response = await conn.request(CREATE, request)
    for binding, result in zip(bindings, response.results, strict=False):
        if result.error_code:
            raise KafkaError(result.error_code, f"{_describe(binding)}: {result.error_message}")


async def describe_acls(cluster: Cluster, acl_filter: AclBindingFilter = ANY_ACL) -> list[AclBinding]:
    conn = await cluster.controller_connection()
    response = await conn.request(
        DESCRIBE,
        DescribeAclsRequest(
            resource_type_filter=int(acl_filter.resource_type), resource_name_filter=acl_filter.resource_name,
            pattern_type_filter=int(acl_filter.pattern_type), principal_filter=acl_filter.principal,
            host_filter=acl_filter.host, operation=int(acl_filter.operation),
            permission_type=int(acl_filter.permission),
        ),
    )
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message or "DescribeAcls failed")
    return [
        AclBinding(
            ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type), a.principal, a.host,
            Operation(a.operation), Permission(a.permission_type),
        )
        for r in response.resources
        for a in r.acls
    ]


async def delete_acls(cluster: Cluster, filters: list[AclBindingFilter]) -> list[AclBinding]:
    """Delete every ACL matching any of the filters; returns the deleted ones."""
    conn = await cluster.controller_connection()
    response = await conn.request(
        DELETE,
        DeleteAclsRequest(
            filters=[
                DeleteAclsRequestFilter(
                    resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
                    pattern_type_filter=int(f.pattern_type), principal_filter=f.principal, host_filter=f.host,
                    operation=int(f.operation), permission_type=int(f.permission),
                )
                for f in filters
            ]
        ),
    )
    deleted: list[AclBinding] = []
    for result in response.filter_results:
        if result.error_code:
            raise KafkaError(result.error_code, result.error_message or "DeleteAcls failed")
        for m in result.matching_acls:
            deleted.append(
                AclBinding(
                    ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type), m.principal, m.host,
                    Operation(m.operation), Permission(m.permission_type),
                )
            )
    return deleted


def _describe(b: AclBinding) -> str:
    return (
        f"{b.permission.name} {b.principal} {b.operation.name} on {b.resource_type.name} "
        f"{b.pattern_type.name} {b.resource_name!r} from {b.host}"
    )
