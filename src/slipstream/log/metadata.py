"""Where a broker keeps its small metadata documents (topics, group configs, cluster
id, producer-id blocks): files in the data directory, or rows of the postgres store
(``postgres.PostgresMetadata``), so a broker over a database needs no local state."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol


class MetadataStore(Protocol):
    def load(self, name: str) -> str | None:
        """The document's text, or None if it was never saved."""
        ...

    def save(self, name: str, body: str) -> None:
        """Replace the document, durably and atomically."""
        ...


class DirectoryMetadata:
    """One file per document in ``directory`` (written to a temp file, fsynced, renamed)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        # (a str, not a pathlib.Path: a broker start need not import pathlib)
        self.directory = os.fspath(directory)

    def load(self, name: str) -> str | None:
        try:
            with open(os.path.join(self.directory, name)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def save(self, name: str, body: str) -> None:
        path = os.path.join(self.directory, name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def update_document(store: MetadataStore, name: str, change: Callable[[str | None], str]) -> str:
    """Replace the document by ``change(current)`` and return the new text. A store shared
    by a cluster's brokers (one with ``update``) does it with no other change in between,
    so a change made through another broker is kept; a data directory has one broker."""
    update: Callable[[str, Callable[[str | None], str]], str] | None = getattr(store, "update", None)
    if update is not None:
        return update(name, change)
    body = change(store.load(name))
    store.save(name, body)
    return body
