"""Client-side CLI commands (topics, produce, consume); they talk to any Kafka-compatible broker."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    return None
