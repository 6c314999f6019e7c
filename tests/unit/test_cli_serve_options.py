"""`slipstream serve`'s command line read without argparse gives what argparse gives, and
leaves anything else (help, abbreviations, errors) to argparse."""

from __future__ import annotations

import pytest

from slipstream import cli
from slipstream.cli.serve_options import read_serve_command

READ_WITHOUT_ARGPARSE = [
    ["serve"],
    ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", "/tmp/d", "--log-level", "WARNING"],
    ["serve", "--port=9092", "--storage=memory", "--durability", "fsync", "--auto-create-topics", "false"],
    ["serve", "--set", "a.b=1", "--set=c.d=x=y", "--set", "e=f", "--admin-port", "9644", "--admin-host", "0.0.0.0"],
    ["serve", "--port", "1", "--port", "2", "--default-partitions", " 3", "--advertised-port", "7"],
    ["serve", "--config", "broker.properties", "--listeners", "PLAINTEXT://:9092,SSL://:9093"],
    ["serve", "--advertised-listeners", "PLAINTEXT://h:1", "--advertised-host", "h", "--database-url", "postgresql://x"],
]

LEFT_TO_ARGPARSE = [
    ["serve", "--help"],
    ["serve", "-h"],
    ["serve", "--por", "5"],  # an abbreviation (argparse takes it)
    ["serve", "--port", "x"],
    ["serve", "--port"],
    ["serve", "--port", "-1"],
    ["serve", "--storage", "tape"],
    ["serve", "--host", ""],
    ["serve", "stray"],
    ["serve", "--unknown", "1"],
    ["topics", "list"],
    [],
]


@pytest.mark.parametrize("argv", READ_WITHOUT_ARGPARSE)
def test_a_plain_serve_command_line_reads_as_argparse_reads_it(argv: list[str]) -> None:
    read = read_serve_command(argv, cli._serve)
    assert read is not None
    assert vars(read) == vars(cli.build_parser(serve_only=True).parse_args(argv))


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE)
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert read_serve_command(argv, cli._serve) is None


def test_the_appended_list_is_fresh_each_time() -> None:
    first = read_serve_command(["serve", "--set", "a=1"], cli._serve)
    second = read_serve_command(["serve"], cli._serve)
    assert first is not None and second is not None
    assert (first.set, second.set) == (["a=1"], [])
