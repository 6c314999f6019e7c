"""Admin work does not starve other clients, and topic mutations can be throttled (KIP-599).

A CreateTopics naming a thousand topics is worked through in slices: another client's
request is answered while it is still creating. With ``controller.mutation.rate`` set,
partitions created or deleted count against the client's quota; newer versions are
refused with THROTTLING_QUOTA_EXCEEDED once it is in debt, older ones only told to wait.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_helpers import raw_connection
from test_hostile_connections import answered, until

from slipstream.broker.broker import Broker
from slipstream.broker.topics import OFFSETS_TOPIC
from slipstream.client.connection import BrokerConnection
from slipstream.protocol.apis import create_partitions as cp
from slipstream.protocol.apis import create_topics as ct
from slipstream.protocol.apis import delete_topics as dt
from slipstream.protocol.errors import BY_NAME, ErrorCode

THROTTLED = BY_NAME["THROTTLING_QUOTA_EXCEEDED"].code


def create_request(names: list[str], partitions: int = 1) -> ct.CreateTopicsRequest:
    return ct.CreateTopicsRequest(
        topics=[
            ct.CreateTopicsRequestTopic(name=n, num_partitions=partitions, replication_factor=-1, assignments=[], configs=[])
            for n in names
        ]
    )


def user_topics(b: Broker) -> int:
    return sum(1 for name in b.state.topics.topics if name != OFFSETS_TOPIC)


async def test_a_huge_create_topics_does_not_block_other_clients() -> None:
    async with Broker(storage="memory", port=0) as b:
        address = f"{b.config.host}:{b.port}"
        names = [f"many-{i}" for i in range(1000)]
        other = await asyncio.open_connection(b.config.host, b.port)
        async with raw_connection(address) as admin:
            creating = asyncio.create_task(admin.request(ct.SPEC, create_request(names), version=7))
            await until(lambda: user_topics(b) > 0, "creation started")
            assert await answered(*other, 1)
            assert user_topics(b) < len(names), "the other client waited for the whole request"
            response = await creating
        assert [t.error_code for t in response.topics] == [ErrorCode.NONE] * len(names)
        assert user_topics(b) == len(names)
        other[1].close()


async def test_topics_created_in_slices_are_all_saved(tmp_path: Path) -> None:
    names = [f"saved-{i}" for i in range(60)]
    async with Broker(storage="disk", data_dir=str(tmp_path), port=0) as b:
        async with raw_connection(f"{b.config.host}:{b.port}") as admin:
            response = await admin.request(ct.SPEC, create_request(names), version=7)
        assert {t.error_code for t in response.topics} == {ErrorCode.NONE}
        async with raw_connection(f"{b.config.host}:{b.port}") as admin:
            gone = await admin.request(dt.SPEC, dt.DeleteTopicsRequest(topic_names=names[:30], timeout_ms=1000), version=5)
        assert {t.error_code for t in gone.responses} == {ErrorCode.NONE}
    async with Broker(storage="disk", data_dir=str(tmp_path), port=0) as b:
        assert sorted(n for n in b.state.topics.topics if n != OFFSETS_TOPIC) == sorted(names[30:])


async def test_controller_mutation_rate_throttles_creates_and_deletes() -> None:
    # 2 partitions/s: a burst of 22, and a topic is refused only once the bucket is in debt
    async with Broker(storage="memory", port=0, controller_mutation_rate=2) as b:
        now = [b.state.clock()]
        b.state.clock = lambda: now[0]
        address = f"{b.config.host}:{b.port}"
        async with raw_connection(address) as admin:
            first = await admin.request(ct.SPEC, create_request([f"q{i}" for i in range(30)]), version=6)
            codes = [t.error_code for t in first.topics]
            assert codes == [ErrorCode.NONE] * 23 + [THROTTLED] * 7
            assert 0 < first.throttle_time_ms <= 1000
            assert user_topics(b) == 23
            # older versions are never refused, only told how long to wait
            legacy = await admin.request(ct.SPEC, create_request(["legacy"]), version=5)
            assert legacy.topics[0].error_code == ErrorCode.NONE and legacy.throttle_time_ms > 0
            more = await admin.request(
                cp.SPEC,
                cp.CreatePartitionsRequest(
                    topics=[cp.CreatePartitionsRequestTopic(name="q0", count=2, assignments=None)], timeout_ms=1000, validate_only=False
                ),
                version=3,
            )
            assert more.results[0].error_code == THROTTLED
            deleted = await admin.request(dt.SPEC, dt.DeleteTopicsRequest(topic_names=["q1"], timeout_ms=1000), version=5)
            assert deleted.responses[0].error_code == THROTTLED
            assert b.state.topics.get("q1") is not None
            # the quota is per client id: another client is not held back by this one's debt
            other = await BrokerConnection(b.config.host, b.port, client_id="another", request_timeout_s=10).connect()
            try:
                elsewhere = await other.request(ct.SPEC, create_request(["elsewhere"]), version=6)
            finally:
                await other.close()
            assert elsewhere.topics[0].error_code == ErrorCode.NONE
            # the debt is paid with time: then mutations go through again
            now[0] += 2_000
            later = await admin.request(ct.SPEC, create_request(["after"]), version=6)
            assert later.topics[0].error_code == ErrorCode.NONE
