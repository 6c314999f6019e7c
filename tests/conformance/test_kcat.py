"""kcat 1.7 (Debian; librdkafka 2.0.2, an old client) against a Slipstream broker process."""

from __future__ import annotations

import json
import subprocess

import pytest
from conformance_helpers import (
    CODECS,
    PARTITIONS,
    Rec,
    ck_consume,
    ck_create_topic,
    ck_produce,
    verify_records,
)

pytestmark = pytest.mark.conformance

N = 30
# librdkafka 2.0.2 requests ApiVersions by default; the explicit form must work the same.
MODES = {"default": [], "api-version-request": ["-X", "api.version.request=true"]}


def kcat(kcat_bin: str, broker, *args: str, stdin: str | None = None, timeout: float = 30) -> str:
    res = subprocess.run(
        [kcat_bin, "-b", broker.bootstrap, "-X", "socket.timeout.ms=10000", *args],
        input=stdin, capture_output=True, text=True, timeout=timeout,
    )
    assert res.returncode == 0, f"kcat {' '.join(args)} exited {res.returncode}:\n{res.stderr[-3000:]}"
    return res.stdout


@pytest.mark.parametrize("mode", MODES)
def test_metadata_list(broker, kcat_bin, topic_name, mode):
    ck_create_topic(broker.bootstrap, topic_name)
    out = kcat(kcat_bin, broker, *MODES[mode], "-L", "-t", topic_name)
    assert f'topic "{topic_name}" with {PARTITIONS} partitions:' in out, out
    for p in range(PARTITIONS):
        assert f"partition {p}, leader" in out, out
    assert f"at 127.0.0.1:{broker.port}" in out, out

    md = json.loads(kcat(kcat_bin, broker, *MODES[mode], "-L", "-J"))
    topics = {t["topic"]: t for t in md["topics"]}
    assert topic_name in topics, list(topics)
    assert sorted(p["partition"] for p in topics[topic_name]["partitions"]) == list(range(PARTITIONS))
    assert all("error" not in p for p in topics[topic_name]["partitions"]), topics[topic_name]
    assert [(b["name"]) for b in md["brokers"]] == [f"127.0.0.1:{broker.port}"], md["brokers"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("codec", CODECS)
def test_consume_what_another_client_produced(broker, kcat_bin, topic_name, mode, codec):
    ck_create_topic(broker.bootstrap, topic_name)
    acks = ck_produce(broker.bootstrap, topic_name, range(N), codec=codec)
    out = kcat(kcat_bin, broker, *MODES[mode], "-C", "-t", topic_name, "-o", "beginning", "-e",
               "-J", "-q")
    records = []
    for line in out.splitlines():
        m = json.loads(line)
        records.append(Rec(m["partition"], m["offset"], m["key"], m["payload"],
                           tuple(zip(m.get("headers", [])[::2], m.get("headers", [])[1::2], strict=True))))
    verify_records(records, range(N), acks=acks)


@pytest.mark.parametrize("codec", CODECS)
def test_produce_then_other_client_consumes(broker, kcat_bin, topic_name, codec):
    ck_create_topic(broker.bootstrap, topic_name)
    lines = "".join(f"k{i}:v{i}\n" for i in range(N))
    kcat(kcat_bin, broker, "-P", "-t", topic_name, "-K", ":", "-z", codec, "-H", "i=x",
         "-X", "acks=all", stdin=lines)
    records = ck_consume(broker.bootstrap, topic_name, N)
    assert {r.headers for r in records} == {(("i", "x"),)}
    verify_records(records, range(N), headers=False)
