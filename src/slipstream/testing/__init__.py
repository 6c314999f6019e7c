"""Testing support: the pytest plugin's fixtures (``plugin``), helpers for tests against
a broker (``create_topic``, ``read_to_end``), the test-peer rule and the group simulator."""

from __future__ import annotations

from typing import Any

__all__ = ["create_topic", "read_to_end"]


def __getattr__(name: str) -> Any:
    # Lazily: the plugin module imports this package at pytest start-up, which should
    # not load the whole client.
    if name in __all__:
        from . import helpers

        return getattr(helpers, name)
    raise AttributeError(name)
