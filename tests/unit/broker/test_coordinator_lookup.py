"""FindCoordinator during a group's initial rebalance delay counts as a member on its way.

The coordinator's rule is unit-tested on the manual clock (test_coordinator_join_group);
this checks the broker wires the lookups (v0-3 single key, v4+ batched keys) to it.
"""

from __future__ import annotations

import asyncio

import pytest
from broker_helpers import raw_connection

from slipstream.broker.broker import Broker
from slipstream.coordinator.state import GroupState
from slipstream.protocol.apis import find_coordinator as fc
from slipstream.protocol.apis import join_group as jg
from slipstream.protocol.errors import ErrorCode


def join(group: str, member_id: str = "") -> jg.JoinGroupRequest:
    return jg.JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=30_000, member_id=member_id,
        protocol_type="consumer", protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )


@pytest.mark.parametrize("version", [3, 4])
async def test_a_lookup_during_the_initial_delay_extends_it(version: int) -> None:
    # A 4 s delay: the first wait (1 s) cannot end while the test looks.
    broker = await Broker(port=0, storage="memory", group_initial_rebalance_delay_ms=4_000).start()
    try:
        adapter = broker.groups
        for _ in range(500):
            if not adapter.coordinator.is_loading:
                break
            await asyncio.sleep(0.01)
        async with raw_connection(broker.bootstrap_servers) as member, raw_connection(broker.bootstrap_servers) as other:
            first = await member.request(jg.SPEC, join("g"), version=5)
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
            parked = asyncio.ensure_future(member.request(jg.SPEC, join("g", first.member_id), version=5))
            group = None
            for _ in range(200):
                group = adapter.coordinator.group("g")
                if group is not None and group.state is GroupState.PREPARING_REBALANCE:
                    break
                await asyncio.sleep(0.005)
            assert group is not None and group.state is GroupState.PREPARING_REBALANCE
            assert not group.new_member_added

            request = (fc.FindCoordinatorRequest(key_type=0, coordinator_keys=["x", "g"]) if version >= 4
                       else fc.FindCoordinatorRequest(key="g", key_type=0))
            await other.request(fc.SPEC, request, version=version)
            assert group.new_member_added  # the wait will be extended by a full delay
            assert not parked.done()
            parked.cancel()
    finally:
        await broker.stop()
