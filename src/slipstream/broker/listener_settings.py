"""Per-listener security settings: Kafka's ``listener.name.<listener>.<setting>`` overrides.

A listener takes the broker-wide TLS and SASL settings unless it names its own, e.g.
``listener.name.internal.ssl.certfile`` or ``listener.name.external.sasl.enabled.mechanisms``
(in the config file or with --set), and ``listener.name.<listener>.<mechanism>.sasl.jaas.config``,
whose username and password the broker logs in with on that listener as a client of its
peers (inter_broker.py). As in Kafka (KIP-684), ``ssl.client.auth`` applies to an
SSL listener, and to a SASL_SSL listener only when set for that listener by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .listeners import SSL, Listener

PREFIX = "listener.name."
# ssl.client.auth values (security/tls.py maps them to ssl's modes; not imported here, so
# reading the config does not load ssl).
CLIENT_AUTH_MODES = ("none", "requested", "required")

# Setting (Kafka's name) -> BrokerConfig field it overrides.
OVERRIDABLE = {
    "ssl.certfile": "ssl_certfile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.keyfile": "ssl_keyfile",
    "ssl.key.password": "ssl_key_password",
    "ssl.cafile": "ssl_cafile",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.client.auth": "ssl_client_auth",
    "sasl.enabled.mechanisms": "sasl_enabled_mechanisms",
    "connections.max.reauth.ms": "connections_max_reauth_ms",
}
JAAS_SUFFIX = ".sasl.jaas.config"
# listener_overrides key of a listener's JAAS config for one mechanism: JAAS_KEY + "SCRAM-SHA-256".
JAAS_KEY = "sasl_jaas_config:"


def split_key(key: str) -> tuple[str, str] | None:
    """("LISTENER", field) for a ``listener.name.<listener>.<setting>`` key; None for other keys.
    Raises ValueError for a listener key whose setting cannot be overridden."""
    if not key.startswith(PREFIX):
        return None
    rest = key[len(PREFIX):]
    name, dot, setting = rest.partition(".")
    if not dot or not name:
        raise ValueError(f"{key!r}: expected listener.name.<listener>.<setting>")
    if setting.lower().endswith(JAAS_SUFFIX) and len(setting) > len(JAAS_SUFFIX):
        return name.upper(), JAAS_KEY + setting[: -len(JAAS_SUFFIX)].upper()
    target = OVERRIDABLE.get(setting.lower())
    if target is None:
        raise ValueError(
            f"{key!r}: {setting!r} cannot be set per listener (one of: {', '.join(sorted(OVERRIDABLE))}, "
            f"<mechanism>{JAAS_SUFFIX})"
        )
    return name.upper(), target


@dataclass(frozen=True)
class ListenerSecurity:
    """One listener's TLS files and client-auth mode, and the SASL mechanisms it offers."""

    certfile: str | None
    keyfile: str | None
    key_password: str | None
    cafile: str | None
    client_auth: str
    mechanisms: tuple[str, ...]
    max_reauth_ms: int


def jaas_configs(overrides: Mapping[str, str]) -> dict[str, str]:
    """Mechanism -> JAAS config text, of one listener's overrides."""
    return {key[len(JAAS_KEY):]: value for key, value in overrides.items() if key.startswith(JAAS_KEY)}


def mechanisms_of(text: str) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in text.split(",") if m.strip())


def resolve(broker_wide: Mapping[str, object], overrides: Mapping[str, str], listener: Listener) -> ListenerSecurity:
    """The settings ``listener`` runs with: its own overrides over the broker-wide ones."""

    def pick(field: str) -> object:
        return overrides[field] if field in overrides else broker_wide[field]

    if "ssl_client_auth" in overrides:
        client_auth = overrides["ssl_client_auth"]
    else:
        client_auth = str(broker_wide["ssl_client_auth"]) if listener.security_protocol == SSL else "none"
    reauth = pick("connections_max_reauth_ms")
    try:
        max_reauth_ms = int(str(reauth))
    except ValueError:
        raise ValueError(
            f"listener.name.{listener.name.lower()}.connections.max.reauth.ms: expected an integer, got {reauth!r}"
        ) from None
    if max_reauth_ms < 0:
        raise ValueError(f"connections.max.reauth.ms of listener {listener.name} must be 0 or more")

    def text(field: str) -> str | None:
        value = pick(field)
        return None if value in (None, "") else str(value)

    return ListenerSecurity(
        certfile=text("ssl_certfile"), keyfile=text("ssl_keyfile"), key_password=text("ssl_key_password"),
        cafile=text("ssl_cafile"), client_auth=client_auth.strip().lower(),
        mechanisms=mechanisms_of(str(pick("sasl_enabled_mechanisms"))), max_reauth_ms=max_reauth_ms,
    )
