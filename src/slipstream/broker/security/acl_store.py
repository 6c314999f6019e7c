"""ACL bindings kept as the ``acls.json`` document of the broker's metadata store (a
file in the data dir, or a row of the postgres store), as SCRAM credentials are.

Every change is applied to the document as stored now (in a cluster, other brokers
change it too) and replaces it atomically and durably (for files: temporary file,
fsync, rename), so a kill -9 leaves either the old or the new set; the broker replays
it into its ``Authorizer`` at start. A memory-storage broker keeps ACLs in
memory only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...log.metadata import DirectoryMetadata, MetadataStore, update_document
from .acl import AclBinding, AclFilter

FILE_NAME = "acls.json"


@dataclass(frozen=True)
class StoredChange:
    """A change applied to the stored set."""

    bindings: list[AclBinding]  # the stored set after it
    # Taken out of the stored set by it: in a cluster these include ACLs created through
    # another broker that this one had not heard of yet.
    deleted: frozenset[AclBinding]


class AclStore:
    def __init__(self, where: MetadataStore | str | os.PathLike[str] | None) -> None:
        """``where``: the broker's metadata store, a data directory (a path), or None
        (memory only)."""
        self.metadata: MetadataStore | None = (
            DirectoryMetadata(where) if isinstance(where, (str, os.PathLike)) else where
        )

    def load(self) -> list[AclBinding]:
        return parse(self.metadata.load(FILE_NAME) if self.metadata is not None else None)

    def apply(
        self, added: Sequence[AclBinding] = (), removed: Sequence[AclBinding] = (), removed_by: Sequence[AclFilter] = ()
    ) -> StoredChange | None:
        """Add ``added`` and drop ``removed`` and whatever ``removed_by`` matches in the
        stored set as it is now; None without a store."""
        if self.metadata is None:
            return None
        deleted: set[AclBinding] = set()

        def change(current: str | None) -> str:
            before = set(parse(current))
            bindings = (before | set(added)) - set(removed)
            kept = {b for b in bindings if not any(f.matches(b) for f in removed_by)}
            deleted.clear()  # a store may run the change again (a retried transaction)
            deleted.update(before - kept)
            return render(kept)

        stored = parse(update_document(self.metadata, FILE_NAME, change))
        return StoredChange(stored, frozenset(deleted))


def render(bindings: Iterable[AclBinding]) -> str:
    """The ``acls.json`` document of these bindings."""
    import json  # (here, not at the top: a broker with no ACLs never parses their document)

    return json.dumps({"version": 1, "acls": [b.to_json() for b in sorted(bindings)]}, indent=1)


def parse(text: str | None) -> list[AclBinding]:
    """The bindings of an ``acls.json`` document (None: no document, no binding)."""
    if text is None:
        return []
    import json  # (here, not at the top: a broker with no ACLs never parses their document)

    return [AclBinding.from_json(entry) for entry in json.loads(text).get("acls", [])]
