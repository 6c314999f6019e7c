"""One module per API, listed in ``HANDLERS`` (the ApiVersions answer is built from it).

Each module declares ``SPEC`` (the protocol ApiSpec), ``MIN_VERSION``, ``MAX_VERSION``
and ``async def handle(ctx, request)``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from ...protocol.api import ApiSpec
from ..request_context import RequestContext
from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)


class Handler(Protocol):
    """What a handler module provides (a module satisfies this protocol)."""

    SPEC: ApiSpec
    MIN_VERSION: int
    MAX_VERSION: int

    def handle(self, ctx: RequestContext, request: Any, /) -> Awaitable[Any]: ...


_MODULES: tuple[Handler, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    sasl_handshake,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    init_producer_id,
    describe_configs,
    alter_configs,
    create_partitions,
    delete_groups,
    incremental_alter_configs,
    offset_delete,
    describe_cluster,
    describe_topic_partitions,
    consumer_group_heartbeat,
    consumer_group_describe,
    describe_log_dirs,
    describe_producers,
    write_txn_markers,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    describe_transactions,
    list_transactions,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_acls,
    create_acls,
    delete_acls,
)


def _by_key(modules: tuple[Handler, ...]) -> dict[int, Handler]:
    table: dict[int, Handler] = {}
    for module in modules:
        key = module.SPEC.key
        if key in table:
            raise RuntimeError(f"two handler modules for API key {key}")
        table[key] = module
    return table


HANDLERS: dict[int, Handler] = _by_key(_MODULES)
