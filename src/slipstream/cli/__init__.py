"""The ``slipstream`` command: serve a broker, and manage topics, data and groups."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (argparse is imported only where a command line needs it: parser.py)
    import argparse

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

Command = Callable[[Any], int]  # called with the parsed arguments

# After the coordinators have loaded (broker/broker.py: in a worker thread once the
# listener is open) and the collector's start-up pass (broker/gc_tuning.py, 1 s).
SAVE_KEPT_CODE_AFTER_S = 2.0


def _serve(args: Any) -> int:
    """``args``: argparse's Namespace, or serve_options.read_serve_command's."""
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
    from .parser import build_parser

    return build_parser(_serve, serve_only=serve_only)


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
        args: Any = None
        if serving:
            from .serve_options import read_serve_command

            args = read_serve_command(argv, _serve)  # None: argparse reads it (and words any error)
        if args is None:
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
