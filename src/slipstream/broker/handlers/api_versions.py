"""ApiVersions (key 18). v0-4; v3+ is flexible and carries the client's software name/version.

The answer lists every API in the broker's handler table with its declared range
(the dispatcher puts that list in the broker state when it is built).
Its response header is always v0 (see ApiSpec.response_header_version), and no
optional tagged fields are sent, so old clients (librdkafka 2.0 / kcat 1.7) parse it.
"""

from __future__ import annotations

from ...protocol.apis.api_versions import SPEC, ApiVersionsRequest, ApiVersionsResponse
from ..request_context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=ctx.state.api_versions)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
