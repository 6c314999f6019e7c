"""Packages export names that load from their modules on first use (slipstream.lazy_exports)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from slipstream.lazy_exports import lazy_exports

LAZY_PACKAGES = [
    "slipstream",
    "slipstream.coordinator",
    "slipstream.coordinator.consumer",
    "slipstream.coordinator.consumer.assignors",
    "slipstream.spark",
    "slipstream.testing",
]


def test_a_name_loads_from_its_module_and_is_kept_in_the_namespace() -> None:
    from slipstream.coordinator.timer import ManualTimer

    namespace: dict[str, object] = {}
    load = lazy_exports("slipstream.coordinator", namespace, {"ManualTimer": "timer"})

    assert load("ManualTimer") is ManualTimer
    assert namespace == {"ManualTimer": ManualTimer}


def test_a_name_in_a_subpackage_module_loads() -> None:
    from slipstream.broker.config import BrokerConfig

    load = lazy_exports("slipstream", {}, {"BrokerConfig": "broker.config"})

    assert load("BrokerConfig") is BrokerConfig


def test_a_name_not_exported_is_an_attribute_error() -> None:
    namespace: dict[str, object] = {}
    load = lazy_exports("slipstream.coordinator", namespace, {"ManualTimer": "timer"})

    with pytest.raises(
        AttributeError, match=r"module 'slipstream\.coordinator' has no attribute 'NoSuchName'"
    ):
        load("NoSuchName")
    assert namespace == {}
    assert not hasattr(importlib.import_module("slipstream.coordinator"), "NoSuchName")


@pytest.mark.parametrize("package", [p for p in LAZY_PACKAGES if p != "slipstream.spark"])
def test_every_name_in_all_resolves(package: str) -> None:
    # (slipstream.spark's names import pyspark; tests/spark uses them.)
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_importing_the_packages_loads_none_of_their_exports() -> None:
    code = (
        f"import sys, {', '.join(LAZY_PACKAGES)}\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('slipstream'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()

    assert loaded == sorted([*LAZY_PACKAGES, "slipstream.lazy_exports"])
