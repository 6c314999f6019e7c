"""The web console's server side on an embedded broker: static files (and nothing else),
the record browser's bounded pages, the lag ring and the timeline endpoint. The pages
themselves are tested in Chromium (tests/conformance/test_console_browser.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from slipstream.broker.admin import record_browser, static_files
from slipstream.broker.admin.lag_history import LagHistory
from slipstream.broker.broker import Broker
from slipstream.client.aio_consumer import AIOConsumer
from slipstream.client.producer import AIOProducer
from slipstream.protocol.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, compute_crc
from slipstream.protocol.records import (
    CONTROL_COMMIT,
    ProducerRecord,
    build_batch,
    build_control_batch,
)


async def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


@pytest.fixture
async def broker():
    async with Broker(storage="memory", port=0, admin_port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b


# ---------------------------------------------------------------- static files


def test_only_the_packaged_console_files_are_served():
    files = static_files.load_console_files()
    assert {"index.html", "console.js", "console.css"} <= set(files)
    assert static_files.lookup(files, "/") is files["index.html"]
    assert static_files.lookup(files, "/console/") is files["index.html"]
    assert static_files.lookup(files, "/console/console.js") is files["console.js"]
    for path in ("/console/../listener.py", "/console/..%2flistener.py", "/console/sub/console.js",
                 "/console/.gitignore", "/console/__init__.py", "/console/nope.css", "/index.html", "/console.js"):
        assert static_files.lookup(files, path) is None, path


async def test_console_pages_and_404s_over_http(broker: Broker):
    assert broker.admin is not None
    port = broker.admin.port
    status, headers, body = await get(port, "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and b"/console/console.js" in body
    assert "script-src" not in headers["content-security-policy"]  # default-src 'self': no inline script
    assert "default-src 'self'" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"
    status, headers, _ = await get(port, "/console/console.css")
    assert status == 200 and headers["content-type"].startswith("text/css")
    for path in ("/console/../listener.py", "/console/%2e%2e/listener.py", "/console/%2e%2e%2flistener.py", "/nope"):
        assert (await get(port, path))[0] == 404, path
    status, _, body = await get(port, "/api")
    assert status == 200 and b"/api/topics/<name>/records" in body


# ---------------------------------------------------------------- record browser


def test_fields_show_text_hex_and_their_bound():
    assert record_browser.field_document(None) is None
    assert record_browser.field_document(b'{"a": 1}') == {"size": 8, "text": '{"a": 1}', "hex": "7b2261223a20317d", "truncated": False}
    binary = record_browser.field_document(b"\xff\x00")
    assert binary == {"size": 2, "text": None, "hex": "ff00", "truncated": False}
    big = record_browser.field_document(b"x" * 10_000)
    assert big is not None and big["truncated"] and big["size"] == 10_000
    assert len(big["text"]) == record_browser.MAX_FIELD_BYTES and len(big["hex"]) == 2 * record_browser.MAX_FIELD_BYTES
    # A multi-byte character cut by the bound: the text up to the cut, not "binary".
    cut = record_browser.field_document("é".encode() * 3000)
    assert cut is not None and cut["text"] == "é" * (record_browser.MAX_FIELD_BYTES // 2)


async def test_record_pages_are_bounded_and_decoded(broker: Broker):
    assert broker.admin is not None and broker.state is not None
    broker.state.topics.create("browse", 2, {})
    async with AIOProducer(broker.bootstrap_servers, linger_ms=0) as producer:
        for i in range(150):
            value = json.dumps({"n": i}).encode()
            await producer.send_and_wait("browse", value, key=b"k%d" % i, partition=1, headers=[("trace", b"t%d" % i)])
    port = broker.admin.port

    status, _, body = await get(port, "/api/topics/browse/records?partition=1")
    page = json.loads(body)
    assert status == 200 and (page["log_end_offset"], page["offset"]) == (150, 130)
    assert [r["offset"] for r in page["records"]] == list(range(130, 150))  # the last 20 by default
    last = page["records"][-1]
    assert last["key"]["text"] == "k149" and json.loads(last["value"]["text"]) == {"n": 149}
    assert last["headers"] == [{"name": "trace", "value": {"size": 4, "text": "t149", "hex": "74313439", "truncated": False}}]

    page = json.loads((await get(port, "/api/topics/browse/records?partition=1&offset=10&limit=1000"))[2])
    assert len(page["records"]) == record_browser.MAX_LIMIT and page["records"][0]["offset"] == 10
    assert page["next_offset"] == 10 + record_browser.MAX_LIMIT

    page = json.loads((await get(port, "/api/topics/browse/records?partition=0"))[2])
    assert page["records"] == [] and page["log_end_offset"] == 0
    page = json.loads((await get(port, "/api/topics/browse/records?partition=1&offset=999"))[2])
    assert page["records"] == [] and page["offset"] == 150  # clamped to the end

    for query, message in (
        ("partition=7", "topic 'browse' has no partition 7"),
        ("partition=x", "partition must be an integer, not 'x'"),
        ("offset=-1", "offset must not be negative"),
    ):
        status, _, body = await get(port, f"/api/topics/browse/records?{query}")
        assert (status, json.loads(body)) == (400, {"error": message})
    assert (await get(port, "/api/topics/missing/records"))[0] == 404
    status, _, body = await get(port, "/api/topics/browse")
    assert status == 200 and json.loads(body)["name"] == "browse"
    assert (await get(port, "/api/topics/missing"))[0] == 404


def _compacted(batch: bytes, last_offset_delta: int) -> bytes:
    """The batch as compaction leaves it: its offset range kept, its tail records gone."""
    out = bytearray(batch)
    out[ATTRIBUTES_OFFSET + 2 : ATTRIBUTES_OFFSET + 6] = last_offset_delta.to_bytes(4, "big")
    out[CRC_OFFSET : CRC_OFFSET + 4] = compute_crc(bytes(out)).to_bytes(4, "big")
    return bytes(out)


async def test_record_pages_skip_markers_and_compaction_gaps(broker: Broker):
    assert broker.admin is not None and broker.state is not None
    broker.state.topics.create("mixed", 1, {})
    plog = broker.state.topics.partition("mixed", 0)
    assert plog is not None
    records = [ProducerRecord(b"k%d" % i, b"v%d" % i, timestamp_ms=1000 + i) for i in range(2)]
    plog.append_with_offsets([
        _compacted(build_batch(records, base_offset=0), last_offset_delta=3),  # offsets 0-3, records 0 and 1
        build_control_batch(CONTROL_COMMIT, producer_id=7, producer_epoch=0, timestamp_ms=0, base_offset=4),
        build_batch([ProducerRecord(b"k5", b"v5", timestamp_ms=1005)], base_offset=5),
    ])  # fmt: skip
    port = broker.admin.port
    page = json.loads((await get(port, "/api/topics/mixed/records?offset=0&limit=10"))[2])
    assert [(r["offset"], r["value"]["text"]) for r in page["records"]] == [(0, "v0"), (1, "v1"), (5, "v5")]
    assert page["next_offset"] == 6 and page["log_end_offset"] == 6
    # From inside the compacted gap: past the gap and the marker to the next record.
    page = json.loads((await get(port, "/api/topics/mixed/records?offset=2&limit=1"))[2])
    assert [r["offset"] for r in page["records"]] == [5] and page["next_offset"] == 6
    page = json.loads((await get(port, "/api/topics/mixed/records?offset=0&limit=1"))[2])
    assert [r["offset"] for r in page["records"]] == [0] and page["next_offset"] == 1


# ---------------------------------------------------------------- lag ring


def test_lag_ring_keeps_the_last_samples_of_live_groups():
    ring = LagHistory(max_samples=3, max_groups=2)
    for second in range(5):
        ring.record(second * 1000, {"g": {("t", 0): second, ("t", 10): 1, ("t", 2): 0}, "h": {("t", 0): 9}})
    document = ring.document("g")
    assert [s["at_ms"] for s in document["samples"]] == [2000, 3000, 4000]
    assert document["partitions"] == ["t-0", "t-2", "t-10"]  # partition order, not string order
    assert document["samples"][-1]["lag"] == {"t-0": 4, "t-10": 1, "t-2": 0}
    ring.record(5000, {"h": {("t", 0): 8}, "i": {}, "j": {}})
    assert ring.samples("g") == []  # gone from the broker: forgotten
    assert ring.samples("j") == []  # beyond max_groups
    assert [s.lag for s in ring.samples("h")][-1] == {"t-0": 8}
    assert ring.document("unknown") == {"group_id": "unknown", "partitions": [], "samples": []}


async def test_lag_and_timeline_endpoints(broker: Broker):
    assert broker.admin is not None and broker.state is not None
    broker.state.topics.create("lagged", 2, {})
    async with AIOProducer(broker.bootstrap_servers, linger_ms=0) as producer:
        for i in range(5):
            await producer.send_and_wait("lagged", b"v", partition=i % 2)
    async with AIOConsumer(broker.bootstrap_servers, group_id="lg", client_id="lag-client", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["lagged"])
        got = 0
        for _ in range(200):
            got += len(await consumer.getmany(0.05))
            if got == 5:
                break
        await consumer.commit({("lagged", 0): 1, ("lagged", 1): 2})
        broker.admin.sample_lag()
        status, _, body = await get(broker.admin.port, "/api/groups/lg/lag")
        lag = json.loads(body)
        assert status == 200 and lag["partitions"] == ["lagged-0", "lagged-1"]
        assert lag["samples"][-1]["lag"] == {"lagged-0": 2, "lagged-1": 0}  # 3 and 2 records

        status, _, body = await get(broker.admin.port, "/api/groups/lg/timeline")
        entries = json.loads(body)["entries"]
        assert status == 200 and entries[0]["kind"] == "day"
        texts = [e["text"] for e in entries]
        assert any(t.startswith("member lag-client-") and "joined" in t for t in texts), texts
        summaries = [e for e in entries if e["kind"] == "summary"]
        assert summaries and summaries[0]["text"].startswith("generation 1: ")
    for path in ("/api/groups/none/lag", "/api/groups/none/timeline"):
        assert (await get(broker.admin.port, path))[0] == 404
