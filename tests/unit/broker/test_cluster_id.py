"""The cluster id (broker/state.py ``load_cluster_id``): made once in Kafka's Uuid string
form, then read back from meta.properties as it was stored."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from slipstream.broker.state import load_cluster_id
from slipstream.log.metadata import DirectoryMetadata

DASH_FIRST = uuid.UUID(bytes=bytes([0xF8]) + bytes(5) + bytes([0x40]) + bytes(9))  # "-" is base64 62
OTHER = uuid.UUID("00112233-4455-4677-8899-aabbccddeeff")
OTHER_STRING = "ABEiM0RVRneImaq7zN3u_w"


class SharedMetadata:
    """A store a cluster's brokers share (one with ``update``), in memory."""

    def __init__(self, documents: dict[str, str] | None = None) -> None:
        self.documents = dict(documents or {})

    def load(self, name: str) -> str | None:
        return self.documents.get(name)

    def save(self, name: str, body: str) -> None:
        self.documents[name] = body

    def update(self, name: str, change: Callable[[str | None], str]) -> str:
        self.documents[name] = body = change(self.documents.get(name))
        return body


@pytest.fixture
def dash_first_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """uuid4 draws a UUID whose string starts with "-", then another."""
    drawn = iter([DASH_FIRST, OTHER])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(drawn))


@pytest.mark.usefixtures("dash_first_draw")
def test_a_new_cluster_id_never_starts_with_a_dash(tmp_path: Path) -> None:
    assert load_cluster_id(DirectoryMetadata(tmp_path)) == OTHER_STRING
    assert (tmp_path / "meta.properties").read_text() == f"version=1\ncluster.id={OTHER_STRING}\n"


@pytest.mark.usefixtures("dash_first_draw")
def test_a_new_cluster_id_in_a_shared_store_never_starts_with_a_dash() -> None:
    store = SharedMetadata()
    assert load_cluster_id(store) == OTHER_STRING
    assert store.documents["meta.properties"] == f"version=1\ncluster.id={OTHER_STRING}\n"


@pytest.mark.usefixtures("dash_first_draw")
def test_a_cluster_id_without_a_store_never_starts_with_a_dash() -> None:
    assert load_cluster_id(None) == OTHER_STRING


def test_a_stored_cluster_id_is_kept_as_it_was_written(tmp_path: Path) -> None:
    # One made before the rule (starting with "-") is still the cluster's id.
    stored = "version=1\ncluster.id=-AAAAAAAAAAAAAAAAAAAAA\n"
    (tmp_path / "meta.properties").write_text(stored)
    assert load_cluster_id(DirectoryMetadata(tmp_path)) == "-AAAAAAAAAAAAAAAAAAAAA"
    assert (tmp_path / "meta.properties").read_text() == stored
    shared = SharedMetadata({"meta.properties": stored})
    assert load_cluster_id(shared) == "-AAAAAAAAAAAAAAAAAAAAA"
    assert shared.documents["meta.properties"] == stored
