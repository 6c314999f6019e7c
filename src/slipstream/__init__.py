"""Slipstream: a Kafka-compatible broker, client and Spark data source built around consumer groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .broker.broker import Broker
    from .broker.config import BrokerConfig

__all__ = ["Broker", "BrokerConfig", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported lazily so `import slipstream` stays cheap for client-only users.
    if name == "Broker":
        from .broker.broker import Broker

        return Broker
    if name == "BrokerConfig":
        from .broker.config import BrokerConfig

        return BrokerConfig
    raise AttributeError(name)
