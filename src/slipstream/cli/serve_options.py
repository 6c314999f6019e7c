"""`slipstream serve`'s flags, declared once: the argparse parser is made from them
(cli/parser.py: help, errors, abbreviations), and ``read_serve_command`` reads a plain
command line with them without importing argparse (with gettext, about 10 M instructions
of every broker start)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any


class ServeOption:
    """One flag of `slipstream serve`: what argparse's add_argument is given."""

    __slots__ = ("appends", "choices", "default", "flag", "help", "metavar", "type")

    def __init__(
        self,
        flag: str,
        help: str,
        *,
        type: Callable[[str], Any] | None = None,
        choices: tuple[str, ...] | None = None,
        metavar: str | None = None,
        appends: bool = False,
        default: str | None = None,
    ) -> None:
        self.flag = flag
        self.help = help
        self.type = type
        self.choices = choices
        self.metavar = metavar
        self.appends = appends  # action="append": every use adds to a list (default [])
        self.default = default

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    def add_argument_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.type is not None:
            kwargs["type"] = self.type
        if self.choices is not None:
            kwargs["choices"] = list(self.choices)
        if self.appends:
            kwargs["action"] = "append"
            kwargs["default"] = []
        elif self.default is not None:
            kwargs["default"] = self.default
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        kwargs["help"] = self.help
        return kwargs


SERVE_DESCRIPTION = (
    "Run a Slipstream broker. Settings come from defaults, then --config FILE "
    "(TOML or Java .properties), then SLIPSTREAM_* environment variables, then flags."
)

SERVE_OPTIONS = (
    ServeOption("--config", "config file (.toml, or key=value .properties)"),
    ServeOption("--host", "address to listen on (default 127.0.0.1)"),
    ServeOption("--port", "port to listen on (default 9092; 0 picks a free one)", type=int),
    ServeOption("--data-dir", "where partition logs live (default ./slipstream-data)"),
    ServeOption("--storage", "disk (default), memory or postgres", choices=("disk", "memory", "postgres")),
    ServeOption("--database-url", "PostgreSQL URL for --storage postgres (postgresql://user:password@host:port/db)"),
    ServeOption("--advertised-host", "host clients are told to connect to"),
    ServeOption("--advertised-port", "port clients are told to connect to", type=int),
    ServeOption(
        "--listeners", "NAME://host:port,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; Kafka's listeners)"
    ),
    ServeOption("--advertised-listeners", "NAME://host:port,... told to clients of each listener"),
    ServeOption("--auto-create-topics", "create topics on first metadata request", choices=("true", "false")),
    ServeOption("--default-partitions", "partitions of auto-created topics", type=int),
    ServeOption(
        "--durability",
        "page-cache (default: survives a process crash), interval fsync, or fsync before ack",
        choices=("page-cache", "interval", "fsync"),
    ),
    ServeOption(
        "--admin-port",
        "serve the web console (/), /metrics, /healthz, /readyz and the JSON API over HTTP on this port "
        "(default: off)",
        type=int,
    ),
    ServeOption("--admin-host", "address of the admin listener (default: --host)"),
    ServeOption(
        "--set",
        "any other setting, Kafka-style (e.g. --set group.initial.rebalance.delay.ms=0)",
        appends=True,
        metavar="KEY=VALUE",
    ),
    ServeOption("--log-level", "DEBUG, INFO, WARNING, ERROR", default="INFO"),
)

_BY_FLAG = {option.flag: option for option in SERVE_OPTIONS}


def read_serve_command(argv: Sequence[str], serve: Callable[[Any], int]) -> SimpleNamespace | None:
    """The arguments argparse would give for ``argv`` (``serve`` then ``--flag value`` or
    ``--flag=value`` pairs, flags spelled in full), or None for anything else: help, an
    abbreviated or unknown flag, a missing or bad value. argparse then reads it, and
    words the error."""
    if not argv or argv[0] != "serve":
        return None
    values: dict[str, Any] = {option.dest: [] if option.appends else option.default for option in SERVE_OPTIONS}
    i = 1
    while i < len(argv):
        token = argv[i]
        flag, equals, value = token.partition("=")
        option = _BY_FLAG.get(flag)
        if option is None:
            return None
        if not equals:
            if i + 1 >= len(argv):
                return None
            value = argv[i + 1]
            i += 1
        i += 1
        if value.startswith("-") or not value:  # argparse's reading of these is subtle: its own
            return None
        converted: Any = value
        if option.type is not None:
            try:
                converted = option.type(value)
            except ValueError:
                return None
        if option.choices is not None and converted not in option.choices:
            return None
        if option.appends:
            values[option.dest].append(converted)
        else:
            values[option.dest] = converted
    return SimpleNamespace(command="serve", **values, func=serve)
