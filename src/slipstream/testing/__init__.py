"""Testing support: the pytest plugin's fixtures (``plugin``), helpers for tests against
a broker (``create_topic``, ``read_to_end``), the test-peer rule and the group simulator."""

from __future__ import annotations

from ..lazy_exports import lazy_exports

__all__ = ["create_topic", "read_to_end"]


# Lazily: the plugin module imports this package at pytest start-up, which should
# not load the whole client.
__getattr__ = lazy_exports(
    __name__, globals(), {"create_topic": "helpers", "read_to_end": "helpers"}
)
