"""One module per API. Each declares SPEC (the protocol ApiSpec), MIN_VERSION, MAX_VERSION
and ``async def handle(ctx, request)``; the ApiVersions answer is built from these.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

HANDLERS: dict[int, ModuleType] = {}


def load_all() -> dict[int, ModuleType]:
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if spec is None:
            continue
        if spec.key in HANDLERS and HANDLERS[spec.key] is not module:
            raise RuntimeError(f"two handler modules for API key {spec.key}")
        HANDLERS[spec.key] = module
    return HANDLERS
