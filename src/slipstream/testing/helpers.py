"""Helpers for tests against a broker: create a topic, read a topic to its end.

Blocking functions, usable from plain and from async tests (each runs its client on a
private thread, so an event loop already running in the caller is no obstacle).
They take a bootstrap string or anything with ``bootstrap_servers`` (the fixtures'
brokers), and work against any Kafka-compatible broker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from ..client.admin import Admin
from ..client.consumer import Consumer
from ..client.consumer_messages import Message
from ..client.log_offsets_admin import EARLIEST, LATEST
from ..client.serde import Deserializer
from ..protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")

__all__ = ["create_topic", "read_to_end"]


class HasBootstrap(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...


def _bootstrap(target: str | HasBootstrap) -> str:
    return target if isinstance(target, str) else target.bootstrap_servers


def _run(coro: Coroutine[Any, Any, T]) -> T:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def create_topic(
    broker: str | HasBootstrap,
    name: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    *,
    exist_ok: bool = False,
) -> None:
    """Create ``name`` with ``partitions`` partitions (and topic ``configs``)."""

    async def go() -> None:
        async with Admin(_bootstrap(broker)) as admin:
            try:
                await admin.create_topic(name, partitions, configs=configs)
            except KafkaError as exc:
                if not (exist_ok and exc.code == ErrorCode.TOPIC_ALREADY_EXISTS):
                    raise

    _run(go())


def read_to_end(
    broker: str | HasBootstrap,
    topic: str,
    *,
    timeout_s: float = 10.0,
    key_deserializer: Deserializer | None = None,
    value_deserializer: Deserializer | None = None,
) -> list[Message]:
    """Every record of ``topic`` from its start to its end as of the call, partition by
    partition in offset order. TimeoutError if they do not all arrive in ``timeout_s``."""
    bootstrap = _bootstrap(broker)

    async def bounds() -> dict[tuple[str, int], tuple[int, int]]:
        async with Admin(bootstrap) as admin:
            info = await admin.describe_topic(topic)
            parts = [(topic, p) for p in range(info.partition_count)]
            starts = await admin.log_offsets(parts, EARLIEST)
            ends = await admin.log_offsets(parts, LATEST)
        out = {}
        for tp in parts:
            start, end = starts[tp], ends[tp]
            if isinstance(start, KafkaError):
                raise start
            if isinstance(end, KafkaError):
                raise end
            out[tp] = (start, end)
        return out

    wanted = {tp: span for tp, span in _run(bounds()).items() if span[1] > span[0]}
    if not wanted:
        return []
    by_partition: dict[tuple[str, int], list[Message]] = {tp: [] for tp in wanted}
    deadline = time.monotonic() + timeout_s
    with Consumer(
        bootstrap,
        client_id="slipstream-read-to-end",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        key_deserializer=key_deserializer,
        value_deserializer=value_deserializer,
    ) as consumer:
        consumer.assign(wanted)
        consumer.seek_to_beginning(list(wanted))
        todo = set(wanted)
        while todo:
            left = deadline - time.monotonic()
            if left <= 0:
                got = sum(len(v) for v in by_partition.values())
                raise TimeoutError(f"read {got} records of {topic!r} in {timeout_s} s; the end was not reached")
            for message in consumer.poll(min(left, 0.5)):
                tp = (message.topic, message.partition)
                end = wanted[tp][1]
                if message.offset < end:
                    by_partition[tp].append(message)
                if message.offset >= end - 1:
                    todo.discard(tp)
            for tp in list(todo):
                if consumer.position(tp) >= wanted[tp][1]:
                    todo.discard(tp)  # the last offsets held control records or were compacted
    return [m for tp in sorted(by_partition) for m in by_partition[tp]]
