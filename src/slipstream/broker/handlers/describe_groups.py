"""DescribeGroups (key 15). Served v0-6 (v6: GROUP_ID_NOT_FOUND for an unknown group).
Each group needs Describe (else GROUP_AUTHORIZATION_FAILED for it, nothing else said).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from ...protocol.acl_types import GROUP_OPERATIONS
from ...protocol.apis.describe_groups import (
    AUTHORIZED_OPERATIONS_OMITTED,
    SPEC,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseDescribedGroup,
)
from ...protocol.errors import ErrorCode
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 0
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    async def describe(group_ids: list[str]) -> list[DescribeGroupsResponseDescribedGroup]:
        request.groups = group_ids
        return (await ctx.groups.describe_groups(ctx.coordinator_context(), request)).groups

    groups = await describe_permitted(ctx, request.groups, describe, _refused)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


def _refused(group_id: str) -> DescribeGroupsResponseDescribedGroup:
    return DescribeGroupsResponseDescribedGroup(
        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="", protocol_type="",
        protocol_data="", members=[],
    )


class DescribedGroup(Protocol):
    """A group in a describe answer (DescribeGroups' or ConsumerGroupDescribe's)."""

    group_id: str
    authorized_operations: int


G = TypeVar("G", bound=DescribedGroup)


async def describe_permitted(
    ctx: RequestContext,
    wanted: list[str],
    describe: Callable[[list[str]], Awaitable[list[G]]],
    refused: Callable[[str], G],
) -> list[G]:
    """The coordinator's description of the groups in ``wanted`` the principal may Describe,
    in ``wanted``'s order, ``refused(group_id)`` for the others (nothing else said of them),
    each group's operations narrowed to the principal's."""
    allowed = [g for g in wanted if ctx.group_allowed(Operation.DESCRIBE, g)]
    if len(allowed) == len(wanted):
        groups = await describe(wanted)
    else:
        by_id = {g.group_id: g for g in (await describe(allowed) if allowed else [])}
        groups = [by_id[g] if g in by_id else refused(g) for g in wanted]
    if ctx.authorizing:
        for group in groups:
            group.authorized_operations = authorized_group_operations(ctx, group.group_id, group.authorized_operations)
    return groups


def authorized_group_operations(ctx: RequestContext, group_id: str, offered: int) -> int:
    """The coordinator's operations field (the group's operations, or "not requested")
    narrowed to what the principal may do."""
    if offered == AUTHORIZED_OPERATIONS_OMITTED:
        return offered
    return ctx.authorized_operations(ResourceType.GROUP, group_id, [op for op in GROUP_OPERATIONS if offered >> op & 1])


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
