"""ACL bindings kept as the ``acls.json`` document of the broker's metadata store (a
file in the data dir, or a row of the postgres store), as SCRAM credentials are.

Every change replaces the whole document atomically and durably (for files: temporary
file, fsync, rename), so a kill -9 leaves either the old or the new set; the broker
replays it into its ``Authorizer`` at start. A memory-storage broker keeps ACLs in
memory only.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...log.metadata import DirectoryMetadata, MetadataStore
from .acl import AclBinding

FILE_NAME = "acls.json"


class AclStore:
    def __init__(self, where: MetadataStore | Path | None) -> None:
        """``where``: the broker's metadata store, a data directory, or None (memory only)."""
        self.metadata: MetadataStore | None = DirectoryMetadata(where) if isinstance(where, Path) else where

    def load(self) -> list[AclBinding]:
        return parse(self.metadata.load(FILE_NAME) if self.metadata is not None else None)

    def save(self, bindings: list[AclBinding]) -> None:
        if self.metadata is None:
            return
        doc = {"version": 1, "acls": [b.to_json() for b in sorted(bindings)]}
        self.metadata.save(FILE_NAME, json.dumps(doc, indent=1))


def parse(text: str | None) -> list[AclBinding]:
    """The bindings of an ``acls.json`` document (None: no document, no binding)."""
    if text is None:
        return []
    return [AclBinding.from_json(entry) for entry in json.loads(text).get("acls", [])]
