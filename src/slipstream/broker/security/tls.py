"""TLS for SSL and SASL_SSL listeners (the standard library's ``ssl``), and the principal
of a client certificate.

Settings (Kafka's names where a PEM setting exists): ``ssl.certfile`` (alias
``ssl.keystore.location``: PEM certificate chain, may hold the key too),
``ssl.keyfile`` (PEM private key), ``ssl.key.password``, ``ssl.cafile`` (alias
``ssl.truststore.location``: PEM CA bundle that client certificates must chain to),
``ssl.client.auth`` = none | requested | required.
"""

from __future__ import annotations

import ssl
from typing import Any

CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

# RFC 4514 keywords, as Java's X500Principal.getName() prints them.
_KEYWORDS = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "stateOrProvinceName": "ST",
    "localityName": "L",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def server_context(
    certfile: str | None, keyfile: str | None, cafile: str | None, client_auth: str, key_password: str | None
) -> ssl.SSLContext:
    if not certfile:
        raise ValueError("a TLS listener (SSL or SASL_SSL) needs ssl.certfile (and ssl.keyfile unless the key is in it)")
    mode = CLIENT_AUTH_MODES.get(client_auth)
    if mode is None:
        raise ValueError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH_MODES)}, not {client_auth!r}")
    if mode != ssl.CERT_NONE and not cafile:
        raise ValueError(f"ssl.client.auth={client_auth} needs ssl.cafile: the CA that client certificates chain to")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile, keyfile or None, key_password)
        if cafile:
            context.load_verify_locations(cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS certificate/key/CA files: {exc}") from exc
    context.verify_mode = mode
    return context


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_name(peercert: dict[str, Any]) -> str | None:
    """The RFC 2253 name of a certificate's subject, most specific part first
    ("CN=client,O=Example,C=DE"), as Kafka's default principal builder shows it."""
    subject = peercert.get("subject")
    if not subject:
        return None
    parts = []
    for rdn in reversed(subject):
        parts.append("+".join(f"{_KEYWORDS.get(key, key)}={_escape(str(value))}" for key, value in rdn))
    return ",".join(parts)
