"""The producer's sans-I/O core on a manual clock: DeliveryPolicy's decision per batch,
ProducerConfig's validation, and ProducerMetadata's wait for a topic."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.client.accumulator import ProducerBatch
from slipstream.client.cluster import TopicInfo
from slipstream.client.producer_config import ProducerConfig, producer_config_from
from slipstream.client.producer_metadata import ProducerMetadata
from slipstream.client.producer_policy import DeliveryPolicy, Verdict, result_error
from slipstream.client.producer_types import DeliveryTimeoutError, ProducerClosedError
from slipstream.client.retry import Backoff
from slipstream.protocol.errors import ErrorCode, KafkaError

NO_JITTER = Backoff(100, 1000, jitter=0)
NOT_ENOUGH_REPLICAS = 19
TOPIC_AUTHORIZATION_FAILED = 29


def policy(*, retries: int = 10, delivery_timeout_ms: float = 400, idempotent: bool = True) -> DeliveryPolicy:
    return DeliveryPolicy(
        retries=retries, delivery_timeout_ms=delivery_timeout_ms, backoff=NO_JITTER, idempotent=idempotent
    )


def batch(records: int = 1, *, attempts: int = 1, created_ms: float = 0, base_sequence: int = 0) -> ProducerBatch:
    b = ProducerBatch("t", 3, created_ms, 0)
    b.records = [(None, b"v", (), 1000)] * records
    b.attempts = attempts
    b.base_sequence = base_sequence
    return b


def result(code: int = 0, message: str | None = None, record_errors: list[Any] | None = None) -> Any:
    return SimpleNamespace(error_code=code, error_message=message, record_errors=record_errors or [])


def decide(p: DeliveryPolicy, b: ProducerBatch, code: int, now: float = 10, **kw: Any) -> Any:
    kw.setdefault("stopping", False)
    kw.setdefault("acked_end", None)
    return p.on_partition_result(b, result(code), now, **kw)


# --------------------------------------------------------------------------- answers


def test_success_and_duplicate_sequence_succeed() -> None:
    p = policy()
    assert decide(p, batch(), 0).verdict is Verdict.SUCCEED
    # the broker holds the batch already: that is a success too
    assert decide(p, batch(), ErrorCode.DUPLICATE_SEQUENCE_NUMBER).verdict is Verdict.SUCCEED


def test_a_missing_partition_in_the_response_fails_the_batch() -> None:
    d = policy().on_partition_result(batch(), None, 10, stopping=False, acked_end=None)
    assert d.verdict is Verdict.FAIL
    assert isinstance(d.error, KafkaError) and d.error.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "t-3" in str(d.error)


def test_retriable_error_retries_with_backoff_and_refreshes_metadata() -> None:
    d = decide(policy(), batch(attempts=1), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert d.verdict is Verdict.RETRY
    assert d.backoff_ms == 100 and d.refresh_metadata and not d.bump_epoch
    assert d.fate_unknown is None  # a refusal says nothing about earlier attempts
    assert isinstance(d.last_error, KafkaError) and d.last_error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # the backoff grows with the retries used, up to the cap
    assert decide(policy(), batch(attempts=3), ErrorCode.NOT_LEADER_OR_FOLLOWER).backoff_ms == 400
    assert decide(policy(), batch(attempts=9), ErrorCode.NOT_LEADER_OR_FOLLOWER).backoff_ms == 1000


def test_a_timeout_answer_may_have_written_the_batch() -> None:
    d = decide(policy(), batch(), ErrorCode.REQUEST_TIMED_OUT)
    assert d.verdict is Verdict.RETRY and d.fate_unknown is True


def test_retries_limit_fails_with_the_broker_error() -> None:
    p = policy(retries=2)
    assert decide(p, batch(attempts=2), ErrorCode.NOT_LEADER_OR_FOLLOWER).verdict is Verdict.RETRY
    d = decide(p, batch(attempts=3), ErrorCode.NOT_LEADER_OR_FOLLOWER)  # first try + 2 retries
    assert d.verdict is Verdict.FAIL
    assert isinstance(d.error, KafkaError) and d.error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_delivery_timeout_bounds_retries() -> None:
    p = policy(delivery_timeout_ms=400)
    b = batch(created_ms=1000, attempts=4)
    assert decide(p, b, NOT_ENOUGH_REPLICAS, now=1399).verdict is Verdict.RETRY
    d = decide(p, b, NOT_ENOUGH_REPLICAS, now=1400)
    assert d.verdict is Verdict.FAIL and isinstance(d.error, DeliveryTimeoutError)
    assert d.error.code == ErrorCode.REQUEST_TIMED_OUT
    assert "NOT_ENOUGH_REPLICAS" in str(d.error) and "after 4 attempt(s)" in str(d.error)
    assert "delivery_timeout_ms=400" in str(d.error)


def test_timeout_error_says_when_the_broker_may_have_the_records() -> None:
    b = batch(records=2)
    b.fate_unknown = True
    error = policy().timeout_error(b, None)
    assert "2 record(s) for t-3" in str(error) and "may or may not have written" in str(error)


def test_closing_fails_a_retry_with_producer_closed() -> None:
    d = decide(policy(), batch(), ErrorCode.NOT_LEADER_OR_FOLLOWER, stopping=True)
    assert d.verdict is Verdict.FAIL and isinstance(d.error, ProducerClosedError)


def test_not_retried_and_fatal_errors_fail_at_once() -> None:
    for code in (ErrorCode.CORRUPT_MESSAGE, TOPIC_AUTHORIZATION_FAILED):
        d = decide(policy(), batch(), code)
        assert d.verdict is Verdict.FAIL and not d.refresh_metadata
        assert isinstance(d.error, KafkaError) and d.error.code == code


def test_too_large_splits_until_single_records() -> None:
    p = policy()
    d = decide(p, batch(records=4), ErrorCode.MESSAGE_TOO_LARGE)
    assert d.verdict is Verdict.SPLIT
    assert decide(p, batch(records=1), ErrorCode.MESSAGE_TOO_LARGE).verdict is Verdict.FAIL
    assert decide(p, batch(records=4), ErrorCode.MESSAGE_TOO_LARGE, stopping=True).verdict is Verdict.FAIL
    maybe_written = batch(records=4)
    maybe_written.fate_unknown = True  # splitting would change what the broker may hold
    assert decide(p, maybe_written, ErrorCode.RECORD_LIST_TOO_LARGE).verdict is Verdict.FAIL


def test_unknown_producer_id_bumps_the_epoch_and_retries_without_counting() -> None:
    d = decide(policy(retries=0), batch(attempts=5), ErrorCode.UNKNOWN_PRODUCER_ID)
    assert d.verdict is Verdict.RETRY and d.bump_epoch and d.fate_unknown is False


def test_out_of_order_after_a_missing_batch_retries_in_order() -> None:
    # the broker expects sequence 5; this batch starts at 10: an earlier one is missing
    d = decide(policy(retries=0), batch(attempts=3, base_sequence=10), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, acked_end=5)
    assert d.verdict is Verdict.RETRY and d.fate_unknown is False
    # no known state (a local gap or a new epoch pending): also retried
    d = decide(policy(), batch(base_sequence=10), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, acked_end=None)
    assert d.verdict is Verdict.RETRY


def test_out_of_order_for_the_expected_batch_means_lost_data() -> None:
    d = decide(policy(), batch(base_sequence=5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, acked_end=5)
    assert d.verdict is Verdict.FAIL
    assert isinstance(d.error, KafkaError) and d.error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "acknowledged records may have been lost" in str(d.error)


def test_sequence_errors_without_idempotence_are_plain_errors() -> None:
    d = decide(policy(idempotent=False), batch(), ErrorCode.UNKNOWN_PRODUCER_ID)
    assert not d.bump_epoch


def test_lost_connection_retries_as_maybe_written() -> None:
    d = policy().on_connection_lost(batch(), ConnectionResetError("reset"), 10, stopping=False)
    assert d.verdict is Verdict.RETRY and d.fate_unknown is True and d.refresh_metadata
    assert isinstance(d.error, KafkaError) and d.error.code == ErrorCode.NETWORK_EXCEPTION
    assert "connection lost: reset" in str(d.error)
    timed_out = KafkaError(ErrorCode.REQUEST_TIMED_OUT, "no answer")
    assert policy().on_connection_lost(batch(), timed_out, 10, stopping=False).error is timed_out


def test_record_errors_are_part_of_the_message() -> None:
    errors = [SimpleNamespace(batch_index=2, batch_index_error_message="bad key")]
    error = result_error(result(ErrorCode.INVALID_RECORD, None, errors))
    assert error is not None and error.code == ErrorCode.INVALID_RECORD
    assert "record 2: bad key" in str(error)
    assert result_error(result(0)) is None


# --------------------------------------------------------------------------- config


def test_config_resolves_acks_and_idempotence() -> None:
    config = producer_config_from("h:1", {"acks": "all"})
    assert config.acks == -1 and config.idempotent and not config.explicit_idempotence
    assert not producer_config_from("h:1", {"acks": 1}).idempotent
    assert not producer_config_from("h:1", {"max_in_flight": 6}).idempotent
    txn = producer_config_from("h:1", {"transactional_id": "tx"})
    assert txn.idempotent and txn.explicit_idempotence


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"acks": 2}, "acks"),
        ({"enable_idempotence": True, "acks": 1}, "requires acks=-1"),
        ({"enable_idempotence": True, "max_in_flight": 6}, "max_in_flight <= 5"),
        ({"transactional_id": ""}, "must not be empty"),
        ({"transactional_id": "tx", "enable_idempotence": False}, "cannot be False"),
        ({"batch_size": 0}, "positive"),
        ({"max_in_flight": 0}, "at least 1"),
        ({"delivery_timeout_ms": 0}, "timeouts > 0"),
        ({"partitioner": "nope"}, "partitioner must be one of"),
    ],
)
def test_config_rejects_bad_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        producer_config_from("h:1", settings)


def test_config_names_unknown_settings() -> None:
    with pytest.raises(TypeError, match="linger_msec"):
        producer_config_from("h:1", {"linger_msec": 5})


def test_max_record_size_is_the_smaller_bound() -> None:
    small_buffer = ProducerConfig(buffer_memory=1000, max_request_size=5000).validate()
    assert 0 < small_buffer.max_record_size < 1000


# --------------------------------------------------------------------------- metadata wait


class FakeCluster:
    """Answers every metadata request with ``codes[topic]`` (0: the topic exists)."""

    def __init__(self, codes: dict[str, int]) -> None:
        self.codes = codes
        self.topics: dict[str, TopicInfo] = {}
        self.requests = 0

    async def refresh_metadata(self, topics: list[str], *, allow_auto_create: bool = False) -> dict[str, TopicInfo]:
        self.requests += 1
        out = {}
        for name in topics:
            code = self.codes.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            info = TopicInfo(name, None, code, False, {0: 1} if code == 0 else {})  # type: ignore[arg-type]
            out[name] = info
            if code == 0:
                self.topics[name] = info
        return out


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def metadata(cluster: FakeCluster, clock: ManualClock, *, propagation_ms: float = 5000, max_block_ms: float = 60_000) -> ProducerMetadata:
    return ProducerMetadata(
        cluster,  # type: ignore[arg-type]
        NO_JITTER,
        max_age_ms=300_000,
        max_block_ms=max_block_ms,
        topic_propagation_ms=propagation_ms,
        wake=lambda: None,
        spawn=lambda coro: None,
        clock=clock,
        sleep=clock.sleep,
    )


def test_unknown_topic_fails_after_the_propagation_time() -> None:
    clock = ManualClock()
    cluster = FakeCluster({})
    md = metadata(cluster, clock, propagation_ms=200)
    with pytest.raises(KafkaError) as info:
        asyncio.run(md.wait_for_topic("no-such-topic", None, deadline=60.0))
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "no-such-topic" in str(info.value)
    assert 0.2 <= clock.now < 0.2 + NO_JITTER.max_ms / 1000  # not before, and no later than one backoff
    assert cluster.requests >= 2


def test_retriable_topic_error_waits_until_max_block() -> None:
    clock = ManualClock()
    cluster = FakeCluster({"t": ErrorCode.LEADER_NOT_AVAILABLE})
    md = metadata(cluster, clock, max_block_ms=3000)
    with pytest.raises(KafkaError) as info:
        asyncio.run(md.wait_for_topic("t", None, deadline=3.0))
    assert info.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert "LEADER_NOT_AVAILABLE" in str(info.value)
    assert clock.now == 3.0


def test_a_known_topic_returns_at_once_and_a_missing_partition_is_named() -> None:
    clock = ManualClock()
    md = metadata(FakeCluster({"t": 0}), clock)
    asyncio.run(md.wait_for_topic("t", 0, deadline=60.0))
    with pytest.raises(KafkaError, match="partition 5 does not exist"):
        asyncio.run(md.wait_for_topic("t", 5, deadline=60.0))
    assert clock.now == 0.0


# --------------------------------------------------------------------------- send's memory wait


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a manual clock: when nothing is ready, time jumps to the next timer
    instead of passing. For code that does no I/O (a loop with nothing to wake it fails)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        poll = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> Any:
            events = poll(0)
            if not events:
                if timeout is None:
                    raise RuntimeError("nothing scheduled and nothing ready: the test would hang")
                self.now += timeout
            return events

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self.now


def test_send_waits_max_block_ms_for_memory_then_fails() -> None:
    from slipstream.client.producer import AIOProducer, BufferFullError

    loop = VirtualTimeLoop()

    async def main() -> float:
        # Not started (no broker, no sender): nothing leaves the buffer.
        p = AIOProducer("127.0.0.1:9", buffer_memory=2000, max_block_ms=200, linger_ms=60_000)
        p._loop = asyncio.get_running_loop()
        p._cluster.topics["t"] = TopicInfo("t", None, 0, False, {0: 1})  # type: ignore[arg-type]
        started = loop.time()
        with pytest.raises(BufferFullError, match="stayed full for 200 ms"):
            for _ in range(100):
                await p.send("t", b"x" * 100)
        assert p._acc.buffer_used <= 2000
        return loop.time() - started

    try:
        waited = loop.run_until_complete(main())
    finally:
        loop.close()
    assert waited == pytest.approx(0.2)  # max_block_ms, not before and not later


def test_close_waits_its_timeout_for_delivery_then_fails_what_is_left() -> None:
    from slipstream.client.producer import AIOProducer

    loop = VirtualTimeLoop()

    async def main() -> tuple[float, asyncio.Future[Any]]:
        # No broker and no sender: the queued record is never acknowledged.
        p = AIOProducer("127.0.0.1:9", linger_ms=0)
        p._loop = asyncio.get_running_loop()
        p._cluster.topics["t"] = TopicInfo("t", None, 0, False, {0: 1})  # type: ignore[arg-type]
        fut = await p.send("t", b"v")
        p._started = True  # what start() leaves behind, less the sender task
        started = loop.time()
        await p.close(timeout=0.2)
        return loop.time() - started, fut

    try:
        waited, fut = loop.run_until_complete(main())
    finally:
        loop.close()
    assert waited == pytest.approx(0.2)  # the timeout, not before and not later
    with pytest.raises(ProducerClosedError):
        fut.result()
