"""ListGroups (key 16), versions 0-5; flexible from v3.

v1 adds throttle_time_ms; v2 is the same as v1; v3 is the first flexible
version; v4 adds states_filter (KIP-518; case-insensitive state names, empty =
all) and each listed group's group_state; v5 adds types_filter ("classic",
"consumer"; KIP-848) and each listed group's group_type.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import INT16, INT32, STRING, Array, Struct, field


class ListGroupsRequest(Struct):
    states_filter: list[str] = field(Array(STRING), v="4+")
    types_filter: list[str] = field(Array(STRING), v="5+")


class ListGroupsResponseListedGroup(Struct):
    group_id: str = field(STRING)
    protocol_type: str = field(STRING)
    group_state: str = field(STRING, v="4+")
    group_type: str = field(STRING, v="5+")


class ListGroupsResponse(Struct):
    throttle_time_ms: int = field(INT32, v="1+")
    error_code: int = field(INT16)
    groups: list[ListGroupsResponseListedGroup] = field(Array(ListGroupsResponseListedGroup))


SPEC = register(ApiSpec(16, "ListGroups", ListGroupsRequest, ListGroupsResponse, 0, 5, 3))
