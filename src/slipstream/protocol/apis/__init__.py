"""One module per Kafka API; importing this package registers them all in ``api.REGISTRY``."""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


load_all()
