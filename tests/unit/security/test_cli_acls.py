"""``slipstream acls`` against an in-process broker with the ACL authorizer, over SASL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slipstream.broker.broker import Broker
from slipstream.cli import main
from slipstream.protocol.acl_types import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with Broker(
        storage="memory", port=0, listeners="SASL_PLAINTEXT://127.0.0.1:0", scram_bootstrap_users="admin:pw,alice:pw",
        authorizer="acl", super_users="User:admin",
    ) as b:
        yield b


def command_config(tmp_path: Path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={user}\nsasl.password=pw\n"
    )
    return str(path)


async def run(*argv: str) -> int:
    # The CLI runs its own event loop: in a thread beside the broker's.
    return await asyncio.to_thread(main, list(argv))


async def test_add_list_remove(broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert broker.state is not None and broker.state.authorizer is not None
    target = ["-b", broker.bootstrap_for("SASL_PLAINTEXT"), "--command-config", command_config(tmp_path, "admin")]
    assert await run("acls", "add", "--allow-principal", "User:alice", "--operation", "Read",
                     "--operation", "describe-configs", "--topic", "orders", *target) == 0
    assert await run("acls", "add", "--allow-principal", "User:alice", "--consumer", "--topic", "pay",
                     "--group", "billing", "--resource-pattern-type", "prefixed", *target) == 0
    assert await run("acls", "add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9", "--operation", "All",
                     "--cluster", *target) == 0
    lit, pre = PatternType.LITERAL, PatternType.PREFIXED
    topic, group, cluster = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
    allow = Permission.ALLOW
    assert set(broker.state.authorizer.bindings()) == {
        AclBinding(topic, "orders", lit, "User:alice", "*", Operation.READ, allow),
        AclBinding(topic, "orders", lit, "User:alice", "*", Operation.DESCRIBE_CONFIGS, allow),
        AclBinding(topic, "pay", pre, "User:alice", "*", Operation.READ, allow),
        AclBinding(topic, "pay", pre, "User:alice", "*", Operation.DESCRIBE, allow),
        AclBinding(group, "billing", pre, "User:alice", "*", Operation.READ, allow),
        AclBinding(cluster, "kafka-cluster", lit, "User:*", "10.0.0.9", Operation.ALL, Permission.DENY),
    }
    capsys.readouterr()
    assert await run("acls", "list", "--topic", "orders", *target) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 3 and all("Topic:orders" in line for line in listing[1:])
    assert "DescribeConfigs" in listing[2] or "DescribeConfigs" in listing[1]
    assert await run("acls", "list", "--principal", "User:*", *target) == 0
    assert "Cluster:kafka-cluster" in capsys.readouterr().out

    assert await run("acls", "remove", "--allow-principal", "User:alice", "--topic", "pay",
                     "--resource-pattern-type", "prefixed", *target) == 0
    assert "removed 2 ACLs" in capsys.readouterr().out
    assert await run("acls", "remove", *target) == 1  # nothing named: refused, nothing removed
    assert len(broker.state.authorizer.bindings()) == 4

    # alice may not change ACLs: the broker's refusal is the command's error.
    as_alice = ["-b", broker.bootstrap_for("SASL_PLAINTEXT"), "--command-config", command_config(tmp_path, "alice")]
    assert await run("acls", "add", "--allow-principal", "User:alice", "--operation", "All", "--cluster", *as_alice) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err
    assert len(broker.state.authorizer.bindings()) == 4
