"""The producer's sender: one task that drains ready batches into Produce requests, one
per broker (up to ``max_in_flight`` each), and applies ``DeliveryPolicy``'s decision to
every batch that comes back unacknowledged. It also connects to brokers, drives the
background metadata refresh, registers a transaction's partitions, and obtains a new
producer id/epoch when the accumulator asks for one (KIP-360)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ..protocol.apis.init_producer_id import SPEC as INIT_PRODUCER_ID
from ..protocol.apis.init_producer_id import InitProducerIdRequest
from ..protocol.apis.produce import SPEC as PRODUCE
from ..protocol.apis.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceRequestTopicData,
    ProduceResponse,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from .accumulator import ProducerBatch, RecordAccumulator
from .cluster import Cluster
from .connection import BrokerConnection, UnsupportedApi
from .producer_config import INT32_MAX, ProducerConfig
from .producer_metadata import ProducerMetadata
from .producer_outcomes import BatchOutcomes
from .producer_policy import BatchDecision, DeliveryPolicy, Verdict
from .producer_transactions import ProducerTransactions
from .producer_types import ProducerClosedError, ProducerError
from .retry import Backoff, retry_async

# Produce v13 names topics by id; this producer names them.
NAMED_TOPICS_PRODUCE_MAX_VERSION = 12

log = logging.getLogger("slipstream.client.producer")

_monotonic = time.monotonic


class Sender:
    """The I/O side of the producer, on the loop ``run`` is started on."""

    def __init__(
        self,
        config: ProducerConfig,
        cluster: Cluster,
        acc: RecordAccumulator,
        backoff: Backoff,
        outcomes: BatchOutcomes,
    ) -> None:
        self._config = config
        self._acks = config.acks_int
        self.cluster = cluster
        self._acc = acc
        self._backoff = backoff
        self.outcomes = outcomes
        self.memory_waiters = outcomes.memory_waiters
        self.policy = DeliveryPolicy(
            retries=config.retries,
            delivery_timeout_ms=float(config.delivery_timeout_ms),
            backoff=backoff,
            idempotent=config.idempotent,
        )
        self.metadata = ProducerMetadata(
            cluster,
            backoff,
            max_age_ms=float(config.metadata_max_age_ms),
            max_block_ms=float(config.max_block_ms),
            topic_propagation_ms=float(config.topic_metadata_propagation_max_ms),
            wake=self.wake,
            spawn=self.spawn,
        )
        self.txns: ProducerTransactions | None = None
        self.stopping = False
        self._wake_fut: asyncio.Future[None] | None = None
        self.sleep_until = float("inf")
        """When the sender sleeps until; a new batch due earlier must wake it."""
        self.tasks: set[asyncio.Task[Any]] = set()
        self.bump_task: asyncio.Task[None] | None = None
        self._node_in_flight: dict[int, int] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: set[int] = set()
        self._node_retry_at: dict[int, float] = {}
        self._node_failures: dict[int, int] = {}

    def _now_ms(self) -> float:
        return _monotonic() * 1000

    async def init_producer_id(self, *, bump: bool = False) -> tuple[int, int]:
        async def attempt() -> tuple[int, int]:
            conn = await self.cluster.any_connection()
            version = conn.version_for(INIT_PRODUCER_ID)
            request = InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=INT32_MAX
            )
            if bump and version >= 3 and self._acc.producer_id >= 0:
                request.producer_id = self._acc.producer_id
                request.producer_epoch = self._acc.producer_epoch
            response = await conn.request(INIT_PRODUCER_ID, request, version=version)
            if response.error_code:
                raise KafkaError(response.error_code, f"InitProducerId failed on {conn.address}")
            return int(response.producer_id), int(response.producer_epoch)

        return await retry_async(
            attempt,
            backoff=self._backoff,
            timeout_s=self._config.max_block_ms / 1000,
            retriable=lambda exc: (
                not isinstance(exc, UnsupportedApi)
                and (
                    isinstance(exc, (ConnectionError, OSError))
                    or (isinstance(exc, KafkaError) and exc.retriable)
                )
            ),
        )

    async def _bump_epoch(self) -> None:
        attempt = 0
        try:
            while True:
                try:
                    pid, epoch = await self.init_producer_id(bump=True)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("could not obtain a new producer id (will retry): %s", exc)
                    await asyncio.sleep(self._backoff.delay_s(attempt))
                    attempt += 1
            old = (self._acc.producer_id, self._acc.producer_epoch)
            renumbered = self._acc.reset_producer(pid, epoch)
            log.info(
                "producer id/epoch %s/%s -> %s/%s; %d pending batches renumbered",
                old[0],
                old[1],
                pid,
                epoch,
                renumbered,
            )
        finally:
            self.bump_task = None
            self.wake()

    def wake(self) -> None:
        fut = self._wake_fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake_fut = loop.create_future()
            # Until we know when to wake up, any new batch (from another thread) wakes us.
            self.sleep_until = float("inf")
            now = _monotonic() * 1000
            try:
                wake_at = self._run_once(now)
            except Exception:
                log.exception("producer sender iteration failed")
                wake_at = now + 100
            if self.stopping:
                return
            if wake_at > now:
                self.sleep_until = wake_at
                handle = None
                if wake_at != float("inf"):
                    handle = loop.call_later((wake_at - now + 0.5) / 1000, self.wake)
                await self._wake_fut
                if handle is not None:
                    handle.cancel()
            else:
                await asyncio.sleep(0)

    def _run_once(self, now: float) -> float:
        acc = self._acc
        wake_at = float("inf")
        expired = acc.expire(now, self._config.delivery_timeout_ms)
        for batch in expired:
            self.outcomes.finish(batch, self.policy.timeout_error(batch, batch.last_error))
        # An exhausted buffer: send everything now (the Java client does too).
        acc.exhausted = bool(self.memory_waiters)
        leader_of = self.metadata.leader_of
        nodes, ready_at, unknown = acc.ready(now, leader_of)
        txns = self.txns
        if acc.bump_pending and self.bump_task is None and acc.bump_ready() and txns is None:
            # (A transactional producer bumps its epoch when it aborts, through its coordinator.)
            self.bump_task = asyncio.get_running_loop().create_task(self._bump_epoch())
        if txns is not None and txns.adding is None and acc.txn_partitions is not None:
            unregistered = acc.unregistered_partitions()
            if unregistered:
                txns.adding = self.spawn(txns.add_partitions(unregistered))
        wake_at = min(ready_at, self.metadata.poll(now, bool(unknown)))
        for node in nodes:
            conn = self._node_connection(node, now)
            if conn is None:
                retry_at = self._node_retry_at.get(node, 0.0)
                if retry_at > now:
                    wake_at = min(wake_at, retry_at)
                continue
            while self._node_in_flight.get(node, 0) < self._config.max_in_flight:
                batches = acc.drain(node, now, self._config.max_request_size, leader_of)
                if not batches:
                    break
                self._dispatch(node, conn, batches)
        if acc.incomplete:
            # Nothing else may wake us for a batch stuck without a leader: look again soon.
            wake_at = min(wake_at, now + 1000)
        return wake_at

    def _node_connection(self, node: int, now: float) -> BrokerConnection | None:
        conn = self._conns.get(node)
        if conn is not None and not conn.closed:
            return conn
        if node in self._connecting or now < self._node_retry_at.get(node, 0.0):
            return None
        self._connecting.add(node)
        self.spawn(self._connect(node))
        return None

    async def _connect(self, node: int) -> None:
        try:
            self._conns[node] = await self.cluster.connection(node)
            self._node_failures.pop(node, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures = self._node_failures.get(node, 0) + 1
            self._node_failures[node] = failures
            delay = self._backoff.delay_ms(failures - 1)
            self._node_retry_at[node] = self._now_ms() + delay
            self.metadata.wanted = True
            log.debug("cannot connect to broker %d (retrying in %.0f ms): %s", node, delay, exc)
        finally:
            self._connecting.discard(node)
            self.wake()

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _dispatch(self, node: int, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        by_topic: dict[str, list[ProduceRequestPartitionData]] = {}
        unbuilt = [b for b in batches if b.payload is None]
        if unbuilt:  # encoding failed (should not happen: records are checked in send)
            for batch in unbuilt:
                self.outcomes.fail(batch, batch.last_error or ProducerError("batch could not be built"))
            batches = [b for b in batches if b.payload is not None]
            if not batches:
                return
        for batch in batches:
            assert batch.payload is not None
            by_topic.setdefault(batch.topic, []).append(
                ProduceRequestPartitionData(
                    index=batch.partition, records=memoryview(batch.payload)
                )
            )
        request = ProduceRequest(
            transactional_id=self._config.transactional_id,
            acks=self._acks,
            timeout_ms=int(self._config.request_timeout_ms),
            topic_data=[
                ProduceRequestTopicData(name=t, partition_data=p) for t, p in by_topic.items()
            ],
        )
        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
        self.spawn(self._produce(node, conn, request, batches))

    async def _produce(
        self,
        node: int,
        conn: BrokerConnection,
        request: ProduceRequest,
        batches: list[ProducerBatch],
    ) -> None:
        try:
            try:
                response = await conn.request(
                    PRODUCE, request, expect_response=self._acks != 0, max_version=NAMED_TOPICS_PRODUCE_MAX_VERSION
                )
            except asyncio.CancelledError:
                closed = ProducerClosedError("the producer was closed before the broker answered")
                for batch in batches:
                    self._acc.complete(batch, acked=False)
                    self.outcomes.finish(batch, closed)
                raise
            except UnsupportedApi as exc:
                for batch in batches:
                    self.outcomes.fail(batch, exc)
            except KafkaError as exc:
                # The connection timed out (and was dropped): the broker may have the data.
                self._network_failure(batches, exc)
            except (ConnectionError, OSError) as exc:
                self._network_failure(batches, exc)
            else:
                if self._acks == 0:
                    for batch in batches:
                        self.outcomes.succeed(batch, -1, -1)
                else:
                    self._handle_response(batches, response)
        except Exception as exc:
            # Never leave a batch hanging, whatever went wrong.
            log.exception("unexpected failure handling a Produce request")
            for batch in batches:
                if batch.in_flight:
                    self.outcomes.fail(batch, exc)
        finally:
            self._node_in_flight[node] -= 1
            self.wake()

    def _network_failure(self, batches: list[ProducerBatch], exc: BaseException) -> None:
        now = self._now_ms()
        for batch in batches:
            self._apply(batch, self.policy.on_connection_lost(batch, exc, now, stopping=self.stopping), now)

    def _handle_response(self, batches: list[ProducerBatch], response: ProduceResponse) -> None:
        results: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            for part_response in topic.partition_responses:
                results[(topic.name, part_response.index)] = part_response
        now = self._now_ms()
        policy = self.policy
        for batch in batches:
            part = results.get((batch.topic, batch.partition))
            if part is not None and (part.error_code == 0 or part.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self.outcomes.succeed(batch, part.base_offset, part.log_append_time_ms)  # the common case, inline
                continue
            decision = policy.on_partition_result(
                batch, part, now, stopping=self.stopping, acked_end=self._acked_end(batch)
            )
            self._apply(batch, decision, now)

    def _acked_end(self, batch: ProducerBatch) -> int | None:
        """The sequence the broker should expect next on the batch's partition, if known."""
        ps = self._acc.partition_state(batch.topic, batch.partition)
        if ps is None or ps.gap or self._acc.bump_pending:
            return None
        return int(ps.acked_end)

    def _apply(self, batch: ProducerBatch, decision: BatchDecision, now: float) -> None:
        """Carry out the policy's decision for a batch that is not acknowledged."""
        acc = self._acc
        if decision.bump_epoch:
            acc.request_bump()
        if decision.refresh_metadata:
            self.metadata.wanted = True
        if decision.last_error is not None:
            batch.last_error = decision.last_error
        verdict = decision.verdict
        if verdict is Verdict.RETRY:
            log.debug("retrying %r in %.0f ms after %s", batch, decision.backoff_ms, decision.error)
            acc.reenqueue(batch, now, decision.backoff_ms, fate_unknown=decision.fate_unknown)
        elif verdict is Verdict.SPLIT:
            first, second = acc.split(batch, now)
            code = decision.error.code if isinstance(decision.error, KafkaError) else 0
            log.info(
                "%s for %r: split into batches of %d and %d records",
                error_name(code),
                batch,
                len(first.records),
                len(second.records),
            )
            self.outcomes.done(batch)
        else:
            assert verdict is Verdict.FAIL and decision.error is not None
            self.outcomes.fail(batch, decision.error)
