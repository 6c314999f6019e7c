"""The admin listener on an embedded broker: endpoints, HTTP behaviour, readiness, counters."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slipstream.broker.admin.http_server import BadRequest, parse_head
from slipstream.broker.broker import Broker
from slipstream.broker.metrics import LATENCY_BUCKETS, BrokerMetrics, RequestStats, count_records
from slipstream.client.producer import AIOProducer
from slipstream.log.disk.segment import SharedDescriptor
from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.records import (
    CONTROL_COMMIT,
    ProducerRecord,
    build_batch,
    build_control_batch,
)


async def http(port: int, raw: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


async def get(port: int, path: str) -> tuple[int, bytes]:
    data = await http(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
async def broker():
    async with Broker(storage="memory", port=0, admin_port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b


async def test_off_by_default():
    async with Broker(storage="memory", port=0) as b:
        assert b.admin is None and b.admin_url is None


async def test_health_and_readiness_follow_the_coordinator_load(broker: Broker):
    assert broker.admin is not None and broker.groups is not None
    port = broker.admin.port
    assert await get(port, "/healthz") == (200, b"ok\n")
    assert (await get(port, "/readyz"))[0] == 200
    # The coordinator back in its loading state (as at start-up): not ready, still alive.
    coordinator = broker.groups.coordinator
    coordinator.begin_loading()
    status, body = await get(port, "/readyz")
    assert (status, body) == (503, b"loading __consumer_offsets\n")
    assert (await get(port, "/healthz"))[0] == 200
    assert samples((await get(port, "/metrics"))[1])[("slipstream_ready", ())] == 0
    coordinator.finish_loading(0)
    assert (await get(port, "/readyz"))[0] == 200
    assert samples((await get(port, "/metrics"))[1])[("slipstream_ready", ())] == 1


async def test_keep_alive_serves_several_requests_on_one_connection(broker: Broker):
    assert broker.admin is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.admin.port)
    for _ in range(3):
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: keep-alive" in head
        assert await reader.readexactly(3) == b"ok\n"
    writer.close()


async def test_bad_requests_get_clear_answers_and_the_broker_lives(broker: Broker):
    assert broker.admin is not None
    port = broker.admin.port
    assert (await http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")).startswith(
        b"HTTP/1.1 405 Method Not Allowed"
    )
    assert (await http(port, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400 Bad Request")
    huge = b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
    assert (await http(port, huge)).startswith(b"HTTP/1.1 413")
    assert (await get(port, "/nope"))[0] == 404
    status, body = await get(port, "/api/groups/missing")
    assert status == 404 and json.loads(body) == {"error": "no group 'missing'"}
    head_only = await http(port, b"HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert head_only.endswith(b"\r\n\r\n") and b"Content-Length: 3" in head_only
    assert (await get(port, "/healthz"))[0] == 200


async def test_produce_and_requests_are_counted(broker: Broker):
    assert broker.admin is not None and broker.state is not None
    broker.state.topics.create("t", 2, {})
    async with AIOProducer(broker.bootstrap_servers, linger_ms=0) as producer:
        for i in range(7):
            await producer.send_and_wait("t", b"v%d" % i, partition=i % 2)
    found = samples((await get(broker.admin.port, "/metrics"))[1])
    assert found[("slipstream_topic_records_in_total", (("topic", "t"),))] == 7
    assert found[("slipstream_log_end_offset", (("partition", "0"), ("topic", "t")))] == 4
    assert found[("slipstream_log_end_offset", (("partition", "1"), ("topic", "t")))] == 3
    produce = [
        v for (name, labels), v in found.items()
        if name == "slipstream_requests_total" and dict(labels)["api"] == "Produce"
    ]  # fmt: skip
    assert sum(produce) == 7
    buckets = [
        v for (name, labels), v in found.items()
        if name == "slipstream_request_latency_seconds_bucket" and dict(labels)["api"] == "Produce"
        and dict(labels)["le"] == "+Inf"
    ]  # fmt: skip
    assert sum(buckets) == 7
    topics = {t["name"]: t for t in json.loads((await get(broker.admin.port, "/api/topics"))[1])}
    assert topics["t"]["records_in"] == 7 and [p["log_end_offset"] for p in topics["t"]["partitions"]] == [4, 3]


def test_request_stats_buckets_are_upper_bounds():
    stats = RequestStats()
    for seconds in (0.0001, LATENCY_BUCKETS[0], 0.003, 100.0):
        stats.observe(seconds)
    assert stats.count == 4
    assert stats.buckets[0] == 2  # at or below the first bound
    assert stats.buckets[LATENCY_BUCKETS.index(0.005)] == 1
    assert stats.buckets[-1] == 1  # +Inf
    assert stats.seconds == pytest.approx(0.0001 + LATENCY_BUCKETS[0] + 0.003 + 100.0)


def test_count_records_reads_batch_headers_only():
    one = build_batch([ProducerRecord(None, b"a", timestamp_ms=0)])
    three = build_batch([ProducerRecord(None, b"b", timestamp_ms=0)] * 3, base_offset=1)
    assert count_records([one + three]) == 4
    assert count_records([one, memoryview(three)]) == 4
    assert count_records([]) == 0
    marker = build_control_batch(CONTROL_COMMIT, producer_id=7, producer_epoch=0, timestamp_ms=0, base_offset=4)
    assert count_records([one + marker + three]) == 4
    metrics = BrokerMetrics()
    metrics.fetched("t", [one + three], len(one) + len(three))
    assert (metrics.topics["t"].records_out, metrics.topics["t"].bytes_out) == (4, len(one) + len(three))


def test_count_records_in_a_file_region_reads_its_headers(tmp_path):
    # Small and large batches, so headers fall inside one read block, across two, and
    # far apart; the region starts after a batch it does not hold.
    batches = [
        build_batch([ProducerRecord(None, b"v" * size, timestamp_ms=0)] * count, base_offset=i)
        for i, (size, count) in enumerate([(10, 1), (10, 3), (5000, 2), (10, 4), (3000, 1), (10, 2)] * 20)
    ]
    marker = build_control_batch(CONTROL_COMMIT, producer_id=7, producer_epoch=0, timestamp_ms=0, base_offset=999)
    data = b"".join(batches[:60]) + marker + b"".join(batches[60:])
    path = tmp_path / "segment"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    region = FileRegion(SharedDescriptor(fd), len(batches[0]), len(data) - len(batches[0]))
    assert count_records([region]) == count_records([data[len(batches[0]) :]]) == 13 * 20 - 1
    assert count_records([batches[0], region]) == 13 * 20


def test_parse_head():
    request = parse_head(b"GET /api/groups/a%2Fb?x=1 HTTP/1.1\r\nHost: h\r\nConnection: Close")
    assert (request.method, request.path, request.query) == ("GET", "/api/groups/a/b", {"x": ["1"]})
    assert request.headers == {"host": "h", "connection": "Close"} and not request.keep_alive
    assert parse_head(b"GET / HTTP/1.1").keep_alive
    assert not parse_head(b"GET / HTTP/1.0").keep_alive
    for bad in (b"GET /", b"GET / SPDY/3", b"GET / HTTP/1.1\r\nno colon"):
        with pytest.raises(BadRequest):
            parse_head(bad)


def test_admin_port_comes_from_flags_env_and_file(tmp_path):
    from slipstream.broker.config import build
    from slipstream.cli import build_parser

    assert build().admin_port is None
    assert build(env={"SLIPSTREAM_ADMIN_PORT": "9644"}).admin_port == 9644
    config_file = tmp_path / "broker.properties"
    config_file.write_text("admin.port=9645\nadmin.host=0.0.0.0\n")
    from_file = build(str(config_file), env={})
    assert (from_file.admin_port, from_file.admin_host) == (9645, "0.0.0.0")
    args = build_parser(serve_only=True).parse_args(["serve", "--admin-port", "9646"])
    assert args.admin_port == 9646
    with pytest.raises(ValueError, match="admin port"):
        build(env={"SLIPSTREAM_ADMIN_PORT": "70000"})


async def test_consumer_protocol_group_in_metrics_and_json(broker: Broker):
    from slipstream.client import AIOConsumer

    assert broker.admin is not None and broker.state is not None
    broker.state.topics.create("kip848", 2, {})
    async with AIOProducer(broker.bootstrap_servers, linger_ms=0) as producer:
        for i in range(5):
            await producer.send_and_wait("kip848", b"v", partition=i % 2)
    async with AIOConsumer(
        broker.bootstrap_servers, group_id="g848", group_protocol="consumer", client_id="c848",
        auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
    ) as consumer:  # fmt: skip
        consumer.subscribe(["kip848"])
        got = 0
        for _ in range(200):
            got += len(await consumer.getmany(0.05))
            if got == 5 and len(consumer.assignment()) == 2:
                break
        assert got == 5
        await consumer.commit({("kip848", 0): 1, ("kip848", 1): 2})
        found = samples((await get(broker.admin.port, "/metrics"))[1])
        assert found[("slipstream_groups", (("state", "Stable"), ("type", "consumer")))] == 1
        assert found[("slipstream_groups", (("state", "Stable"), ("type", "classic")))] == 0
        lag = {
            dict(labels)["partition"]: v for (name, labels), v in found.items()
            if name == "slipstream_consumer_group_lag" and dict(labels)["group"] == "g848"
        }  # fmt: skip
        assert lag == {"0": 2, "1": 0}  # partition 0 holds 3 records, partition 1 holds 2
        status, body = await get(broker.admin.port, "/api/groups/g848")
        document = json.loads(body)
        assert (status, document["type"], document["state"], document["lag"]) == (200, "consumer", "Stable", 2)
        [member] = document["members"]
        assert member["client_id"] == "c848" and member["assignment"] == {"kip848": [0, 1]}


async def test_connections_beyond_the_cap_get_503(broker: Broker):
    assert broker.admin is not None
    server = broker.admin._server
    server.max_connections = 2
    idle = [await asyncio.open_connection("127.0.0.1", broker.admin.port) for _ in range(2)]
    for _ in range(100):  # until the server has taken both in
        if len(server._clients) == 2:
            break
        await asyncio.sleep(0.01)
    assert (await http(broker.admin.port, b"GET /healthz HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 503")
    for _, writer in idle:
        writer.close()
    for _ in range(100):
        if not server._clients:
            break
        await asyncio.sleep(0.01)
    assert (await get(broker.admin.port, "/healthz"))[0] == 200
