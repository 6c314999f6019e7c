"""The ``slipstream`` command: serve a broker, and manage topics, data and groups."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], int]

# After the coordinators have loaded (broker/broker.py: in a worker thread once the
# listener is open) and the collector's start-up pass (broker/gc_tuning.py, 1 s).
SAVE_KEPT_CODE_AFTER_S = 2.0


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, sized as shutil.get_terminal_size would, without importing
    shutil (and the zlib, bz2 and lzma it imports): argparse makes a formatter for every
    add_argument, so each `slipstream serve` start paid for them (~2 ms)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        if width is None:
            width = _terminal_columns() - 2  # (as HelpFormatter does with shutil's size)
        super().__init__(prog, indent_increment, max_help_position, width)


def _terminal_columns(fallback: int = 80) -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal of stdout, else 80."""
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or fallback  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return fallback


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        formatter_class=HelpFormatter,
        help="run a broker",
        description="Run a Slipstream broker. Settings come from defaults, then --config FILE "
        "(TOML or Java .properties), then SLIPSTREAM_* environment variables, then flags.",
    )
    p.add_argument("--config", help="config file (.toml, or key=value .properties)")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port to listen on (default 9092; 0 picks a free one)")
    p.add_argument("--data-dir", help="where partition logs live (default ./slipstream-data)")
    p.add_argument(
        "--storage", choices=["disk", "memory", "postgres"], help="disk (default), memory or postgres"
    )
    p.add_argument(
        "--database-url",
        help="PostgreSQL URL for --storage postgres (postgresql://user:password@host:port/db)",
    )
    p.add_argument("--advertised-host", help="host clients are told to connect to")
    p.add_argument("--advertised-port", type=int, help="port clients are told to connect to")
    p.add_argument(
        "--listeners", help="NAME://host:port,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; Kafka's listeners)"
    )
    p.add_argument("--advertised-listeners", help="NAME://host:port,... told to clients of each listener")
    p.add_argument("--auto-create-topics", choices=["true", "false"], help="create topics on first metadata request")
    p.add_argument("--default-partitions", type=int, help="partitions of auto-created topics")
    p.add_argument(
        "--durability",
        choices=["page-cache", "interval", "fsync"],
        help="page-cache (default: survives a process crash), interval fsync, or fsync before ack",
    )
    p.add_argument(
        "--admin-port",
        type=int,
        help="serve the web console (/), /metrics, /healthz, /readyz and the JSON API over HTTP on this port "
        "(default: off)",
    )
    p.add_argument("--admin-host", help="address of the admin listener (default: --host)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other setting, Kafka-style (e.g. --set group.initial.rebalance.delay.ms=0)",
    )
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    # Imported here, not at the top: main() has switched the collector off by now (see below).
    import asyncio
    import contextlib
    import logging
    import os

    from ..broker.broker import Broker
    from ..broker.config import build
    from . import kept_code

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    flags: dict[str, object] = {
        "host": args.host,
        "port": args.port,
        "data_dir": args.data_dir,
        "storage": args.storage,
        "database_url": args.database_url,
        "advertised_host": args.advertised_host,
        "advertised_port": args.advertised_port,
        "listeners": args.listeners,
        "advertised_listeners": args.advertised_listeners,
        "auto_create_topics": args.auto_create_topics,
        "default_partitions": args.default_partitions,
        "durability": args.durability,
        "admin_port": args.admin_port,
        "admin_host": args.admin_host,
    }
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        flags[key] = value
    config = build(args.config or os.environ.get("SLIPSTREAM_CONFIG"), None, flags)
    _install_uvloop()
    broker = Broker(config)

    async def serve() -> None:
        # What this start compiled was appended to the kept code's file as it went; it
        # is rewritten as one table (quicker to load) once the broker has served a while.
        later = asyncio.get_running_loop().call_later(SAVE_KEPT_CODE_AFTER_S, kept_code.save)
        try:
            await broker.serve_forever()
        finally:
            later.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return EXIT_OK


def _install_uvloop() -> None:
    import asyncio

    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def build_parser(*, serve_only: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slipstream",
        description="A Kafka-compatible broker built around consumer groups, with its own client.",
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(sub)
    if serve_only:
        # The client commands import the whole client; a broker start need not pay for that.
        return parser
    from . import acls, certs, client_commands, cluster, groups, pipeline, users

    client_commands.add_commands(sub)
    groups.add_commands(sub)
    users.add_commands(sub)
    acls.add_commands(sub)
    certs.add_commands(sub)
    pipeline.add_commands(sub)
    cluster.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    serving = bool(argv) and argv[0] == "serve"
    collecting = gc.isenabled()
    if serving:
        # Loading the broker makes ~30k long-lived objects and next to no garbage: young
        # passes over them only slow the start (~5% of its instructions).
        # Broker.serve_forever turns the collector back on (broker/gc_tuning.py).
        gc.disable()
        from . import kept_code

        # Before the broker's modules: their dataclasses' methods and codecs come compiled from
        # the last run.
        kept_code.install(kept_code.default_path())
    try:
        parser = build_parser(serve_only=serving)
        args = parser.parse_args(argv)
        func: Command | None = getattr(args, "func", None)
        if func is None:
            parser.print_help()
            return EXIT_USAGE
        try:
            return func(args)
        except (ValueError, OSError) as exc:
            print(f"slipstream {args.command}: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
    finally:
        if serving:
            kept_code.uninstall()
        if collecting:
            gc.enable()
