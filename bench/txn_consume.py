#!/usr/bin/env python3
"""read_committed vs read_uncommitted consume throughput on one Slipstream broker, same run.

    python bench/txn_consume.py            # 200k x 1 KiB records, 3 rounds
    python bench/txn_consume.py --quick    # smoke run, well under a minute

One broker subprocess (``slipstream serve``, disk storage) holds two topics of one
partition each, written over the wire before anything is measured:

* ``txn``: transactions of ``--txn-batches`` batches of 100 records, every
  ``--abort-every``-th transaction aborted (COMMIT/ABORT markers through
  WriteTxnMarkers, see slipstream.testing.transactions);
* ``plain``: the same number of records without transactions (the baseline).

Each round reads both topics from the beginning with confluent-kafka (librdkafka) and
Slipstream's own consumer, once read_uncommitted and once read_committed, in
alternating order. A read counts the records it must see (read_committed drops the
aborted ones) and fails on any other count. The report gives the median rate of each
cell (records/s and MB/s of values) and read_committed / read_uncommitted ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from harness import HOST, MB, log, markdown_table, slipstream_broker

from slipstream.client.connection import BrokerConnection
from slipstream.client.consumer import Consumer as SlipConsumer
from slipstream.protocol.apis.create_topics import SPEC as CREATE_TOPICS
from slipstream.protocol.apis.create_topics import CreateTopicsRequest, CreateTopicsRequestTopic
from slipstream.testing.transactions import WireTxnWriter

BATCH_RECORDS = 100
VALUE_SIZE = 1024


@dataclass(frozen=True)
class Written:
    total: int  # every data record in the topic
    committed: int  # what read_committed must see


async def _create_topic(conn: BrokerConnection, name: str) -> None:
    request = CreateTopicsRequest(
        topics=[CreateTopicsRequestTopic(name=name, num_partitions=1, replication_factor=1)], timeout_ms=10_000
    )
    response = await conn.request(CREATE_TOPICS, request, version=5)
    code = response.topics[0].error_code
    if code:
        raise RuntimeError(f"cannot create topic {name}: error {code}")


async def write_topics(port: int, records: int, txn_batches: int, abort_every: int) -> Written:
    conn = await BrokerConnection(HOST, port).connect()
    try:
        await _create_topic(conn, "txn")
        await _create_topic(conn, "plain")
        values = [os.urandom(VALUE_SIZE) for _ in range(BATCH_RECORDS)]
        txn = WireTxnWriter(conn, "txn")
        plain = WireTxnWriter(conn, "plain")
        batches = records // BATCH_RECORDS
        committed = 0
        transaction = 0
        written = 0
        while written < batches:
            pid = await txn.new_producer()
            transaction += 1
            size = min(txn_batches, batches - written)
            for _ in range(size):
                await txn.send(values, producer_id=pid)
                await plain.send(values)
            commit = transaction % abort_every != 0
            await txn.end(pid, commit=commit)
            committed += size * BATCH_RECORDS if commit else 0
            written += size
        return Written(written * BATCH_RECORDS, committed)
    finally:
        await conn.close()


def read_confluent(port: int, topic: str, isolation: str, expected: int, timeout: float) -> float:
    consumer = Consumer({
        "bootstrap.servers": f"{HOST}:{port}",
        "group.id": f"bench-{topic}-{isolation}-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
        "fetch.queue.backoff.ms": 10,
        "log_level": 0,
    })
    try:
        consumer.list_topics(topic, timeout=10)
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = 0
        while True:
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"{topic} {isolation}: {got} of {expected} records in {timeout}s")
            eof = False
            for msg in consumer.consume(10_000, 0.2):
                err = msg.error()
                if err is None:
                    got += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof = True
                else:
                    raise RuntimeError(f"consume error: {err}")
            if eof and got >= expected:
                break
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if got != expected:
        raise RuntimeError(f"{topic} {isolation}: read {got} records, expected {expected}")
    return elapsed


def read_slipstream(port: int, topic: str, isolation: str, expected: int, timeout: float) -> float:
    consumer = SlipConsumer(f"{HOST}:{port}", isolation_level=isolation, auto_offset_reset="earliest")
    try:
        start = time.perf_counter()
        consumer.assign([(topic, 0)])
        got = 0
        while got < expected:
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"{topic} {isolation}: {got} of {expected} records in {timeout}s")
            got += len(consumer.poll(0.2))
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if got != expected:
        raise RuntimeError(f"{topic} {isolation}: read {got} records, expected {expected}")
    return elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k records, 1 round")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--txn-batches", type=int, default=10, help="batches of 100 records per transaction")
    parser.add_argument("--abort-every", type=int, default=5, help="every n-th transaction is aborted")
    parser.add_argument("--timeout", type=float, default=300.0)
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.records, opts.rounds = 20_000, 1
    with (
        tempfile.TemporaryDirectory(prefix="txn-bench-") as workdir,
        slipstream_broker(Path(workdir)) as broker,
    ):
        port = broker.port
        log(f"writing {opts.records} records of {VALUE_SIZE} B to each topic")
        written = asyncio.run(write_topics(port, opts.records, opts.txn_batches, opts.abort_every))
        readers: dict[str, Callable[[int, str, str, int, float], float]] = {
            "confluent-kafka": read_confluent,
            "slipstream": read_slipstream,
        }
        cells: dict[tuple[str, str, str], list[float]] = {}
        for round_ in range(opts.rounds):
            order = ["read_uncommitted", "read_committed"]
            if round_ % 2:
                order.reverse()
            for client, read in readers.items():
                for topic in ("plain", "txn"):
                    for isolation in order:
                        expected = written.committed if (topic, isolation) == ("txn", "read_committed") \
                            else written.total
                        seconds = read(port, topic, isolation, expected, opts.timeout)
                        cells.setdefault((client, topic, isolation), []).append(expected / seconds)
                        log(f"round {round_ + 1} {client} {topic} {isolation}: "
                            f"{expected / seconds:,.0f} records/s")
    print(f"read_committed vs read_uncommitted, one partition, {written.total:,} records of "
          f"{VALUE_SIZE} B per topic; `txn`: transactions of {opts.txn_batches * BATCH_RECORDS} records, "
          f"1 in {opts.abort_every} aborted ({written.committed:,} committed); median of {opts.rounds} "
          f"round(s); rates count the records each reader delivers.\n")
    rows = []
    for client in readers:
        for topic in ("plain", "txn"):
            unc = statistics.median(cells[(client, topic, "read_uncommitted")])
            com = statistics.median(cells[(client, topic, "read_committed")])
            rows.append([client, topic, f"{unc:,.0f} rec/s ({unc * VALUE_SIZE / MB:.0f} MB/s)",
                         f"{com:,.0f} rec/s ({com * VALUE_SIZE / MB:.0f} MB/s)", f"{com / unc:.2f}"])
    header = ["client", "topic", "read_uncommitted", "read_committed", "committed / uncommitted"]
    print("\n".join(markdown_table(header, rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
