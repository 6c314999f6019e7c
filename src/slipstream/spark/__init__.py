"""Slipstream on Apache Spark (PySpark 4.x Python Data Source API).

``get_session(app_name)`` makes a session whose Python workers run this interpreter
(so they can import slipstream), with ``format("slipstream")`` registered;
``register(spark)`` registers the format with a session made elsewhere::

    from slipstream.spark import get_session
    spark = get_session("my-job")
    df = (spark.readStream.format("slipstream")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").option("group.id", "my-job").load())

Importing this package does not import pyspark; the data source classes load on use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["GroupProgressListener", "SlipstreamDataSource", "get_session", "register"]

log = logging.getLogger(__name__)


def register(spark: SparkSession) -> SparkSession:
    """Register the ``slipstream`` format with ``spark``; returns ``spark``."""
    from .source import SlipstreamDataSource

    if not getattr(spark, "_slipstream_registered", False):
        _warn_if_workers_lack_slipstream(spark)
        spark.dataSource.register(SlipstreamDataSource)
        # (A session class that refuses attributes just registers again next time.)
        with contextlib.suppress(AttributeError):
            spark._slipstream_registered = True  # type: ignore[attr-defined]
    return spark


def _warn_if_workers_lack_slipstream(spark: SparkSession) -> None:
    """Spark starts its Python workers with PYSPARK_PYTHON as the JVM saw it at start-up
    (``python3`` from PATH by default; the ``spark.pyspark.python`` setting is not used for
    data sources), which may not be the interpreter that has slipstream and pyarrow."""
    with contextlib.suppress(Exception):  # a remote (Spark Connect) session has no context
        worker_python = spark.sparkContext.pythonExec
        if os.path.abspath(_which(worker_python)) != sys.executable:
            log.warning(
                "Spark's Python workers run %r, not this interpreter (%s): the slipstream data "
                "source will fail there unless slipstream and pyarrow are installed for it. "
                "Set PYSPARK_PYTHON=%s before the session starts, or use "
                "slipstream.spark.get_session().",
                worker_python,
                sys.executable,
                sys.executable,
            )


def _which(program: str) -> str:
    import shutil

    return shutil.which(program) or program


# The data source classes import pyspark, so they load on first use.
__getattr__ = lazy_exports(
    __name__,
    globals(),
    {
        "GroupProgressListener": "progress",
        "SlipstreamDataSource": "source",
        "get_session": "session",
    },
)
