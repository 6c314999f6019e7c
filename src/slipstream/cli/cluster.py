"""``slipstream cluster status``: the brokers of a cluster over PostgreSQL, who leads
each partition, and who coordinates groups and transactions - read from the database,
so it works while brokers come and go.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from ..broker.cluster import database
from ..broker.cluster.assignment import BrokerRow, Lease, current_leader, live_brokers
from ..coordinator import OFFSETS_TOPIC
from .table import format_table

if TYPE_CHECKING:
    from .client_commands import Sub

_TRANSACTIONS_TOPIC = "__transaction_state"


def add_commands(sub: Sub) -> None:
    cluster = sub.add_parser("cluster", help="the brokers of a cluster over PostgreSQL and what each leads")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    p = csub.add_parser("status", help="live brokers, partition leaders and coordinator owners")
    p.add_argument(
        "--database-url",
        default=os.environ.get("SLIPSTREAM_DATABASE_URL"),
        help="the cluster's PostgreSQL URL (default: $SLIPSTREAM_DATABASE_URL)",
    )
    p.add_argument(
        "--session-ms", type=int, default=6000, help="cluster.broker.session.ms of the brokers (default 6000)"
    )
    p.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    if not args.database_url:
        raise ValueError("give --database-url (or set SLIPSTREAM_DATABASE_URL)")
    for line in asyncio.run(status_lines(args.database_url, args.session_ms)):
        print(line)
    return 0


async def status_lines(url: str, session_ms: int) -> list[str]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        now = await database.now_ms(conn)
        rows = await database.brokers(conn)
        leases = await database.leases(conn)
    except asyncpg.UndefinedTableError:
        raise ValueError(
            "this database holds no Slipstream cluster yet (a broker started with --storage postgres creates it)"
        ) from None
    finally:
        await conn.close()
    live_ids = [b.node_id for b in live_brokers(rows, now, session_ms)]
    return render(now, rows, live_ids, leases)


def render(now: int, rows: list[BrokerRow], live_ids: list[int], leases: dict[tuple[str, int], Lease]) -> list[str]:
    led: Counter[int] = Counter()
    by_topic: dict[str, list[tuple[int, Lease | None]]] = defaultdict(list)
    for (topic, partition), lease in sorted(leases.items()):
        leader = current_leader(lease, live_ids, now)
        if leader is not None:
            led[leader.owner] += 1
        by_topic[topic].append((partition, leader))
    lines = ["BROKERS"]
    lines += format_table(
        ["NODE", "STATE", "HEARTBEAT-AGE-MS", "PARTITIONS-LED", "LISTENERS"],
        [
            (b.node_id, "live" if b.node_id in live_ids else "dead", max(now - b.heartbeat_ms, 0),
             led.get(b.node_id, 0), listeners(b))
            for b in rows
        ],
    )
    lines += ["", "PARTITION LEADERS"]
    table = []
    for topic, partitions in by_topic.items():
        if topic in (OFFSETS_TOPIC, _TRANSACTIONS_TOPIC):
            continue
        for partition, leader in partitions:
            table.append((topic, partition, _node(leader), leader.epoch if leader else None))
    lines += format_table(["TOPIC", "PARTITION", "LEADER", "EPOCH"], table)
    for topic, title in ((OFFSETS_TOPIC, "GROUP COORDINATORS"), (_TRANSACTIONS_TOPIC, "TRANSACTION COORDINATORS")):
        owners: dict[str, list[int]] = defaultdict(list)
        for partition, leader in by_topic.get(topic, []):
            owners[_node(leader)].append(partition)
        lines += ["", f"{title} ({topic} partition owners)"]
        lines += format_table(
            ["NODE", "PARTITIONS"], [(node, _ranges(parts)) for node, parts in sorted(owners.items())]
        )
    return lines


def listeners(row: BrokerRow) -> str:
    """Every listener the broker registered, as Kafka's ``listeners`` setting writes them
    ("PLAINTEXT://host:9092,CLIENTS://name:9093"); a row from before listeners were
    registered has only its host and port, which serve every listener."""
    if not row.listeners:
        return f"{row.host}:{row.port}"
    return ",".join(f"{e.name}://{e.host}:{e.port}" for e in row.listeners)


def _node(lease: Lease | None) -> str:
    return "none" if lease is None else str(lease.owner)


def _ranges(parts: list[int]) -> str:
    """0,1,2,5 -> "0-2,5"."""
    out: list[str] = []
    for p in sorted(parts):
        if out and out[-1].split("-")[-1] == str(p - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{p}"
        else:
            out.append(str(p))
    return ",".join(out)
