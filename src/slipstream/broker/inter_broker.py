"""How this broker connects to the other brokers of its cluster (Kafka's inter-broker settings).

Peers are reached on the listener ``inter.broker.listener.name`` names (default: the
first listener), at the endpoint each peer registered for that listener name, with
that listener's security protocol:

- TLS (SSL, SASL_SSL) trusts the listener's ``ssl.cafile`` (else the system's CAs),
  presents the listener's own certificate (``ssl.certfile``/``ssl.keyfile``) as its
  client certificate, and checks the peer's host name unless
  ``ssl.endpoint.identification.algorithm`` is empty (Kafka's setting and default).
- SASL (SASL_PLAINTEXT, SASL_SSL) uses ``sasl.mechanism.inter.broker.protocol`` (default:
  the listener's first enabled mechanism), which the listener must enable, with the
  user and password of ``inter.broker.sasl.username``/``inter.broker.sasl.password``
  (ours) or of Kafka's ``listener.name.<listener>.<mechanism>.sasl.jaas.config``
  (``... username="broker" password="secret";``).

Sans-I/O and free of ``ssl``: reading the config does not load the client;
``InterBrokerClient.client_security`` builds the client's settings when a peer is needed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .listener_settings import ListenerSecurity
from .listeners import Listener

if TYPE_CHECKING:
    from ..client.security import ClientSecurity

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# A JAAS option: name="quoted value" (backslash escapes) or name=bare-value.
# (A pattern, compiled at its first use, by re, which keeps it: not paid by every start.)
_JAAS_OPTION = r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))'


def jaas_credentials(text: str) -> tuple[str | None, str | None]:
    """(username, password) of a JAAS login module line, either None when not given.
    The module's class name and ``required`` flag are not checked: the mechanism comes
    from the setting's name, as in Kafka."""
    found: dict[str, str] = {}
    for name, quoted, bare in re.findall(_JAAS_OPTION, text):
        found[name] = re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
    return found.get("username"), found.get("password")


@dataclass(frozen=True)
class InterBrokerClient:
    """The listener peers are reached on, and how this broker connects there as a client."""

    listener: str
    security_protocol: str
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    def client_security(self) -> ClientSecurity:
        from ..client.security import ClientSecurity  # (only once a peer is needed)

        return ClientSecurity(
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism or "PLAIN",
            sasl_username=self.sasl_username,
            sasl_password=self.sasl_password,
            ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            ssl_password=self.ssl_key_password,
            ssl_check_hostname=self.ssl_check_hostname,
        )


def inter_broker_listener(listeners: Sequence[Listener], name: str) -> Listener:
    """The listener named ``name`` (the first listener when empty); ValueError when none is."""
    if not name.strip():
        return listeners[0]
    wanted = name.strip().upper()
    for listener in listeners:
        if listener.name == wanted:
            return listener
    raise ValueError(
        f"inter.broker.listener.name: {name.strip()!r} is not a listener "
        f"({', '.join(lst.name for lst in listeners)})"
    )


def resolve(
    listeners: Sequence[Listener],
    *,
    listener_name: str,
    security_of: Callable[[Listener], ListenerSecurity],
    mechanism: str,
    username: str | None,
    password: str | None,
    jaas_by_mechanism: Mapping[str, str],
    endpoint_identification: str,
) -> InterBrokerClient:
    """How this broker connects to its peers; ValueError naming the setting that is missing
    or wrong (an unknown listener, a mechanism the listener does not enable, SASL without
    credentials)."""
    listener = inter_broker_listener(listeners, listener_name)
    own = security_of(listener)
    chosen_mechanism: str | None = None
    if listener.uses_sasl:
        chosen_mechanism = mechanism.strip().upper() or (own.mechanisms[0] if own.mechanisms else "")
        if chosen_mechanism not in own.mechanisms:
            raise ValueError(
                f"sasl.mechanism.inter.broker.protocol {chosen_mechanism!r} is not enabled on the inter-broker "
                f"listener {listener.name} ({', '.join(own.mechanisms)})"
            )
        if not username:
            jaas = jaas_by_mechanism.get(chosen_mechanism)
            if jaas is not None:
                username, jaas_password = jaas_credentials(jaas)
                password = password if password is not None else jaas_password
        if not username or password is None:
            key = f"listener.name.{listener.name.lower()}.{chosen_mechanism.lower()}.sasl.jaas.config"
            raise ValueError(
                f"the inter-broker listener {listener.name} uses {listener.security_protocol}: peers need "
                f"credentials, set inter.broker.sasl.username and inter.broker.sasl.password (or {key} "
                f'with username="..." password="...")'
            )
    tls = listener.uses_tls
    return InterBrokerClient(
        listener=listener.name,
        security_protocol=listener.security_protocol,
        sasl_mechanism=chosen_mechanism,
        sasl_username=username if listener.uses_sasl else None,
        sasl_password=password if listener.uses_sasl else None,
        ssl_cafile=own.cafile if tls else None,
        ssl_certfile=own.certfile if tls else None,
        ssl_keyfile=own.keyfile if tls else None,
        ssl_key_password=own.key_password if tls else None,
        ssl_check_hostname=endpoint_identification.strip().lower() == "https",
    )


__all__ = ["SASL_MECHANISMS", "InterBrokerClient", "inter_broker_listener", "jaas_credentials", "resolve"]
