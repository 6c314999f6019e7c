"""AlterConfigs (key 33), versions 0-2; flexible from v2.

The legacy, non-incremental API: the given configs replace the whole set of
dynamic configs of the resource (a config left out reverts to its default).
v1 has v0's layout (throttling after answering); v2 is the first flexible
version. Clients prefer IncrementalAlterConfigs.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, field


class AlterConfigsRequestConfig(Struct):
    name: str = field(STRING)
    value: str | None = field(STRING, nullable="0+")


class AlterConfigsRequestResource(Struct):
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    configs: list[AlterConfigsRequestConfig] = field(Array(AlterConfigsRequestConfig))


class AlterConfigsRequest(Struct):
    resources: list[AlterConfigsRequestResource] = field(Array(AlterConfigsRequestResource))
    validate_only: bool = field(BOOL)


class AlterConfigsResponseResource(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)


class AlterConfigsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    responses: list[AlterConfigsResponseResource] = field(Array(AlterConfigsResponseResource))


SPEC = register(ApiSpec(33, "AlterConfigs", AlterConfigsRequest, AlterConfigsResponse, 0, 2, 2))
