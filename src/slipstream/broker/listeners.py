"""Listeners: where the broker accepts connections, and with what security protocol.

Configured as Kafka's are:

- ``listeners``: ``NAME://host:port`` entries, comma-separated (port 0 picks a free one;
  an empty host means the ``host`` setting). Empty: one ``PLAINTEXT`` listener on
  ``host``:``port`` (127.0.0.1:9092 by default), as before listeners existed.
- ``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs. Names that are themselves a
  protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) map to it by default.
- ``advertised.listeners``: ``NAME://host:port`` per listener, what Metadata,
  FindCoordinator and DescribeCluster tell a client that connected through it. A
  listener not named there advertises ``advertised.host.name`` (or its bound host)
  and its bound port.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True)
class Listener:
    """A named endpoint the broker listens on, with its security protocol."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in (SSL, SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in (SASL_PLAINTEXT, SASL_SSL)


def _split_endpoint(entry: str, setting: str) -> tuple[str, str, int]:
    name, sep, rest = entry.strip().partition("://")
    if not sep or not name:
        raise ValueError(f"{setting}: {entry!r} must look like NAME://host:port")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{setting}: {entry!r} needs a port 0..65535 (NAME://host:port)")
    return name.strip().upper(), host.strip("[]"), int(port)


def parse_protocol_map(text: str) -> dict[str, str]:
    mapping = {p: p for p in SECURITY_PROTOCOLS}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, sep, protocol = entry.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip():
            raise ValueError(f"listener.security.protocol.map: {entry!r} must look like NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"listener.security.protocol.map: {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_listeners(text: str, protocol_map: str, default_host: str, default_port: int) -> list[Listener]:
    """The configured listeners, in order (the first is the broker's primary one)."""
    if not text.strip():
        return [Listener(PLAINTEXT, PLAINTEXT, default_host, default_port)]
    mapping = parse_protocol_map(protocol_map)
    found: list[Listener] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, host, port = _split_endpoint(entry, "listeners")
        protocol = mapping.get(name)
        if protocol is None:
            raise ValueError(
                f"listeners: no security protocol for listener {name!r}; "
                f"add {name}:<PROTOCOL> to listener.security.protocol.map"
            )
        if any(lst.name == name for lst in found):
            raise ValueError(f"listeners: listener name {name!r} is used twice")
        if port and any(lst.port == port for lst in found):
            raise ValueError(f"listeners: port {port} is used by two listeners")
        found.append(Listener(name, protocol, host or default_host, port))
    if not found:
        raise ValueError("listeners: no listener given")
    return found


def parse_advertised(text: str, listeners: list[Listener]) -> dict[str, tuple[str, int]]:
    """Listener name -> advertised (host, port) from advertised.listeners (port 0: the bound one)."""
    names = {lst.name for lst in listeners}
    out: dict[str, tuple[str, int]] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, host, port = _split_endpoint(entry, "advertised.listeners")
        if name not in names:
            raise ValueError(f"advertised.listeners: {name!r} is not a listener ({', '.join(sorted(names))})")
        out[name] = (host, port)
    return out


def advertised_endpoint(
    listener: Listener, bound_port: int, advertised: dict[str, tuple[str, int]], advertised_host: str | None,
    advertised_port: int | None, primary: bool,
) -> tuple[str, int]:
    """Where clients of this listener are told to connect."""
    host, port = advertised.get(listener.name, ("", 0))
    if not host:
        host = advertised_host or listener.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
    if not port:
        port = (advertised_port if primary else None) or bound_port
    return host, port
