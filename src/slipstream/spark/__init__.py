"""Slipstream on Apache Spark (PySpark 4.x Python Data Source API).

``register(spark)`` makes ``format("slipstream")`` available to a SparkSession::

    from slipstream.spark import register
    register(spark)
    df = (spark.readStream.format("slipstream")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").option("group.id", "my-job").load())

Importing this package does not import pyspark; the data source classes load on use.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["GroupProgressListener", "SlipstreamDataSource", "register"]


def register(spark: SparkSession) -> SparkSession:
    """Register the ``slipstream`` format with ``spark``; returns ``spark``."""
    from .source import SlipstreamDataSource

    if not getattr(spark, "_slipstream_registered", False):
        spark.dataSource.register(SlipstreamDataSource)
        # (A session class that refuses attributes just registers again next time.)
        with contextlib.suppress(AttributeError):
            spark._slipstream_registered = True  # type: ignore[attr-defined]
    return spark


def __getattr__(name: str) -> Any:
    if name == "SlipstreamDataSource":
        from .source import SlipstreamDataSource

        return SlipstreamDataSource
    if name == "GroupProgressListener":
        from .progress import GroupProgressListener

        return GroupProgressListener
    raise AttributeError(name)
