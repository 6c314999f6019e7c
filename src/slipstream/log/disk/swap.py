"""The crash-safe swap of compacted segments into a disk log's directory.

A compaction job writes its new segments into ``cleaning/``, then writes the swap
marker (which old segments each new one replaces) with an fsync: that is the commit
point. It then deletes the old files and moves the new ones in (indexes first, data
last). Recovery calls ``finish_interrupted_compaction`` before opening segments: a
marker means the swap is completed; no marker means the staged files are discarded.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from slipstream.log.disk.checkpoint import sync_directory

log = logging.getLogger(__name__)

STAGING_DIR = "cleaning"
SWAP_MARKER = "compaction.swap"
_MARKER_VERSION = 1
# The order files are moved in: data last.
SEGMENT_SUFFIXES = (".index", ".timeindex", ".txnindex", ".log")


def segment_file(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{base:020d}{suffix}"


def write_swap_marker(directory: Path, groups: list[tuple[int, list[int]]]) -> None:
    body = {
        "version": _MARKER_VERSION,
        "groups": [{"base": base, "replaces": replaces} for base, replaces in groups],
    }
    tmp = directory / (SWAP_MARKER + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(body).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / SWAP_MARKER)
    sync_directory(directory)


def finish_interrupted_compaction(directory: Path) -> None:
    """Before a disk log's segments are opened: complete a swap that passed its commit
    point, or discard one that did not."""
    marker = directory / SWAP_MARKER
    staging = directory / STAGING_DIR
    (directory / (SWAP_MARKER + ".tmp")).unlink(missing_ok=True)
    groups = None
    if marker.exists():
        try:
            body = json.loads(marker.read_text())
            if body.get("version") != _MARKER_VERSION:
                raise ValueError(f"unknown version {body.get('version')!r}")
            groups = [(int(g["base"]), [int(b) for b in g["replaces"]]) for g in body["groups"]]
        except (ValueError, KeyError, TypeError) as exc:
            # Written atomically, so only outside damage gets here: keep the old segments.
            log.error("ignoring unreadable compaction marker %s: %s", marker, exc)
    if groups is not None:
        for base, replaces in groups:
            for old in replaces:
                if old != base:
                    for suffix in SEGMENT_SUFFIXES:
                        segment_file(directory, old, suffix).unlink(missing_ok=True)
            if segment_file(staging, base, ".log").exists():
                for suffix in SEGMENT_SUFFIXES:  # a staged file already moved is simply absent
                    staged = segment_file(staging, base, suffix)
                    if staged.exists():
                        os.replace(staged, segment_file(directory, base, suffix))
        sync_directory(directory)
        log.info("completed an interrupted compaction swap in %s", directory)
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
    if marker.exists():
        marker.unlink()
        sync_directory(directory)
