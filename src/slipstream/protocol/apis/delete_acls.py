"""DeleteAcls (key 31), versions 0-3; flexible from v2.

Filters, each answered with the ACLs it matched (and deleted). v1 adds the pattern type
(filters and matched ACLs; v0: LITERAL); v3 adds the USER resource type.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, field

LITERAL = 3


class DeleteAclsRequestFilter(Struct):
    resource_type_filter: int = field(INT8)
    resource_name_filter: str | None = field(STRING, nullable="0+")
    pattern_type_filter: int = field(INT8, v="1+", default=LITERAL)
    principal_filter: str | None = field(STRING, nullable="0+")
    host_filter: str | None = field(STRING, nullable="0+")
    operation: int = field(INT8)
    permission_type: int = field(INT8)


class DeleteAclsRequest(Struct):
    filters: list[DeleteAclsRequestFilter] = field(Array(DeleteAclsRequestFilter))


class DeleteAclsResponseMatchingAcl(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    pattern_type: int = field(INT8, v="1+", default=LITERAL)
    principal: str = field(STRING)
    host: str = field(STRING)
    operation: int = field(INT8)
    permission_type: int = field(INT8)


class DeleteAclsResponseFilterResult(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    matching_acls: list[DeleteAclsResponseMatchingAcl] = field(Array(DeleteAclsResponseMatchingAcl))


class DeleteAclsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    filter_results: list[DeleteAclsResponseFilterResult] = field(Array(DeleteAclsResponseFilterResult))


SPEC = register(ApiSpec(31, "DeleteAcls", DeleteAclsRequest, DeleteAclsResponse, 0, 3, 2))
