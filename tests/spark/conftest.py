"""Fixtures for the Spark tests: a broker subprocess, a local[2] SparkSession, helpers.

One SparkSession per test module (module-scoped fixture; starting one costs
seconds). Workers run this interpreter (PYSPARK_PYTHON), so they import the
installed slipstream package. Without pyspark the tests are skipped locally and
fail in CI (``make test`` installs the spark extra).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from spark_helpers import start_broker

from slipstream.testing.broker_process import BrokerProcess
from slipstream.testing.peers import IN_CI

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    if IN_CI:
        raise
    pytest.skip("pyspark/pyarrow not installed (pip install -e '.[spark]')", allow_module_level=True)


os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("broker"))
    yield b
    b.stop()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from slipstream.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("slipstream-tests")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    for q in session.streams.active:
        q.stop()
    session.stop()
    # getOrCreate() must not hand the next module this stopped session.
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


