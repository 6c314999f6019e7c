"""Packaged pipelines: ``slipstream pipeline run NAME``.

Each pipeline is a module with ``DESCRIPTION``, ``add_arguments(parser)`` (no
pyspark import needed) and ``run_from_args(args) -> int``. The same command line
runs locally (``local[*]``) or on a cluster through ``spark-submit`` with
``slipstream/cli/spark_submit.py`` (``slipstream pipeline script`` prints its path).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    module: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


PIPELINES: dict[str, PipelineSpec] = {
    "pageview-stats": PipelineSpec("pageview-stats", "slipstream.spark.pipelines.pageview_stats"),
}
