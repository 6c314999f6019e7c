"""Per-group configs (config resource GROUP, 32): a consumer group's session timeout and
heartbeat interval, described, altered, validated, persisted, and used by the coordinator."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from broker_helpers import error_of, quiet_admin, raw_request, result
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from slipstream.broker.broker import Broker
from slipstream.protocol.apis import consumer_group_heartbeat as cgh

pytestmark = pytest.mark.timeout(30)

SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"


def describe_group(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    futures = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    return {k: (v.value, v.source) for k, v in result(next(iter(futures.values()))).items()}


def alter_group(admin: AdminClient, group: str, *changes: tuple[str, str | None, AlterConfigOpType]) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in changes]
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)])
    result(next(iter(futures.values())))


def test_describe_alter_and_delete_a_group_config(admin: AdminClient) -> None:
    # Any group id, existing or not: the broker's group.consumer.* settings (STATIC_BROKER_CONFIG).
    assert describe_group(admin, "g") == {SESSION: ("45000", 4), HEARTBEAT: ("5000", 4)}
    alter_group(admin, "g", (SESSION, "50000", AlterConfigOpType.SET))
    assert describe_group(admin, "g") == {SESSION: ("50000", 8), HEARTBEAT: ("5000", 4)}  # GROUP_CONFIG
    assert describe_group(admin, "other")[SESSION] == ("45000", 4)
    alter_group(admin, "g", (SESSION, None, AlterConfigOpType.DELETE))
    assert describe_group(admin, "g")[SESSION] == ("45000", 4)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (((SESSION, "1000", AlterConfigOpType.SET),), "between 45000"),
        (((HEARTBEAT, "99999", AlterConfigOpType.SET),), "between 5000"),
        (((SESSION, "soon", AlterConfigOpType.SET),), "must be an integer"),
        ((("consumer.rebalance.ms", "1", AlterConfigOpType.SET),), "unknown group config"),
        (((SESSION, "1", AlterConfigOpType.APPEND),), "not a list config"),
    ],
)
def test_bad_group_configs_are_refused(admin: AdminClient, changes: tuple, message: str) -> None:
    with pytest.raises(KafkaException) as excinfo:
        alter_group(admin, "g", *changes)
    error = error_of(excinfo)
    assert error.code() == KafkaError.INVALID_CONFIG
    assert message in error.str()
    assert describe_group(admin, "g")[SESSION] == ("45000", 4)


def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path), port=0) as broker:
        alter_group(quiet_admin(broker.bootstrap_servers), "kept", (SESSION, "55000", AlterConfigOpType.SET))
    with Broker(data_dir=str(tmp_path), port=0) as broker:
        assert describe_group(quiet_admin(broker.bootstrap_servers), "kept")[SESSION] == ("55000", 8)


def test_the_coordinator_gives_members_their_groups_interval() -> None:
    with Broker(storage="memory", port=0, group_consumer_min_heartbeat_interval_ms=10) as broker:
        admin = quiet_admin(broker.bootstrap_servers)
        alter_group(admin, "fast", (HEARTBEAT, "50", AlterConfigOpType.SET))

        def join(group: str) -> int:
            request = cgh.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30_000,
                subscribed_topic_names=["t"], topic_partitions=[],
            )
            response = raw_request(broker, cgh.SPEC, 1, request)
            assert response.error_code == 0
            return int(response.heartbeat_interval_ms)

        assert join("fast") == 50  # its own interval, shorter than the rebalancing one
        assert join("default") == 200


def test_the_heartbeat_budget_reaches_the_coordinator_and_is_validated() -> None:
    with Broker(storage="memory", port=0) as broker:
        assert broker.groups is not None
        assert broker.groups.config.consumer_group_heartbeat_budget_per_s == 200  # the default
    with Broker(storage="memory", port=0, group_consumer_heartbeat_budget_per_sec=0) as broker:
        assert broker.groups is not None
        assert broker.groups.config.consumer_group_heartbeat_budget_per_s == 0
    with pytest.raises(ValueError, match=r"group\.consumer\.heartbeat\.budget\.per\.sec must be >= 0"):
        Broker(storage="memory", port=0, group_consumer_heartbeat_budget_per_sec=-1)


def test_the_reconciling_heartbeat_budget_reaches_the_coordinator_and_is_validated() -> None:
    with Broker(storage="memory", port=0) as broker:
        assert broker.groups is not None
        assert broker.groups.config.consumer_group_reconciling_heartbeat_budget_per_s == 1_000  # the default
    with Broker(storage="memory", port=0, group_consumer_reconciling_heartbeat_budget_per_sec=0) as broker:
        assert broker.groups is not None
        assert broker.groups.config.consumer_group_reconciling_heartbeat_budget_per_s == 0
    with pytest.raises(ValueError, match=r"group\.consumer\.reconciling\.heartbeat\.budget\.per\.sec must be >= 0"):
        Broker(storage="memory", port=0, group_consumer_reconciling_heartbeat_budget_per_sec=-1)
