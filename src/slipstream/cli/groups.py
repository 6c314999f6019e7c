"""``slipstream groups ...``: consumer groups, like Kafka's kafka-consumer-groups.sh.

list, describe (members, assignments, committed offsets and lag), reset-offsets
(a dry run unless --execute; only while the group is inactive), delete and
delete-offsets, and history (group_history.py: a Slipstream broker's rebalance
history, from its admin listener). Everything else goes through :class:`slipstream.client.admin.Admin`,
so the commands work against any Kafka-compatible cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..client.admin import Admin
from ..client.cluster import Cluster
from ..client.committed_offsets_admin import PartitionLag
from ..client.connection import UnsupportedApi
from ..client.group_admin import STATE_DEAD, STATE_EMPTY, ConsumerGroupDescription, GroupDescription
from ..client.log_offsets_admin import EARLIEST, LATEST, TopicPartition
from ..protocol.errors import KafkaError
from . import group_history
from .client_commands import _bootstrap_arg, _run
from .table import format_table

if TYPE_CHECKING:
    from .client_commands import Sub

_NONE = "-"


def add_commands(sub: Sub) -> None:
    groups = sub.add_parser(
        "groups",
        help="list, describe, reset offsets of and delete consumer groups",
        description="Consumer groups on any Kafka-compatible cluster (like kafka-consumer-groups.sh).",
    )
    gsub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    p = gsub.add_parser("list", help="list groups with their state")
    p.add_argument(
        "--state", action="append", default=[], metavar="STATE",
        help="only groups in this state (Empty, Stable, PreparingRebalance, CompletingRebalance, Dead); repeatable",
    )
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_list))

    p = gsub.add_parser(
        "describe", help="state, members with their assignments, committed offsets and lag of a group"
    )
    p.add_argument("group")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_describe))

    p = gsub.add_parser(
        "reset-offsets",
        help="move a group's committed offsets (dry run unless --execute)",
        description="Plan new committed offsets for the partitions of --topic and print them; with "
        "--execute, commit them. The group must be inactive (Empty, or unknown: then it is created). "
        "Targets are clamped to each partition's [earliest, latest] offsets.",
    )
    p.add_argument("group")
    p.add_argument(
        "--topic", "-t", action="append", required=True, metavar="TOPIC[:P,P...]",
        help="topic whose offsets to reset, optionally only the listed partitions; repeatable",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the earliest offset still in the log")
    mode.add_argument("--to-latest", action="store_true", help="the log end offset (skip everything)")
    mode.add_argument(
        "--to-datetime", metavar="ISO8601",
        help="the first offset at or after this time, e.g. 2024-05-01T12:00:00Z "
        "(no zone = local time; no record that late = the log end)",
    )
    mode.add_argument("--to-offset", type=int, metavar="N", help="this offset")
    mode.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (negative moves back)"
    )
    p.add_argument("--execute", action="store_true", help="commit the new offsets (default: only print the plan)")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_reset_offsets))

    p = gsub.add_parser("delete", help="delete groups and their committed offsets (only while Empty)")
    p.add_argument("group", nargs="+")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_delete))

    p = gsub.add_parser(
        "delete-offsets",
        help="delete a group's committed offsets of a topic (not while the live group subscribes to it)",
    )
    p.add_argument("group")
    p.add_argument("--topic", "-t", required=True, metavar="TOPIC[:P,P...]")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_delete_offsets))

    group_history.add_command(gsub)


# ---------------------------------------------------------------------------- output helpers


def _print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    for line in format_table(headers, rows):
        print(line)


def _fail(message: str) -> int:
    print(f"slipstream: {message}", file=sys.stderr)
    return 1


def _format_assignment(assignment: dict[str, list[int]]) -> str:
    return "; ".join(f"{topic}: {','.join(map(str, parts))}" for topic, parts in assignment.items())


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise ValueError(f"--topic expects TOPIC or TOPIC:P,P..., got {spec!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(x) for x in parts.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--topic expects TOPIC or TOPIC:P,P..., got {spec!r}") from None
    if not partitions:
        raise ValueError(f"--topic {spec!r} lists no partitions")
    return topic, partitions


async def _topic_partitions(admin: Admin, specs: Iterable[str]) -> list[TopicPartition]:
    out: set[TopicPartition] = set()
    for spec in specs:
        topic, partitions = _parse_topic(spec)
        existing = sorted((await admin.describe_topic(topic)).leaders)
        if partitions is None:
            partitions = existing
        missing = [p for p in partitions if p not in existing]
        if missing:
            raise ValueError(
                f"topic {topic} has partitions 0..{len(existing) - 1}; no partition {', '.join(map(str, missing))}"
            )
        out.update((topic, p) for p in partitions)
    return sorted(out)


def parse_datetime_ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 time; without a zone it is local time (as Kafka)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--to-datetime expects an ISO 8601 time such as 2024-05-01T12:00:00Z, got {text!r}"
        ) from None
    return int(moment.timestamp() * 1000)


# ---------------------------------------------------------------------------- commands


async def _list(args: argparse.Namespace, cluster: Cluster) -> int:
    groups = await Admin(cluster).list_groups(states=args.state or None)
    _print_table(
        ["GROUP", "STATE", "PROTOCOL-TYPE", "GROUP-TYPE"],
        ([g.group_id, g.state or "?", g.protocol_type, g.group_type or "?"] for g in groups),
    )
    return 0


async def _consumer_group(admin: Admin, group_id: str) -> ConsumerGroupDescription | None:
    """The group as a consumer (KIP-848) group, or None (classic, or not served)."""
    try:
        return (await admin.describe_consumer_groups([group_id]))[0]
    except UnsupportedApi:
        return None


def _print_consumer_group(group: ConsumerGroupDescription) -> None:
    coordinator = group.coordinator
    where = f"{coordinator.node_id} ({coordinator.host}:{coordinator.port})" if coordinator else "?"
    print(
        f"group {group.group_id}  state {group.state}  protocol consumer/{group.assignor}  "
        f"group-epoch {group.group_epoch}  target-assignment-epoch {group.target_assignment_epoch}  "
        f"coordinator {where}  members {len(group.members)}"
    )
    if group.members:
        print()
        _print_table(
            ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT", "TARGET-ASSIGNMENT"],
            (
                [
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.host,
                    m.member_epoch,
                    _format_assignment(m.assignment),
                    _format_assignment(m.target_assignment),
                ]
                for m in group.members
            ),
        )


def _is_unknown(description: GroupDescription, has_offsets: bool) -> bool:
    return description.state == STATE_DEAD and not description.members and not has_offsets


async def _describe(args: argparse.Namespace, cluster: Cluster) -> int:
    admin = Admin(cluster)
    description = await admin.describe_group(args.group)
    lags = await admin.group_lag(args.group)
    if _is_unknown(description, bool(lags)):
        return _fail(f"group {args.group!r} does not exist")
    consumer_group = await _consumer_group(admin, args.group)
    if consumer_group is not None:
        _print_consumer_group(consumer_group)
        _print_lags(lags)
        return 0
    coordinator = description.coordinator
    where = f"{coordinator.node_id} ({coordinator.host}:{coordinator.port})" if coordinator else "?"
    protocol = description.protocol_type or _NONE
    if description.protocol:
        protocol += f"/{description.protocol}"
    print(
        f"group {description.group_id}  state {description.state}  protocol {protocol}  "
        f"coordinator {where}  members {len(description.members)}"
    )
    if description.members:
        print()
        _print_table(
            ["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
            (
                [m.member_id, m.group_instance_id, m.client_id, m.host, _format_assignment(m.assignment)]
                for m in description.members
            ),
        )
    _print_lags(lags)
    return 0


def _print_lags(lags: list[PartitionLag]) -> None:
    print()
    if not lags:
        print("no committed offsets and no assigned partitions")
        return
    _print_table(
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID", "HOST"],
        (
            [lag.topic, lag.partition, lag.committed, lag.log_end, lag.lag, lag.member_id, lag.client_id, lag.host]
            for lag in lags
        ),
    )


async def _reset_offsets(args: argparse.Namespace, cluster: Cluster) -> int:
    admin = Admin(cluster)
    timestamp_ms = parse_datetime_ms(args.to_datetime) if args.to_datetime is not None else None
    description = await admin.describe_group(args.group)
    if description.state not in (STATE_EMPTY, STATE_DEAD):
        return _fail(
            f"cannot reset offsets of group {args.group!r}: it is {description.state} with "
            f"{len(description.members)} member(s); offsets can only be reset while the group is "
            "inactive (Empty). Stop its consumers first."
        )
    tps = await _topic_partitions(admin, args.topic)
    committed = await admin.list_committed_offsets(args.group, tps)
    earliest = _offsets_or_raise(await admin.log_offsets(tps, EARLIEST))
    latest = _offsets_or_raise(await admin.log_offsets(tps, LATEST))
    by_time: dict[TopicPartition, int] = {}
    if timestamp_ms is not None:
        by_time = _offsets_or_raise(await admin.log_offsets(tps, timestamp_ms))

    plan: dict[TopicPartition, int] = {}
    for tp in tps:
        current = committed.get(tp)
        if args.to_earliest:
            target = earliest[tp]
        elif args.to_latest:
            target = latest[tp]
        elif timestamp_ms is not None:
            found = by_time[tp]
            target = latest[tp] if found < 0 else found
        elif args.to_offset is not None:
            target = args.to_offset
        else:
            if current is None:
                raise ValueError(
                    f"cannot shift {tp[0]}-{tp[1]}: group {args.group!r} has no committed offset for it"
                )
            target = current.offset + args.shift_by
        plan[tp] = max(earliest[tp], min(latest[tp], target))

    _print_table(
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        (
            [args.group, tp[0], tp[1], committed[tp].offset if tp in committed else None, new]
            for tp, new in plan.items()
        ),
    )
    print()
    if not args.execute:
        print("dry run: nothing was changed; add --execute to commit these offsets")
        return 0
    await admin.alter_committed_offsets(args.group, plan)
    print(f"committed new offsets of {len(plan)} partition(s) for group {args.group}")
    return 0


def _offsets_or_raise(offsets: dict[TopicPartition, int | KafkaError]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for tp, value in offsets.items():
        if isinstance(value, KafkaError):
            raise value
        out[tp] = value
    return out


async def _delete(args: argparse.Namespace, cluster: Cluster) -> int:
    admin = Admin(cluster)
    status = 0
    for group in dict.fromkeys(args.group):
        try:
            await admin.delete_groups([group])
        except KafkaError as exc:
            status = _fail(str(exc))
        else:
            print(f"deleted group {group}")
    return status


async def _delete_offsets(args: argparse.Namespace, cluster: Cluster) -> int:
    admin = Admin(cluster)
    topic, partitions = _parse_topic(args.topic)
    await admin.delete_committed_offsets(args.group, topic, partitions)
    which = "all partitions" if partitions is None else "partitions " + ",".join(map(str, partitions))
    print(f"deleted committed offsets of group {args.group} for {topic} ({which})")
    return 0
