"""IncrementalAlterConfigs (key 44), versions 0-1; flexible from v1.

Each config carries its own config_operation: 0 SET, 1 DELETE, 2 APPEND and
3 SUBTRACT (the last two for list-valued configs); configs not named are
left alone (KIP-339). v1 is v0 in the flexible encoding.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, field


class IncrementalAlterConfigsRequestConfig(Struct):
    name: str = field(STRING)
    config_operation: int = field(INT8)
    value: str | None = field(STRING, nullable="0+")


class IncrementalAlterConfigsRequestResource(Struct):
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    configs: list[IncrementalAlterConfigsRequestConfig] = field(
        Array(IncrementalAlterConfigsRequestConfig)
    )


class IncrementalAlterConfigsRequest(Struct):
    resources: list[IncrementalAlterConfigsRequestResource] = field(
        Array(IncrementalAlterConfigsRequestResource)
    )
    validate_only: bool = field(BOOL)


class IncrementalAlterConfigsResponseResource(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)


class IncrementalAlterConfigsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    responses: list[IncrementalAlterConfigsResponseResource] = field(
        Array(IncrementalAlterConfigsResponseResource)
    )


SPEC = register(
    ApiSpec(
        44,
        "IncrementalAlterConfigs",
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        0,
        1,
        1,
    )
)
