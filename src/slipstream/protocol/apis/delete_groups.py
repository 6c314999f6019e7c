"""DeleteGroups (key 42), versions 0-2; flexible from v2.

v1 is the same as v0 (throttling behaviour only); v2 is the first flexible
version. Per group: NON_EMPTY_GROUP unless the group is Empty,
GROUP_ID_NOT_FOUND for an unknown (or Dead) group.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, STRING, Array, Struct, field


class DeleteGroupsRequest(Struct):
    groups_names: list[str] = field(Array(STRING))


class DeleteGroupsResponseDeletableGroupResult(Struct):
    group_id: str = field(STRING)
    error_code: int = field(INT16)


class DeleteGroupsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    results: list[DeleteGroupsResponseDeletableGroupResult] = field(Array(DeleteGroupsResponseDeletableGroupResult))


SPEC = register(ApiSpec(42, "DeleteGroups", DeleteGroupsRequest, DeleteGroupsResponse, 0, 2, 2))
