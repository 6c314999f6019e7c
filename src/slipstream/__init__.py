"""Slipstream: a Kafka-compatible broker, client and Spark data source built around consumer groups.

The public surface:

- ``slipstream.Broker`` / ``slipstream.BrokerConfig``: run a broker in-process
  (``async with Broker(storage="memory", port=0) as b``, or ``with Broker(...)``), or
  ``slipstream serve`` from the command line (``--admin-port`` adds /metrics,
  /healthz, /readyz and a JSON API over HTTP).
- ``slipstream.client``: the client, for any Kafka-compatible broker:
  ``Producer``, ``AIOProducer``, ``Consumer``, ``AIOConsumer``, ``ConsumerGroup``,
  ``Admin``, serializers and consumer statistics.
- ``slipstream.testing``: the pytest plugin (``slipstream_broker`` fixtures and
  helpers; loaded automatically when Slipstream is installed).
- ``slipstream.spark``: the PySpark data source (``spark.read.format("slipstream")``).

Everything else is internal and may change. The package ships ``py.typed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lazy_exports import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .broker.broker import Broker
    from .broker.config import BrokerConfig

__all__ = ["Broker", "BrokerConfig", "__version__"]


_load_export = lazy_exports(
    __name__, globals(), {"Broker": "broker.broker", "BrokerConfig": "broker.config"}
)


def __getattr__(name: str) -> Any:
    # Imported lazily so `import slipstream` stays cheap for client-only users.
    if name == "Broker":
        from .broker.broker import load_all_modules

        # All of the broker now, so an embedded start does not wait for its coordinators.
        load_all_modules()
    return _load_export(name)
