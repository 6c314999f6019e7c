"""``slipstream cluster status``'s BROKERS table, rendered from registry rows."""

from __future__ import annotations

from slipstream.broker.cluster.assignment import BrokerRow, Lease, ListenerEndpoint
from slipstream.cli.cluster import render

NOW = 100_000


def brokers_table(rows: list[BrokerRow], live_ids: list[int]) -> list[list[str]]:
    lines = render(NOW, rows, live_ids, {("orders", 0): Lease(1, 3, NOW + 5_000)})
    return [line.split() for line in lines[1 : lines.index("")]]


def test_every_listener_of_a_broker_is_shown_in_its_order() -> None:
    rows = [
        BrokerRow(1, "10.0.0.1", 9092, NOW - 400, (
            ListenerEndpoint("PLAINTEXT", "10.0.0.1", 9092),
            ListenerEndpoint("CLIENTS", "kafka-1.example.com", 19092),
        )),
        BrokerRow(2, "10.0.0.2", 9092, NOW - 9_000, (ListenerEndpoint("PLAINTEXT", "10.0.0.2", 9092),)),
    ]  # fmt: skip

    assert brokers_table(rows, live_ids=[1]) == [
        ["NODE", "STATE", "HEARTBEAT-AGE-MS", "PARTITIONS-LED", "LISTENERS"],
        ["1", "live", "400", "1", "PLAINTEXT://10.0.0.1:9092,CLIENTS://kafka-1.example.com:19092"],
        ["2", "dead", "9000", "0", "PLAINTEXT://10.0.0.2:9092"],
    ]


def test_a_row_without_registered_listeners_shows_its_host_and_port() -> None:
    # A broker from before listeners were registered (postgres schema migration 3): its
    # host and port serve every listener.
    rows = [BrokerRow(1, "10.0.0.1", 9092, NOW, ())]

    assert brokers_table(rows, live_ids=[1])[1] == ["1", "live", "0", "1", "10.0.0.1:9092"]
