"""One module per API, named in ``API_TABLE`` and imported on the API's first request.

Each module declares ``SPEC`` (the protocol ApiSpec), ``MIN_VERSION``, ``MAX_VERSION``
and ``async def handle(ctx, request)``. The table repeats each module's version range so
the ApiVersions answer needs no handler module: a serving broker imports only the
handlers of the APIs its clients use, and its first answer waits for none of the others.
tests/unit/broker/test_handler_table.py checks the table against the modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable
from typing import Any, Protocol

from ...protocol.api import ApiSpec
from ..request_context import RequestContext


class Handler(Protocol):
    """What a handler module provides (a module satisfies this protocol)."""

    SPEC: ApiSpec
    MIN_VERSION: int
    MAX_VERSION: int

    def handle(self, ctx: RequestContext, request: Any, /) -> Awaitable[Any]: ...


class ApiEntry:
    """An API's row of the table. (A plain class: making a NamedTuple class costs a start
    about 0.3 ms.)"""

    __slots__ = ("max_version", "min_version", "module", "name")

    def __init__(self, name: str, module: str, min_version: int, max_version: int) -> None:
        self.name = name  # the API's name in the protocol (SPEC.name)
        self.module = module  # its handler module in this package
        self.min_version = min_version
        self.max_version = max_version

    def __repr__(self) -> str:
        return f"ApiEntry({self.name!r}, {self.module!r}, {self.min_version}, {self.max_version})"


# API key -> its handler module and the versions it serves.
API_TABLE: dict[int, ApiEntry] = {
    0: ApiEntry("Produce", "produce", 3, 13),
    1: ApiEntry("Fetch", "fetch", 4, 18),
    2: ApiEntry("ListOffsets", "list_offsets", 1, 11),
    3: ApiEntry("Metadata", "metadata", 0, 13),
    8: ApiEntry("OffsetCommit", "offset_commit", 0, 10),
    9: ApiEntry("OffsetFetch", "offset_fetch", 0, 10),
    10: ApiEntry("FindCoordinator", "find_coordinator", 0, 6),
    11: ApiEntry("JoinGroup", "join_group", 0, 9),
    12: ApiEntry("Heartbeat", "heartbeat", 0, 4),
    13: ApiEntry("LeaveGroup", "leave_group", 0, 5),
    14: ApiEntry("SyncGroup", "sync_group", 0, 5),
    15: ApiEntry("DescribeGroups", "describe_groups", 0, 6),
    16: ApiEntry("ListGroups", "list_groups", 0, 5),
    17: ApiEntry("SaslHandshake", "sasl_handshake", 0, 1),
    18: ApiEntry("ApiVersions", "api_versions", 0, 4),
    19: ApiEntry("CreateTopics", "create_topics", 2, 7),
    20: ApiEntry("DeleteTopics", "delete_topics", 1, 6),
    21: ApiEntry("DeleteRecords", "delete_records", 0, 2),
    22: ApiEntry("InitProducerId", "init_producer_id", 0, 6),
    24: ApiEntry("AddPartitionsToTxn", "add_partitions_to_txn", 0, 5),
    25: ApiEntry("AddOffsetsToTxn", "add_offsets_to_txn", 0, 4),
    26: ApiEntry("EndTxn", "end_txn", 0, 4),
    27: ApiEntry("WriteTxnMarkers", "write_txn_markers", 0, 1),
    28: ApiEntry("TxnOffsetCommit", "txn_offset_commit", 0, 4),
    29: ApiEntry("DescribeAcls", "describe_acls", 0, 3),
    30: ApiEntry("CreateAcls", "create_acls", 0, 3),
    31: ApiEntry("DeleteAcls", "delete_acls", 0, 3),
    32: ApiEntry("DescribeConfigs", "describe_configs", 1, 4),
    33: ApiEntry("AlterConfigs", "alter_configs", 0, 2),
    35: ApiEntry("DescribeLogDirs", "describe_log_dirs", 1, 5),
    36: ApiEntry("SaslAuthenticate", "sasl_authenticate", 0, 2),
    37: ApiEntry("CreatePartitions", "create_partitions", 0, 3),
    42: ApiEntry("DeleteGroups", "delete_groups", 0, 2),
    44: ApiEntry("IncrementalAlterConfigs", "incremental_alter_configs", 0, 1),
    47: ApiEntry("OffsetDelete", "offset_delete", 0, 0),
    50: ApiEntry("DescribeUserScramCredentials", "describe_user_scram_credentials", 0, 0),
    51: ApiEntry("AlterUserScramCredentials", "alter_user_scram_credentials", 0, 0),
    60: ApiEntry("DescribeCluster", "describe_cluster", 0, 1),
    61: ApiEntry("DescribeProducers", "describe_producers", 0, 0),
    65: ApiEntry("DescribeTransactions", "describe_transactions", 0, 0),
    66: ApiEntry("ListTransactions", "list_transactions", 0, 1),
    68: ApiEntry("ConsumerGroupHeartbeat", "consumer_group_heartbeat", 0, 1),
    69: ApiEntry("ConsumerGroupDescribe", "consumer_group_describe", 0, 1),
    75: ApiEntry("DescribeTopicPartitions", "describe_topic_partitions", 0, 0),
}


def load_handler(api_key: int) -> Handler:
    """The handler module of ``api_key`` (a key in API_TABLE), imported on first use."""
    module: Handler = importlib.import_module(f"{__name__}.{API_TABLE[api_key].module}")
    return module


def api_name(api_key: int) -> str:
    """The protocol name of an API (the key as text when no handler serves it)."""
    entry = API_TABLE.get(api_key)
    return entry.name if entry is not None else str(api_key)


def all_handlers() -> dict[int, Handler]:
    """Every handler module by API key (imports them all: tools and tests, not serving)."""
    return {key: load_handler(key) for key in API_TABLE}
