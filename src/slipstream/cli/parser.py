"""The ``slipstream`` command line's argparse parser (`slipstream serve` reads a plain
command line without it: serve_options.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from .serve_options import SERVE_DESCRIPTION, SERVE_OPTIONS


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


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser], serve: Callable[[Any], int]) -> None:
    p = sub.add_parser("serve", formatter_class=HelpFormatter, help="run a broker", description=SERVE_DESCRIPTION)
    for option in SERVE_OPTIONS:
        p.add_argument(option.flag, **option.add_argument_kwargs())
    p.set_defaults(func=serve)


def build_parser(serve: Callable[[Any], int], *, serve_only: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slipstream",
        description="A Kafka-compatible broker built around consumer groups, with its own client.",
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(sub, serve)
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
