"""SCRAM credentials per user and mechanism, kept as the ``scram-credentials.json``
document of the broker's metadata store (a file in the data dir, or a row of the
postgres store).

Only what RFC 5802 servers keep is stored: salt, iterations, StoredKey and ServerKey.
Each change is applied to the document as stored now (in a cluster, other brokers
change it too) and replaces it atomically and durably (for files: temporary file,
fsync, rename), so a kill -9 leaves either the old or the new set. A memory-storage
broker keeps them in memory only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ...log.metadata import DirectoryMetadata, MetadataStore, update_document
from ...protocol.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramMechanism,
    b64,
    unb64,
)

log = logging.getLogger(__name__)

FILE_NAME = "scram-credentials.json"


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps of a user's SCRAM password for one mechanism (RFC 5802)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        return cls(salt, mechanism.stored_key(salted_password), mechanism.server_key(salted_password), iterations)

    @classmethod
    def from_password(
        cls, mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramCredential:
        import secrets  # (where used: see protocol/scram.py)

        salt = secrets.token_bytes(32)
        return cls.from_salted_password(mechanism, salt, mechanism.salted_password(password, salt, iterations), iterations)


class CredentialError(ValueError):
    """A credential that cannot be stored (unknown mechanism, bad iterations, empty name)."""


def check_credential(user: str, mechanism: str, iterations: int) -> ScramMechanism:
    if not user:
        raise CredentialError("user name must not be empty")
    found = MECHANISMS.get(mechanism)
    if found is None:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r} ({', '.join(MECHANISMS)})")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(f"iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}, not {iterations}")
    return found


class CredentialStore:
    def __init__(self, where: MetadataStore | str | os.PathLike[str] | None) -> None:
        """``where``: the broker's metadata store, a data directory (a path), or None
        (memory only)."""
        self.metadata: MetadataStore | None = (
            DirectoryMetadata(where) if isinstance(where, (str, os.PathLike)) else where
        )
        self.path = os.path.join(where, FILE_NAME) if isinstance(where, (str, os.PathLike)) else None
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        text = self.metadata.load(FILE_NAME) if self.metadata is not None else None
        if text is None:
            return
        for user, creds in _parse(text).items():
            self._users.setdefault(user, {}).update(creds)

    def replace(self, text: str | None) -> None:
        """Hold exactly the credentials of a ``scram-credentials.json`` document (a cluster
        broker following changes made through another)."""
        self._users = _parse(text) if text is not None else {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def of_user(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def put(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[mechanism] = credential

    def remove(self, user: str, mechanism: str) -> bool:
        creds = self._users.get(user)
        if creds is None or mechanism not in creds:
            return False
        del creds[mechanism]
        if not creds:
            del self._users[user]
        return True

    def save(self) -> None:
        if self.metadata is None:
            return
        self.metadata.save(FILE_NAME, self.document())

    def apply(
        self, deleted: Sequence[tuple[str, str]], upserted: Sequence[tuple[str, str, ScramCredential]]
    ) -> None:
        """Delete these (user, mechanism) credentials and put those to the stored document as
        it is now, then hold what it holds after (keeping changes made through other brokers
        of a cluster). Nothing changes here if the write fails."""
        if self.metadata is None:
            _change(self._users, deleted, upserted)
            return

        def change(current: str | None) -> str:
            users = _parse(current) if current is not None else {}
            _change(users, deleted, upserted)
            return _render(users)

        self.replace(update_document(self.metadata, FILE_NAME, change))

    def document(self) -> str:
        """The ``scram-credentials.json`` document of the credentials held."""
        return _render(self._users)

    def bootstrap(self, spec: str, mechanisms: list[str]) -> None:
        """Create users named in ``scram.bootstrap.users`` ("name:password,...") that have no
        credential yet, for every enabled SCRAM mechanism; existing users are left alone.
        Only the missing users are added, to the stored document as it is now, so a change
        made through another broker of a cluster at the same moment is kept."""
        wanted: dict[str, str] = {}
        for entry in filter(None, (e.strip() for e in spec.split(","))):
            user, sep, password = entry.partition(":")
            if not sep or not user or not password:
                raise ValueError(f"scram.bootstrap.users: {entry!r} must look like name:password")
            wanted.setdefault(user, password)
        # Salting is slow (PBKDF2): only for users not held already, outside the store's lock.
        made = {
            user: {m: ScramCredential.from_password(MECHANISMS[m], password) for m in mechanisms}
            for user, password in wanted.items()
            if user not in self._users
        }
        if not made:
            return
        added: list[str] = []

        def add_missing(users: dict[str, dict[str, ScramCredential]]) -> None:
            added.clear()  # a store may run the change again (a retried transaction)
            for user, creds in made.items():
                if user not in users:
                    users[user] = dict(creds)
                    added.append(user)

        if self.metadata is None:
            add_missing(self._users)
        else:

            def change(current: str | None) -> str:
                users = _parse(current) if current is not None else {}
                add_missing(users)
                return _render(users)

            self.replace(update_document(self.metadata, FILE_NAME, change))
        if added:
            log.info("created SCRAM users from scram.bootstrap.users: %s", ", ".join(added))


def _change(
    users: dict[str, dict[str, ScramCredential]],
    deleted: Sequence[tuple[str, str]],
    upserted: Sequence[tuple[str, str, ScramCredential]],
) -> None:
    for user, mechanism in deleted:
        creds = users.get(user, {})
        creds.pop(mechanism, None)
        if not creds:
            users.pop(user, None)
    for user, mechanism, credential in upserted:
        users.setdefault(user, {})[mechanism] = credential


def _render(users: dict[str, dict[str, ScramCredential]]) -> str:
    doc = {
        "version": 1,
        "users": {
            user: {
                mech: {
                    "salt": b64(c.salt),
                    "stored_key": b64(c.stored_key),
                    "server_key": b64(c.server_key),
                    "iterations": c.iterations,
                }
                for mech, c in sorted(creds.items())
            }
            for user, creds in sorted(users.items())
        },
    }
    import json  # (where used: a broker without SCRAM users never parses the document)

    return json.dumps(doc, indent=1)


def _parse(text: str) -> dict[str, dict[str, ScramCredential]]:
    import json  # (where used: a broker without SCRAM users never parses the document)

    users: dict[str, dict[str, ScramCredential]] = {}
    for user, creds in json.loads(text).get("users", {}).items():
        for mechanism, c in creds.items():
            users.setdefault(user, {})[mechanism] = ScramCredential(
                unb64(c["salt"]), unb64(c["stored_key"]), unb64(c["server_key"]), int(c["iterations"])
            )
    return users
