"""A package's exported names imported from their modules on first use (PEP 562).

A package lists ``name -> module`` and sets ``__getattr__`` to what ``lazy_exports`` returns,
so importing one module of the package does not load all of it. This module imports nothing
of ours (any package may use it) and nothing at import time (it runs at start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` whose globals are ``namespace``: ``exports``
    maps each exported name to the module (relative to ``package``, e.g. ``"broker.config"``)
    that defines it. A loaded name is stored in ``namespace``, so it is looked up only once.
    """

    def load(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # Here, not at the top: `import slipstream` does not otherwise load importlib.
        from importlib import import_module

        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    return load
