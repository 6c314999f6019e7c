"""Helpers for the in-process broker tests (imported by name; conftest puts this dir on sys.path)."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from slipstream.broker.broker import Broker
from slipstream.broker.groups import GroupCoordinatorAdapter
from slipstream.client.connection import BrokerConnection
from slipstream.coordinator.result import RequestContext
from slipstream.protocol.api import ApiSpec
from slipstream.protocol.apis import offset_commit as oc

TIMEOUT_S = 10.0
COMMIT_V9 = RequestContext(api_version=9, client_id="test", client_host="/127.0.0.1")


def quiet_admin(bootstrap: str, **extra: Any) -> AdminClient:
    # log_level 0 keeps librdkafka's "Disconnected" notices at broker shutdown out of the output.
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **extra})


def result(future: Future[Any]) -> Any:
    return future.result(TIMEOUT_S)


def create_topic(
    admin: AdminClient, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=TIMEOUT_S
    )
    for future in futures.values():
        result(future)


def error_of(excinfo: Any) -> Any:
    """The confluent_kafka.KafkaError inside a KafkaException."""
    exc = excinfo.value if hasattr(excinfo, "value") else excinfo
    assert isinstance(exc, KafkaException), exc
    return exc.args[0]


@contextlib.asynccontextmanager
async def raw_connection(bootstrap: str) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection(host, int(port), request_timeout_s=TIMEOUT_S).connect()
    try:
        yield conn
    finally:
        await conn.close()


async def raw_request_async(bootstrap: str, spec: ApiSpec, version: int, request: Any) -> Any:
    async with raw_connection(bootstrap) as conn:
        return await conn.request(spec, request, version=version)


def raw_request(broker: Broker, spec: ApiSpec, version: int, request: Any) -> Any:
    """One request at an exact version through slipstream's own connection layer
    (for versions and fields the third-party admin clients never send)."""
    # The listening address, not bootstrap_servers: that one is the advertised address.
    address = f"{broker.config.host}:{broker.port}"
    return asyncio.run(raw_request_async(address, spec, version, request))


def commit(group: str, partition: int, offset: int, topic: str = "t") -> oc.OffsetCommitRequest:
    """A standalone commit (no generation, no member), metadata "m": accepted for a group
    without members."""
    return oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            oc.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    oc.OffsetCommitRequestPartition(
                        partition_index=partition, committed_offset=offset, committed_metadata="m"
                    )
                ],
            )
        ],
    )


def codes(response: Any) -> list[int]:
    """The error code of every partition of an OffsetCommit or OffsetFetch answer, in order."""
    return [p.error_code for t in response.topics for p in t.partitions]


async def started(**settings: Any) -> tuple[Broker, GroupCoordinatorAdapter]:
    """An in-process broker with topic t (8 partitions) whose group coordinator has loaded."""
    broker = await Broker(port=0, group_initial_rebalance_delay_ms=0, **settings).start()
    assert broker.state is not None
    broker.state.topics.create("t", 8, {})
    adapter = broker.groups
    await adapter.loaded()
    assert not adapter.coordinator.is_loading
    return broker, adapter
