"""Broker start: the listener answers while __consumer_offsets is still being made, and
``slipstream serve`` loads only what serving needs before it listens.

The first two tests hold the worker thread that opens the offsets topic's partition logs
on a gate, so "meanwhile" is a state the test controls, not a race it hopes to win.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_helpers import raw_connection

from slipstream.broker import broker as broker_module
from slipstream.broker.broker import Broker
from slipstream.broker.handlers import API_TABLE
from slipstream.broker.topics import OFFSETS_TOPIC
from slipstream.log.disk.store import DiskLogStore
from slipstream.protocol.apis import api_versions as av
from slipstream.protocol.apis import find_coordinator as fc
from slipstream.protocol.apis import metadata as md
from slipstream.protocol.errors import ErrorCode

OFFSETS_PARTITIONS = 3
GATE_TIMEOUT_S = 30.0


class OffsetsGate:
    """Makes DiskLogStore.open wait (in the worker thread) for the offsets topic's logs."""

    def __init__(self, fail: bool = False) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.all_opened = threading.Event()  # the worker opened the last partition's log
        self.store: DiskLogStore | None = None
        self.fail = fail

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_open = DiskLogStore.open
        gate = self

        def gated_open(store: DiskLogStore, topic: str, partition: int, config: Any) -> Any:
            if topic == OFFSETS_TOPIC:
                assert threading.current_thread() is not threading.main_thread()
                gate.reached.set()
                assert gate.release.wait(GATE_TIMEOUT_S)
                if gate.fail:
                    raise OSError("no space left on device")
                gate.store = store
                opened = real_open(store, topic, partition, config)
                if partition == OFFSETS_PARTITIONS - 1:
                    gate.all_opened.set()
                return opened
            return real_open(store, topic, partition, config)

        monkeypatch.setattr(DiskLogStore, "open", gated_open)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[OffsetsGate]:
    g = OffsetsGate()
    g.install(monkeypatch)
    yield g
    g.release.set()  # never leave a worker thread parked


async def _until_listening(broker: Broker, start: asyncio.Future[Any], gate: OffsetsGate) -> None:
    for _ in range(1000):
        if broker.ports and gate.reached.is_set():
            return
        assert not start.done(), start.exception() if start.done() else None
        await asyncio.sleep(0.01)
    raise AssertionError("the broker never opened its listener with the offsets topic pending")


def _all_topics() -> md.MetadataRequest:
    return md.MetadataRequest(topics=None, allow_auto_topic_creation=True)


def _named(name: str) -> md.MetadataRequest:
    return md.MetadataRequest(topics=[md.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True)


async def test_the_listener_answers_while_the_offsets_topic_is_made(tmp_path: Path, gate: OffsetsGate) -> None:
    broker = Broker(data_dir=str(tmp_path), port=0, offsets_topic_partitions=OFFSETS_PARTITIONS)
    start = asyncio.ensure_future(broker.start())
    try:
        await _until_listening(broker, start, gate)
        assert broker.groups is not None and broker.groups.coordinator.is_loading
        async with raw_connection(f"127.0.0.1:{broker.port}") as conn:
            everything = await conn.request(md.SPEC, _all_topics(), version=12)
            assert [t.name for t in everything.topics] == []
            asked = await conn.request(md.SPEC, _named(OFFSETS_TOPIC), version=12)
            # Being made: Kafka's answer for a topic in creation (clients retry), and no
            # auto-created ordinary topic under the internal name.
            assert [(t.name, t.error_code) for t in asked.topics] == [
                (OFFSETS_TOPIC, ErrorCode.LEADER_NOT_AVAILABLE)
            ]
            assert not start.done()
            gate.release.set()
            await asyncio.wait_for(start, GATE_TIMEOUT_S)
            everything = await conn.request(md.SPEC, _all_topics(), version=12)
            assert [(t.name, t.is_internal, len(t.partitions)) for t in everything.topics] == [
                (OFFSETS_TOPIC, True, OFFSETS_PARTITIONS)
            ]
        await asyncio.wait_for(broker.groups.loaded(), GATE_TIMEOUT_S)
        assert not broker.groups.coordinator.is_loading
        assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
            f"{OFFSETS_TOPIC}-{i}" for i in range(OFFSETS_PARTITIONS)
        ]
    finally:
        gate.release.set()
        if not start.done():
            await asyncio.wait_for(start, GATE_TIMEOUT_S)
        await broker.stop()


async def test_a_restart_recovers_the_offsets_topic_while_the_listener_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Broker(data_dir=str(tmp_path), port=0, offsets_topic_partitions=OFFSETS_PARTITIONS) as first:
        assert first.state is not None
        first.state.topics.create("kept", 2)
        offsets_id = first.state.topics.topics[OFFSETS_TOPIC].topic_id
    gate = OffsetsGate()
    gate.install(monkeypatch)
    broker = Broker(data_dir=str(tmp_path), port=0, offsets_topic_partitions=OFFSETS_PARTITIONS)
    start = asyncio.ensure_future(broker.start())
    try:
        await _until_listening(broker, start, gate)
        assert broker.state is not None
        async with raw_connection(f"127.0.0.1:{broker.port}") as conn:
            everything = await conn.request(md.SPEC, _all_topics(), version=12)
            assert [(t.name, len(t.partitions)) for t in everything.topics] == [("kept", 2)]
            # A save meanwhile keeps the offsets topic's entry (its id and partition count).
            broker.state.topics.create("made-meanwhile", 1)
            gate.release.set()
            await asyncio.wait_for(start, GATE_TIMEOUT_S)
            everything = await conn.request(md.SPEC, _all_topics(), version=12)
            offsets = [(t.topic_id, len(t.partitions)) for t in everything.topics if t.name == OFFSETS_TOPIC]
            assert offsets == [(offsets_id, OFFSETS_PARTITIONS)]  # the same topic, reopened
        saved = json.loads((tmp_path / "topics.json").read_text())["topics"]
        assert sorted(saved) == [OFFSETS_TOPIC, "kept", "made-meanwhile"]
    finally:
        gate.release.set()
        if not start.done():
            await asyncio.wait_for(start, GATE_TIMEOUT_S)
        await broker.stop()


async def test_a_start_cancelled_while_the_offsets_topic_is_made_stops_cleanly(
    tmp_path: Path, gate: OffsetsGate
) -> None:
    broker = Broker(data_dir=str(tmp_path), port=0, offsets_topic_partitions=OFFSETS_PARTITIONS)
    start = asyncio.ensure_future(broker.start())
    await _until_listening(broker, start, gate)
    start.cancel()
    for _ in range(50):  # give the cancelled start every chance to (wrongly) finish
        if start.done():
            break
        await asyncio.sleep(0.01)
    # It waits for the worker parked on the gate: the thread cannot be stopped, and
    # closing the store under it would leave the logs it opens afterwards open.
    assert not start.done()
    gate.release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(start, GATE_TIMEOUT_S)
    # start() stopped the broker: listener closed, and the store closed only after the
    # worker had opened its logs, so none is left open behind it.
    assert broker.state is None
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", broker.port)
    assert gate.all_opened.wait(GATE_TIMEOUT_S)
    assert gate.store is not None
    assert [key for key, log in gate.store._logs.items() if not log.closed] == []


async def test_a_failure_to_make_the_offsets_topic_fails_start_and_closes_the_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = OffsetsGate(fail=True)
    gate.install(monkeypatch)
    gate.release.set()
    broker = Broker(data_dir=str(tmp_path), port=0, offsets_topic_partitions=OFFSETS_PARTITIONS)
    with pytest.raises(OSError, match="no space left on device"):
        await asyncio.wait_for(broker.start(), GATE_TIMEOUT_S)
    assert broker.ports  # it had listened...
    with pytest.raises(OSError):  # ...and closed the listener again
        await asyncio.open_connection("127.0.0.1", broker.port)
    assert broker.state is None


# ---------------------------------------------------------------- coordinators after the listener


class CoordinatorModulesGate:
    """Makes the worker thread that imports the coordinator modules wait, as a first start
    in a fresh interpreter would while they load (here they are loaded already)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        monkeypatch.setattr(broker_module, "coordinator_modules_loaded", lambda: False)
        monkeypatch.setattr(broker_module, "load_coordinator_modules", self._load)

    def _load(self) -> None:
        assert threading.current_thread() is not threading.main_thread()
        self.reached.set()
        assert self.release.wait(GATE_TIMEOUT_S)


async def test_the_listener_answers_api_versions_and_metadata_while_the_coordinators_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = CoordinatorModulesGate(monkeypatch)
    broker = Broker(data_dir=str(tmp_path), port=0, offsets_topic_partitions=OFFSETS_PARTITIONS)
    start = asyncio.ensure_future(broker.start())
    try:
        for _ in range(1000):
            if broker.ports and gate.reached.is_set():
                break
            assert not start.done(), start.exception() if start.done() else None
            await asyncio.sleep(0.01)
        assert broker.groups is None and broker.transactions is None
        async with raw_connection(f"127.0.0.1:{broker.port}") as conn:
            versions = await conn.request(av.SPEC, av.ApiVersionsRequest(), version=3)
            assert versions.error_code == ErrorCode.NONE
            assert [k.api_key for k in versions.api_keys] == sorted(API_TABLE)  # every API, as always
            everything = await conn.request(md.SPEC, _all_topics(), version=12)
            assert everything.topics == []
            # A group request waits for the group coordinator (it is not refused).
            find = asyncio.ensure_future(
                conn.request(fc.SPEC, fc.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), version=4)
            )
            for _ in range(20):
                await asyncio.sleep(0.01)
            assert not find.done()
            assert not start.done()
            gate.release.set()
            found = await asyncio.wait_for(find, GATE_TIMEOUT_S)
            assert [(c.key, c.node_id) for c in found.coordinators] == [("g", broker.config.node_id)]
            await asyncio.wait_for(start, GATE_TIMEOUT_S)
            assert broker.groups is not None and broker.transactions is not None
    finally:
        gate.release.set()
        if not start.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(start, GATE_TIMEOUT_S)
        await broker.stop()


# ---------------------------------------------------------------- what serve loads

# Runs `slipstream serve` in a fresh interpreter up to the end of Broker.start, then
# reports the modules loaded by then and the collector's state.
_SERVE_UNTIL_STARTED = """
import asyncio, gc, struct, sys, threading
import slipstream.cli as cli

seen = {}
real_serve = cli._serve

async def metadata_answered(port):
    # A Metadata v0 request (all topics) and its answer: what a first client asks.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = b"probe"
    body = struct.pack(">hhih", 3, 0, 7, len(client)) + client + struct.pack(">i", 0)
    writer.write(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    answered = struct.unpack(">i", (await reader.readexactly(size))[:4])[0] == 7
    writer.close()
    return answered

def _serve(args):
    from slipstream.broker import broker

    # The coordinator modules load (in a worker thread) only once the first answer is
    # recorded, so what that answer needed is seen apart from what a start loads. (With
    # an admin listener they load before the Kafka listener opens.)
    first_answered = threading.Event()
    real_load = broker.load_coordinator_modules

    def load_after_the_first_answer():
        assert first_answered.wait(60)
        real_load()

    if args.admin_port is None:
        broker.load_coordinator_modules = load_after_the_first_answer

    async def start_then_stop(self):
        seen["collector_on_while_starting"] = gc.isenabled()
        start = asyncio.ensure_future(self.start())
        while not self.ports:
            assert not start.done(), start.exception() if start.done() else None
            await asyncio.sleep(0.001)
        seen["answered"] = await metadata_answered(self.port)
        seen["modules_at_first_answer"] = sorted(sys.modules)
        first_answered.set()
        await start
        seen["modules"] = sorted(sys.modules)
        seen["answered_after_start"] = await metadata_answered(self.port)
        await self.stop()

    broker.Broker.serve_forever = start_then_stop
    return real_serve(args)

cli._serve = _serve
code = cli.main(sys.argv[1:])
seen["collector_on_after"] = gc.isenabled()
import json  # (not before: what serve loads is what is checked)
print(json.dumps(seen))
sys.exit(code)
"""

# Not needed to answer a first request; each one loaded would be paid for by every start.
NOT_LOADED_TO_SERVE = (
    "slipstream.client",
    "slipstream.spark",
    "slipstream.testing",
    "slipstream.cli.client_commands",
    "slipstream.cli.groups",
    "slipstream.cli.pipeline",
    "slipstream.cli.users",
    "slipstream.cli.certs",
    "slipstream.cli.acls",
    "slipstream.broker.admin",
    "slipstream.log.compaction",
    "slipstream.log.disk.compaction_space",
    "slipstream.log.postgres",
    "prometheus_client",
    "pyspark",
    "hypothesis",
    "confluent_kafka",
    "cryptography",
    "tomllib",
    "slipstream.log.memory",  # (the store of --storage memory and embedded brokers)
)


# Loaded by a start, but after the listener has answered its first Metadata request:
# the coordinators (in a worker thread), and the other APIs' handlers and declarations
# (on each API's first request).
LOADED_AFTER_THE_FIRST_ANSWER = (
    "slipstream.broker.groups",
    "slipstream.broker.transactions",
    "slipstream.broker.cleaner",
    "slipstream.coordinator.coordinator",
    "slipstream.coordinator.result",
    "slipstream.coordinator.topics_image",
    "slipstream.coordinator.transactions",
    # The produce and fetch path (imported by the same worker thread, after the coordinators).
    "slipstream.broker.appends",
    "slipstream.broker.append_policy",
    "slipstream.broker.batch_checks",
    "slipstream.broker.fetch_sessions",
    "slipstream.broker.producer_state",
    "slipstream.protocol.record_batch",
    "slipstream.protocol.compression",
    "cramjam",
)
# Loaded where used, not by a fresh broker's first answer: SCRAM's hashing and random
# nonces (only when a client authenticates or a credential is set), and json (a fresh
# data dir has no topic, group-config, credential or ACL document to read), pathlib (paths
# are strs up to the first partition log opened), argparse (a plain serve command line is
# read without it: cli/serve_options.py) and shutil (argparse's help formatter imports it
# to size the help; cli.parser.HelpFormatter does not).
NOT_LOADED_TO_ANSWER_ON_A_FRESH_DATA_DIR = ("secrets", "hmac", "hashlib", "json", "pathlib", "shutil", "argparse")
NOT_LOADED_BEFORE_THEIR_REQUESTS = (
    "slipstream.broker.handlers.produce",
    "slipstream.broker.handlers.join_group",
    "slipstream.protocol.apis.create_acls",
    "slipstream.protocol.apis.fetch",
)


def _serve_until_started(tmp_path: Path, *flags: str) -> dict[str, Any]:
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-c", _SERVE_UNTIL_STARTED, "serve", "--port", "0", "--host", "127.0.0.1",
         "--data-dir", str(tmp_path / "data"), "--log-level", "WARNING", *flags],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )
    assert out.returncode == 0, out.stderr
    seen: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return seen


def _loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_serve_loads_only_what_serving_needs_and_starts_with_the_collector_off(tmp_path: Path) -> None:
    seen = _serve_until_started(tmp_path)
    assert seen["answered"] and seen["answered_after_start"]
    first = seen["modules_at_first_answer"]
    assert [name for name in NOT_LOADED_TO_SERVE + LOADED_AFTER_THE_FIRST_ANSWER if _loaded(first, name)] == []
    assert [name for name in NOT_LOADED_BEFORE_THEIR_REQUESTS if _loaded(first, name)] == []
    assert [name for name in NOT_LOADED_TO_ANSWER_ON_A_FRESH_DATA_DIR if _loaded(first, name)] == []
    assert _loaded(first, "slipstream.broker.handlers.metadata")  # the check sees real imports
    modules = seen["modules"]
    assert [name for name in NOT_LOADED_TO_SERVE if _loaded(modules, name)] == []
    assert [name for name in LOADED_AFTER_THE_FIRST_ANSWER if not _loaded(modules, name)] == []
    assert [name for name in NOT_LOADED_BEFORE_THEIR_REQUESTS if _loaded(modules, name)] == []
    assert seen["collector_on_while_starting"] is False
    assert seen["collector_on_after"] is True  # main() puts it back when serve returns


def test_serve_with_an_admin_port_loads_the_admin_listener(tmp_path: Path) -> None:
    seen = _serve_until_started(tmp_path, "--admin-port", "0")
    modules = seen["modules"]
    assert _loaded(modules, "slipstream.broker.admin")
    assert _loaded(modules, "prometheus_client")
    assert not _loaded(modules, "slipstream.client")
