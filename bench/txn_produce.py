#!/usr/bin/env python3
"""Transactional vs idempotent produce throughput on one Slipstream broker, same run.

    python bench/txn_produce.py            # 100k x 1 KiB records per cell, 3 rounds
    python bench/txn_produce.py --quick    # smoke run, well under a minute

One broker subprocess (``slipstream serve``, disk storage, default durability). Each
cell produces ``--records`` records of 1 KiB to a fresh one-partition topic with
acks=all and idempotence on:

* ``idempotent``: no transactions (the baseline);
* ``txn-100`` / ``txn-10000``: transactions of 100 / 10,000 records, each committed
  (init_transactions once per cell; begin, send, commit_transaction per transaction).

The clock runs from the first send to the last acknowledgement (idempotent) or the
last commit's answer (transactional), after a warm-up record (a warm-up transaction)
outside it. Clients: confluent-kafka (librdkafka) and
Slipstream's AIOProducer. Cells run in rotating order each round; the report gives
the median rate of each cell and its ratio to the idempotent baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer as CKProducer
from harness import MB, create_topics, log, markdown_table, slipstream_broker

from slipstream.client.producer import AIOProducer

VALUE_SIZE = 1024
MODES = {"idempotent": 0, "txn-100": 100, "txn-10000": 10_000}


def create_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {name: 1}, 20)
    return name


def produce_confluent(bootstrap: str, topic: str, records: int, per_txn: int, value: bytes) -> float:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "log_level": 0,
    }
    if per_txn:
        config["transactional.id"] = f"bench-{topic}"
    producer = CKProducer(config)
    # Warm up outside the clock: producer id, metadata, connections (and a first transaction).
    if per_txn:
        producer.init_transactions(30)
        producer.begin_transaction()
    producer.produce(topic, value, partition=0)
    if per_txn:
        producer.commit_transaction(30)
    producer.flush(30)
    start = time.perf_counter()
    sent = 0
    while sent < records:
        count = min(per_txn or records, records - sent)
        if per_txn:
            producer.begin_transaction()
        for _ in range(count):
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        sent += count
        if per_txn:
            producer.commit_transaction(120)
    if not per_txn:
        left = producer.flush(120)
        if left:
            raise RuntimeError(f"{left} records undelivered")
    return time.perf_counter() - start


async def _produce_slipstream(bootstrap: str, topic: str, records: int, per_txn: int, value: bytes) -> float:
    settings: dict[str, Any] = {"acks": -1, "linger_ms": 5}
    if per_txn:
        settings["transactional_id"] = f"bench-slip-{topic}"
    async with AIOProducer(bootstrap, **settings) as producer:
        if per_txn:
            await producer.init_transactions()
            producer.begin_transaction()
        await producer.send(topic, value, partition=0)
        if per_txn:
            await producer.commit_transaction()
        await producer.flush()
        start = time.perf_counter()
        sent = 0
        while sent < records:
            count = min(per_txn or records, records - sent)
            if per_txn:
                producer.begin_transaction()
            for _ in range(count):
                await producer.send(topic, value, partition=0)
            sent += count
            if per_txn:
                await producer.commit_transaction()
        if not per_txn:
            await producer.flush()
        return time.perf_counter() - start


def produce_slipstream(bootstrap: str, topic: str, records: int, per_txn: int, value: bytes) -> float:
    return asyncio.run(_produce_slipstream(bootstrap, topic, records, per_txn, value))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k records per cell, 1 round")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.records, opts.rounds = 20_000, 1
    value = os.urandom(VALUE_SIZE)
    clients: dict[str, Callable[[str, str, int, int, bytes], float]] = {
        "confluent-kafka": produce_confluent,
        "slipstream": produce_slipstream,
    }
    cells: dict[tuple[str, str], list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="txn-produce-bench-") as workdir,
        slipstream_broker(Path(workdir)) as broker,
    ):
        bootstrap = broker.bootstrap
        modes = list(MODES)
        for round_ in range(opts.rounds):
            order = modes[round_ % len(modes):] + modes[:round_ % len(modes)]
            for client, produce in clients.items():
                for mode in order:
                    per_txn = min(MODES[mode], opts.records)
                    seconds = produce(bootstrap, create_topic(bootstrap), opts.records, per_txn, value)
                    rate = opts.records / seconds
                    cells.setdefault((client, mode), []).append(rate)
                    log(f"round {round_ + 1} {client} {mode}: {rate:,.0f} records/s")
    print(f"Transactional vs idempotent produce, one partition, {opts.records:,} records of {VALUE_SIZE} B "
          f"per cell, acks=all; median of {opts.rounds} round(s).\n")
    rows = []
    for client in clients:
        base = statistics.median(cells[(client, "idempotent")])
        for mode in MODES:
            rate = statistics.median(cells[(client, mode)])
            rows.append([client, mode, f"{rate:,.0f}", f"{rate * VALUE_SIZE / MB:.0f}", f"{rate / base:.2f}"])
    print("\n".join(markdown_table(["client", "mode", "records/s", "MB/s", "vs idempotent"], rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
