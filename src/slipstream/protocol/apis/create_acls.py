"""CreateAcls (key 30), versions 0-3; flexible from v2.

v1 adds each creation's resource pattern type (v0: LITERAL only); v3 adds the USER
resource type (not served here). One result per creation, in order.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT8, INT16, INT32, STRING, Array, Struct, field

LITERAL = 3


class CreateAclsRequestCreation(Struct):
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    resource_pattern_type: int = field(INT8, v="1+", default=LITERAL)
    principal: str = field(STRING)
    host: str = field(STRING)
    operation: int = field(INT8)
    permission_type: int = field(INT8)


class CreateAclsRequest(Struct):
    creations: list[CreateAclsRequestCreation] = field(Array(CreateAclsRequestCreation))


class CreateAclsResponseResult(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")


class CreateAclsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    results: list[CreateAclsResponseResult] = field(Array(CreateAclsResponseResult))


SPEC = register(ApiSpec(30, "CreateAcls", CreateAclsRequest, CreateAclsResponse, 0, 3, 2))
