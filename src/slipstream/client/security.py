"""How the client secures its connections: TLS and SASL settings, with Kafka's names.

``security_protocol`` is PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
``sasl_mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with ``sasl_username`` and
``sasl_password``; TLS trusts ``ssl_cafile`` (else the system's CAs), presents
``ssl_certfile``/``ssl_keyfile`` (``ssl_password`` for an encrypted key) when the
broker asks for a client certificate, and checks the broker's host name unless
``ssl_check_hostname`` is false (Kafka: ``ssl.endpoint.identification.algorithm=``).
``ClientSecurity.from_config`` also takes Kafka's dotted names (``security.protocol``,
``sasl.username``...), as a properties file or Spark's ``kafka.`` options give them.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Kafka's dotted names (and their Java-client PEM forms) -> our fields.
_ALIASES = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",  # librdkafka's spelling
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.cafile": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",  # librdkafka
    "ssl.truststore.location": "ssl_cafile",
    "ssl.certfile": "ssl_certfile",
    "ssl.certificate.location": "ssl_certfile",  # librdkafka
    "ssl.keystore.location": "ssl_certfile",
    "ssl.keyfile": "ssl_keyfile",
    "ssl.key.location": "ssl_keyfile",  # librdkafka
    "ssl.password": "ssl_password",
    "ssl.key.password": "ssl_password",
    "ssl.check.hostname": "ssl_check_hostname",
}
SECURITY_KEYS = frozenset(_ALIASES) | {
    "ssl.endpoint.identification.algorithm",
    "security_protocol", "sasl_mechanism", "sasl_username", "sasl_password", "ssl_cafile",
    "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname",
}


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        mechanism = self.sasl_mechanism.upper()
        object.__setattr__(self, "security_protocol", protocol)
        object.__setattr__(self, "sasl_mechanism", mechanism)
        if protocol not in PROTOCOLS:
            raise ValueError(f"security_protocol must be one of {', '.join(PROTOCOLS)}, not {self.security_protocol!r}")
        if self.uses_sasl:
            if mechanism not in SASL_MECHANISMS:
                raise ValueError(f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, not {self.sasl_mechanism!r}")
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"security_protocol={protocol} needs sasl_username and sasl_password")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context (made once per settings; None without TLS)."""
        return _context_for(self) if self.uses_tls else None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientSecurity:
        """From a mapping of settings in our names or Kafka's dotted ones (others are ignored)."""
        ours = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in config.items():
            name = _ALIASES.get(key, key)
            if key == "ssl.endpoint.identification.algorithm":
                name, value = "ssl_check_hostname", str(value).strip().lower() == "https"
            if name in ours and value is not None:
                if name == "ssl_check_hostname" and isinstance(value, str):
                    value = value.strip().lower() in ("1", "true", "yes", "on")
                values[name] = value
        return cls(**values)

    @classmethod
    def of(cls, settings: object) -> ClientSecurity:
        """From a client config that holds these fields under the same names
        (``ConsumerConfig``, ``ProducerConfig``)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})


PLAINTEXT = ClientSecurity()


# Kept out of the (picklable, hashable) settings object: Spark ships it to executors.
@functools.lru_cache(maxsize=16)
def _context_for(security: ClientSecurity) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=security.ssl_cafile)
    context.check_hostname = security.ssl_check_hostname
    if not security.ssl_check_hostname:
        context.check_hostname = False
    if security.ssl_certfile:
        context.load_cert_chain(security.ssl_certfile, security.ssl_keyfile, security.ssl_password)
    return context
