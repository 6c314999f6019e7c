"""A SparkSession for slipstream's pipelines and benchmarks, with the data source registered.

Run by ``spark-submit`` (the driver then finds ``PYSPARK_GATEWAY_PORT`` set), the
session, master and Python interpreter are spark-submit's; otherwise a local
session is made (``local[*]`` unless ``master`` says otherwise) whose Python
workers use this interpreter, so they can import slipstream.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_session(
    app_name: str, master: str | None = None, conf: Mapping[str, str] | None = None, *, log_level: str = "WARN"
) -> SparkSession:
    """The active session (made if needed), with ``format("slipstream")`` registered and Spark's
    log level set (so per-batch progress lines are not buried under INFO logs)."""
    from pyspark.sql import SparkSession

    from . import register

    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.master(master or "local[*]")
            .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
            .config("spark.ui.showConsoleProgress", "false")
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_level:
        spark.sparkContext.setLogLevel(log_level)
    return register(spark)
