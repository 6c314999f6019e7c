"""ApiVersions (key 18), versions 0-4; flexible from v3."""

from __future__ import annotations

from ..api import ApiSpec, register
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Struct, field


class ApiVersionsRequest(Struct):
    client_software_name: str = field(STRING, v="3+")
    client_software_version: str = field(STRING, v="3+")


class ApiVersionsResponseApiVersion(Struct):
    api_key: int = field(INT16)
    min_version: int = field(INT16)
    max_version: int = field(INT16)


class ApiVersionsResponseSupportedFeatureKey(Struct):
    name: str = field(STRING, v="3+")
    min_version: int = field(INT16, v="3+")
    max_version: int = field(INT16, v="3+")


class ApiVersionsResponseFinalizedFeatureKey(Struct):
    name: str = field(STRING, v="3+")
    max_version_level: int = field(INT16, v="3+")
    min_version_level: int = field(INT16, v="3+")


class ApiVersionsResponse(Struct):
    error_code: int = field(INT16)
    api_keys: list[ApiVersionsResponseApiVersion] = field(Array(ApiVersionsResponseApiVersion))
    throttle_time_ms: int = field(INT32, v="1+")
    supported_features: list[ApiVersionsResponseSupportedFeatureKey] = field(
        Array(ApiVersionsResponseSupportedFeatureKey), v="3+", tag=0
    )
    finalized_features_epoch: int = field(INT64, v="3+", tag=1, default=-1)
    finalized_features: list[ApiVersionsResponseFinalizedFeatureKey] = field(
        Array(ApiVersionsResponseFinalizedFeatureKey), v="3+", tag=2
    )
    zk_migration_ready: bool = field(BOOL, v="3+", tag=3)


SPEC = register(ApiSpec(18, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, 0, 4, 3))
