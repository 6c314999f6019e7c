"""Membership and offsets under injected faults: NOT_COORDINATOR answers, dropped
coordinator connections, concurrent commits. A real in-process broker; faults are
injected by wrapping the coordinator connection's ``request``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.classic_membership import GroupMembership
from slipstream.client.cluster import Cluster
from slipstream.client.connection import BrokerConnection, ConnectionClosed
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.coordinator_locator import CoordinatorLocator
from slipstream.client.membership_types import MemberState
from slipstream.client.offsets import GroupOffsets
from slipstream.protocol.apis.heartbeat import HeartbeatResponse
from slipstream.protocol.apis.join_group import JoinGroupResponse
from slipstream.protocol.apis.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from slipstream.protocol.apis.sync_group import SyncGroupResponse
from slipstream.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)

DEADLINE_S = 15.0


@contextlib.asynccontextmanager
async def member(
    partitions: int = 2, **settings: Any
) -> AsyncIterator[tuple[GroupMembership, GroupOffsets, CoordinatorLocator]]:
    async with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0,
                      group_min_session_timeout_ms=500) as b:
        cluster = Cluster(b.bootstrap_servers)
        await Admin(cluster).create_topic("t", partitions)
        config = ConsumerConfig(
            bootstrap_servers=b.bootstrap_servers, group_id="g", session_timeout_ms=3000,
            heartbeat_interval_ms=100, rebalance_timeout_ms=3000, retry_backoff_ms=10, retry_backoff_max_ms=100,
        )
        for key, value in settings.items():
            setattr(config, key, value)
        locator = CoordinatorLocator(cluster, config)
        membership = GroupMembership(cluster, config, locator=locator)
        offsets = GroupOffsets(locator, config, on_membership_error=membership.on_commit_error)
        membership.subscribe(["t"])
        try:
            yield membership, offsets, locator
        finally:
            await membership.close()
            await locator.close()
            await cluster.close()


class Faults:
    """Wraps every coordinator connection: ``answer(api_name, request)`` may return a fake response."""

    def __init__(self, locator: CoordinatorLocator, answer: Callable[[str, Any], Any | None]) -> None:
        self.answer = answer
        self.finds = 0
        self.calls: list[str] = []
        original_find = locator._find
        original_connect = BrokerConnection.connect
        faults = self

        async def find() -> Any:
            faults.finds += 1
            return await original_find()

        async def connect(conn: BrokerConnection) -> BrokerConnection:
            await original_connect(conn)
            original_request = conn.request

            async def request(spec: Any, req: Any, **kw: Any) -> Any:
                faults.calls.append(spec.name)
                fake = faults.answer(spec.name, req)
                if fake is not None:
                    return fake
                return await original_request(spec, req, **kw)

            conn.request = request  # type: ignore[method-assign]
            return conn

        locator._find = find  # type: ignore[method-assign]
        self._patch = pytest.MonkeyPatch()
        self._patch.setattr(BrokerConnection, "connect", connect)

    def undo(self) -> None:
        self._patch.undo()


async def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def test_not_coordinator_answers_make_the_member_rediscover_and_retry() -> None:
    async with member() as (m, _offsets, locator):
        remaining = {"JoinGroup": 2, "SyncGroup": 1}

        def answer(api: str, _req: Any) -> Any | None:
            if remaining.get(api, 0) > 0:
                remaining[api] -= 1
                if api == "JoinGroup":
                    return JoinGroupResponse(error_code=ErrorCode.NOT_COORDINATOR)
                return SyncGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return None

        faults = Faults(locator, answer)
        try:
            gen = await m.ensure_active(DEADLINE_S)
        finally:
            faults.undo()
        assert len(gen.assignment) == 2
        assert remaining == {"JoinGroup": 0, "SyncGroup": 0}
        assert faults.finds >= 4  # first lookup plus one per coordinator error


async def test_dropped_coordinator_connection_keeps_the_membership() -> None:
    async with member() as (m, offsets, locator):
        gen = await m.ensure_active(DEADLINE_S)
        for _ in range(3):
            conn = locator._conn
            assert conn is not None
            conn._fail(ConnectionClosed("test drops the coordinator connection"))
            await wait_until(lambda c=conn: locator.known and locator._conn is not c, "a new coordinator connection")
        # heartbeats resumed on the new connection; still the same generation, no rebalance
        hb = m.core.last_heartbeat_receive
        await wait_until(lambda: m.core.last_heartbeat_receive != hb, "a heartbeat answer")
        assert m.generation is not None and m.generation.generation_id == gen.generation_id
        assert m.rebalances == 1
        await offsets.commit({("t", 0): 5}, m.generation)
        assert (await offsets.fetch_committed([("t", 0)]))[("t", 0)].offset == 5  # type: ignore[union-attr]


async def test_heartbeat_unknown_member_id_makes_the_member_rejoin_with_a_new_id() -> None:
    # The coordinator still knows the old id and waits up to the rebalance timeout for it.
    async with member(rebalance_timeout_ms=800) as (m, _offsets, locator):
        gen = await m.ensure_active(DEADLINE_S)
        once = [True]

        def answer(api: str, _req: Any) -> Any | None:
            if api == "Heartbeat" and once[0]:
                once[0] = False
                return HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID)
            return None

        locator.mark_unknown("test: reconnect through the fault injector")
        faults = Faults(locator, answer)
        try:
            await wait_until(lambda: not once[0], "the faulty heartbeat")
            gen2 = await m.ensure_active(DEADLINE_S)
        finally:
            faults.undo()
        # UNKNOWN_MEMBER_ID: a fresh member id and a new generation
        assert gen2.member_id != gen.member_id
        assert gen2.generation_id > gen.generation_id
        assert m.state is MemberState.STABLE


async def test_commits_complete_in_call_order_and_coordinator_errors_are_retried() -> None:
    async with member() as (m, offsets, locator):
        gen = await m.ensure_active(DEADLINE_S)
        failures = [2]

        def answer(api: str, req: Any) -> Any | None:
            if api == "OffsetCommit" and failures[0] > 0:
                failures[0] -= 1
                return OffsetCommitResponse(topics=[OffsetCommitResponseTopic(name="t", partitions=[
                    OffsetCommitResponsePartition(partition_index=0, error_code=ErrorCode.NOT_COORDINATOR)
                ])])
            return None

        locator.mark_unknown("test: reconnect through the fault injector")
        faults = Faults(locator, answer)
        try:
            await asyncio.gather(*(offsets.commit({("t", 0): i}, gen) for i in range(1, 21)))
        finally:
            faults.undo()
        assert failures == [0]
        committed = await offsets.fetch_committed([("t", 0)])
        assert committed[("t", 0)] is not None and committed[("t", 0)].offset == 20  # type: ignore[union-attr]
        assert offsets.commits_sent == 22  # 20 commits, the first retried twice
