"""One module per Kafka API; each registers its ApiSpec in ``api.REGISTRY`` when imported.

``load_all()`` imports (registers) every one; importing the package alone does not, so a
broker answering its first requests loads only the APIs it is asked for.
"""

from __future__ import annotations

import importlib


def load_all() -> None:
    import pkgutil  # (here: a serving broker never lists the package)

    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
