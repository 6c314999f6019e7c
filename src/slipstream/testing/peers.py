"""The rule for test peers (third-party clients, codecs, the Java driver, Spark): a test
whose peer is missing is skipped on a developer's machine and fails in CI (CI=true),
where `make test` installs every peer, so a broken install step cannot pass as skips."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def missing_peer(reason: str) -> None:
    """Skip (locally) or fail (in CI) the calling test because a peer is absent."""
    if IN_CI:
        pytest.fail(f"{reason} (required in CI; `make test` installs it)")
    pytest.skip(reason)
