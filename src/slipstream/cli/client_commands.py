"""Client-side CLI commands (topics, produce, consume); they talk to any Kafka-compatible broker."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from ..client.admin import Admin
from ..client.aio_consumer import AIOConsumer
from ..client.cluster import Cluster, TopicInfo
from ..client.producer import AIOProducer
from ..client.security import PLAINTEXT, ClientSecurity
from ..protocol.compression import codec_by_name
from ..protocol.errors import KafkaError
from .progress import Progress
from .progress import wanted as progress_wanted
from .record_format import OUTPUTS, format_record
from .table import format_table

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_BATCH_RECORDS = 1000

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[argparse.ArgumentParser]


def _bootstrap_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP,
        help=f"host:port[,host:port...] of the cluster (default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "--command-config", metavar="FILE",
        help="client security settings, key=value per line with Kafka's names "
        "(security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.cafile, ...)",
    )


def security_of(args: argparse.Namespace) -> ClientSecurity:
    path = getattr(args, "command_config", None)
    if not path:
        return PLAINTEXT
    from ..broker.config import load_file

    return ClientSecurity.from_config(load_file(path))


def security_kwargs(security: ClientSecurity) -> dict[str, Any]:
    """The settings as keyword arguments of Producer/Consumer (their names are the fields')."""
    return dataclasses.asdict(security)


def add_commands(sub: Sub) -> None:
    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("--partitions", "-p", type=int, default=-1, help="partition count (default: broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE", help="topic config, repeatable")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_topics_create))
    p = tsub.add_parser("list", help="list topics")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_topics_list))
    p = tsub.add_parser("describe", help="partitions, offsets and configs of a topic")
    p.add_argument("name")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_topics_describe))
    p = tsub.add_parser("delete", help="delete a topic")
    p.add_argument("name")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_topics_delete))

    p = sub.add_parser("produce", help="produce lines from stdin or a file to a topic")
    p.add_argument("topic")
    p.add_argument("--file", "-f", metavar="PATH", help="read the lines from this file instead of stdin (UTF-8)")
    _progress_arg(p, "records sent, rate and (with --file) how much of the file")
    p.add_argument("--key-separator", "-k", help="split each line into key SEP value at the first SEP")
    p.add_argument("--partition", type=int, help="write every record to this partition")
    p.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_produce))

    p = sub.add_parser("consume", help="print a topic's records (from assigned partitions, or as a group member)")
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset (default: latest)")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--group", "-g", help="consume as a member of this consumer group, committing what is printed")
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--idle-timeout", type=float, help="exit after this many seconds without a record")
    p.add_argument("--print-key", action="store_true", help="print key SEP value (--output value)")
    p.add_argument(
        "--output", "-o", choices=OUTPUTS, default="value",
        help="value: the value only (default); text: partition, offset, key, value and headers on one "
        "line; json: one JSON object per record (non-UTF-8 bytes as {\"base64\": ...})",
    )
    p.add_argument("--key-separator", default="\t")
    p.add_argument(
        "--isolation-level",
        default="read_uncommitted",
        choices=["read_uncommitted", "read_committed"],
        help="read_committed: only committed transactions' records, up to the last stable offset",
    )
    _progress_arg(p, "records printed and their rate; by default only when stdout is not a terminal")
    _bootstrap_arg(p)
    p.set_defaults(func=_run(_consume))


def _progress_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help=f"show progress on stderr: {what} (default: when stderr is a terminal)",
    )


def _run(coro: Callable[[argparse.Namespace, Cluster], Awaitable[int]]) -> Callable[[argparse.Namespace], int]:
    def runner(args: argparse.Namespace) -> int:
        async def main() -> int:
            cluster = Cluster(args.bootstrap_server, client_id="slipstream-cli", security=security_of(args))
            try:
                return await coro(args, cluster)
            finally:
                await cluster.close()

        try:
            return asyncio.run(main())
        except KafkaError as exc:
            print(f"slipstream: {exc}", file=sys.stderr)
            return 1
        except (ConnectionError, OSError) as exc:
            print(f"slipstream: cannot reach {args.bootstrap_server}: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130

    return runner


def _parse_configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--config expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


async def _topics_create(args: argparse.Namespace, cluster: Cluster) -> int:
    await Admin(cluster).create_topic(
        args.name, args.partitions, args.replication_factor, _parse_configs(args.config)
    )
    print(f"created topic {args.name}")
    return 0


async def _topics_list(args: argparse.Namespace, cluster: Cluster) -> int:
    for topic in await Admin(cluster).list_topics(include_internal=args.internal):
        print(f"{topic.name}\t{topic.partition_count} partitions")
    return 0


async def _topics_describe(args: argparse.Namespace, cluster: Cluster) -> int:
    admin = Admin(cluster)
    info = await admin.describe_topic(args.name)
    print(f"topic {info.name}  id {info.topic_id}  partitions {info.partition_count}")
    print()
    offsets = await admin.partition_offsets(args.name)
    rows = [[p.partition, p.leader, p.earliest, p.latest] for p in offsets]
    for line in format_table(["PARTITION", "LEADER", "EARLIEST", "LATEST"], rows):
        print(line)
    configs = await admin.topic_configs(args.name)
    if configs:
        print()
        for line in format_table(["CONFIG", "VALUE"], sorted(configs.items())):
            print(line)
    return 0


async def _topics_delete(args: argparse.Namespace, cluster: Cluster) -> int:
    await Admin(cluster).delete_topic(args.name)
    print(f"deleted topic {args.name}")
    return 0


async def _produce(args: argparse.Namespace, cluster: Cluster, stdin: TextIO | None = None) -> int:
    codec_by_name(args.compression)  # a clear error for an unknown codec before connecting
    if args.file is not None:
        try:
            with open(args.file, "rb") as source:
                total = os.fstat(source.fileno()).st_size
                return await _produce_lines(args, cluster, _file_lines(source), total)
        except OSError as exc:
            if getattr(exc, "filename", None) == args.file:
                raise ValueError(f"cannot read {args.file}: {exc.strerror}") from None
            raise
    source_text = stdin or sys.stdin
    return await _produce_lines(args, cluster, ((line, 0) for line in source_text), None)


def _file_lines(source: BinaryIO) -> Iterator[tuple[str, int]]:
    """(line, bytes read so far) for each line of a file opened in binary mode."""
    done = 0
    for number, raw in enumerate(source, 1):
        done += len(raw)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"line {number} of the file is not UTF-8") from None
        # The same lines as stdin's universal newlines give.
        yield line.removesuffix("\n").removesuffix("\r") + "\n", done


async def _produce_lines(
    args: argparse.Namespace, cluster: Cluster, lines: Iterable[tuple[str, int]], total: int | None
) -> int:
    progress = Progress(sys.stderr, args.topic, enabled=progress_wanted(args.progress, sys.stderr), total_bytes=total)
    sent = 0
    done = 0
    async with AIOProducer(
        args.bootstrap_server, client_id="slipstream-cli", compression=args.compression,
        **security_kwargs(cluster.security),
    ) as producer:
        futures = []
        for line, done in lines:
            line = line.rstrip("\n")
            key: bytes | None = None
            value = line
            if args.key_separator:
                k, sep, v = line.partition(args.key_separator)
                if sep:
                    key, value = k.encode(), v
            futures.append(
                await producer.send(args.topic, value.encode(), key=key, partition=args.partition)
            )
            if len(futures) >= _BATCH_RECORDS:
                sent += await _wait_all(futures)
                futures = []
                progress.update(sent, done)
        sent += await _wait_all(futures)
    progress.update(sent, total if total is not None else done)
    progress.finish()
    print(f"produced {sent} records to {args.topic}", file=sys.stderr)
    return 0


async def _wait_all(futures: list[asyncio.Future[Any]]) -> int:
    for fut in futures:
        await fut  # raises the broker's error for the first record that failed
    return len(futures)


async def _consume(args: argparse.Namespace, cluster: Cluster, out: TextIO | None = None) -> int:
    """Print records through the client's AIOConsumer: assigned partitions, or a group with --group."""
    sink = out or sys.stdout
    info = await Admin(cluster).describe_topic(args.topic)
    if args.partition is not None and args.partition not in info.leaders:
        raise ValueError(f"topic {args.topic} has no partition {args.partition}")
    if args.partition is not None and args.group is not None:
        raise ValueError("--partition and --group exclude each other: a group member gets its partitions assigned")
    reset = "earliest" if args.from_beginning else "latest"
    # Progress on stderr would garble records printed to the same terminal: by default
    # only when stdout goes elsewhere (a file, a pipe).
    show = args.progress
    if show is None:
        show = progress_wanted(None, sys.stderr) and not progress_wanted(None, sink)
    progress = Progress(sys.stderr, args.topic, enabled=show)
    try:
        return await _consume_loop(args, cluster, info, sink, reset, progress)
    finally:
        progress.finish()


async def _consume_loop(
    args: argparse.Namespace, cluster: Cluster, info: TopicInfo, sink: TextIO, reset: str, progress: Progress
) -> int:
    printed = 0
    last_record = time.monotonic()
    async with AIOConsumer(
        args.bootstrap_server,
        group_id=args.group,
        client_id="slipstream-cli",
        auto_offset_reset=reset,
        isolation_level=args.isolation_level,
        **security_kwargs(cluster.security),
    ) as consumer:
        if args.group is not None:
            consumer.subscribe([args.topic])
        else:
            parts = [args.partition] if args.partition is not None else sorted(info.leaders)
            await consumer.assign([(args.topic, p) for p in parts])
        while True:
            remaining = None if args.max_messages is None else args.max_messages - printed
            batch = await consumer.getmany(timeout_s=0.5, max_records=remaining)
            for msg in batch:
                line = format_record(msg, args.output, print_key=args.print_key, key_separator=args.key_separator)
                sink.write(line + "\n")
            if batch:
                printed += len(batch)
                last_record = time.monotonic()
                sink.flush()
                progress.update(printed)
                if args.group is not None:
                    await consumer.commit()
            if args.max_messages is not None and printed >= args.max_messages:
                return 0
            if args.idle_timeout is not None and time.monotonic() - last_record >= args.idle_timeout:
                return 0
