"""Small durable files holding one offset (e.g. the log start after DeleteRecords).

Format: a version line ``1`` then the offset, as text. Written to a temporary file,
fsynced and renamed over the old one, then the directory is fsynced.
"""

from __future__ import annotations

import os
from pathlib import Path

_VERSION = "1"


def read_offset(path: Path) -> int | None:
    """The stored offset, or None if the file is missing or unreadable."""
    try:
        lines = path.read_text(encoding="ascii").split()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if len(lines) != 2 or lines[0] != _VERSION:
        return None
    try:
        return int(lines[1])
    except ValueError:
        return None


def write_offset(path: Path, offset: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{_VERSION}\n{offset}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
