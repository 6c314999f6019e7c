"""DescribeConfigs (key 32), versions 0-4; flexible from v4.

resource_type: 2 topic, 4 broker, 8 broker logger; a null
configuration_keys means every config. v0 answers is_default per config
(Kafka 4 removed v0: KIP-896); v1 replaces it with config_source and adds
include_synonyms / synonyms; v2 throttles after answering; v3 adds
include_documentation, config_type and documentation; v4 is the first
flexible version.
"""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Struct, field


class DescribeConfigsRequestResource(Struct):
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    configuration_keys: list[str] | None = field(Array(STRING), nullable="0+")


class DescribeConfigsRequest(Struct):
    resources: list[DescribeConfigsRequestResource] = field(Array(DescribeConfigsRequestResource))
    include_synonyms: bool = field(BOOL, v="1+", default=False)
    include_documentation: bool = field(BOOL, v="3+", default=False)


class DescribeConfigsResponseSynonym(Struct):
    name: str = field(STRING, v="1+")
    value: str | None = field(STRING, v="1+", nullable="1+")
    source: int = field(INT8, v="1+")


class DescribeConfigsResponseConfig(Struct):
    name: str = field(STRING)
    value: str | None = field(STRING, nullable="0+")
    read_only: bool = field(BOOL)
    is_default: bool = field(BOOL, v="0")
    config_source: int = field(INT8, v="1+", default=-1)
    is_sensitive: bool = field(BOOL)
    synonyms: list[DescribeConfigsResponseSynonym] = field(
        Array(DescribeConfigsResponseSynonym), v="1+"
    )
    config_type: int = field(INT8, v="3+", default=0)
    documentation: str | None = field(STRING, v="3+", nullable="3+")


class DescribeConfigsResponseResult(Struct):
    error_code: int = field(INT16)
    error_message: str | None = field(STRING, nullable="0+")
    resource_type: int = field(INT8)
    resource_name: str = field(STRING)
    configs: list[DescribeConfigsResponseConfig] = field(Array(DescribeConfigsResponseConfig))


class DescribeConfigsResponse(Struct):
    throttle_time_ms: int = field(INT32)
    results: list[DescribeConfigsResponseResult] = field(Array(DescribeConfigsResponseResult))


SPEC = register(
    ApiSpec(32, "DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse, 0, 4, 4)
)
