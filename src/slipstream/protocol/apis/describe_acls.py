"""DescribeAcls (key 29), versions 0-3; flexible from v2.

A filter (resource type, name or null, pattern type, principal or null, host or null,
operation, permission); the answer groups the matching ACLs by resource pattern. v1 adds
the pattern type filter and each resource's pattern type (v0: LITERAL); v3 adds the USER
resource type.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, field

LITERAL = 3


class DescribeAclsRequest(Struct):
    resource_type_filter: int = field(INT8)
    resource_name_filter: str | None = field(STRING, nullable="0+")
    pattern_type_filter: int = field(INT8, v="1+", default=LITERAL)
    principal_filter: str | None = field(STRING, nullable="0+")
    host_filter: str | None = field(STRING, nullable="0+")
    operation: int = field(INT8)
    permission_type: int = field(INT8)


class DescribeAclsResponseAcl(Struct):
    principal: str = field(STRING)
    host: str = field(STRING)
    operation: int = field(INT8)
    permission_type: int = field(INT8)


class DescribeAclsResponseResource(Struct):
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    pattern_type: int = field(INT8, v="1+", default=LITERAL)
    acls: list[DescribeAclsResponseAcl] = field(Array(DescribeAclsResponseAcl))


class DescribeAclsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    resources: list[DescribeAclsResponseResource] = field(Array(DescribeAclsResponseResource))


SPEC = register(ApiSpec(29, "DescribeAcls", DescribeAclsRequest, DescribeAclsResponse, 0, 3, 2))
