"""ApiVersions (key 18). v0-4; v3+ is flexible and carries the client's software name/version.

The answer lists exactly the handler modules present, with their declared ranges.
Its response header is always v0 (see ApiSpec.response_header_version), and no
optional tagged fields are sent, so old clients (librdkafka 2.0 / kcat 1.7) parse it.
"""

from __future__ import annotations

from ...protocol.apis.api_versions import (
    SPEC,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
)
from ..state import RequestContext
from . import HANDLERS

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponseApiVersion(api_key=key, min_version=m.MIN_VERSION, max_version=m.MAX_VERSION)
            for key, m in sorted(HANDLERS.items())
        ],
    )


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
