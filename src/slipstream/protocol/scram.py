"""SCRAM (RFC 5802, RFC 7677) primitives and the client side of the exchange; sans-I/O.

Shared by the broker (which verifies) and the client (which proves). Passwords are
used as their UTF-8 bytes without SASLprep, as Kafka does. Kafka's SCRAM mechanisms
and their codes in DescribeUserScramCredentials/AlterUserScramCredentials:
SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2), 4096..16384 iterations.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

# hashlib, hmac and secrets (OpenSSL's bindings, a random generator) are imported where
# used: a broker start loads this module for its mechanism table, but hashes only when
# a client authenticates or a credential is set.

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramMechanism:
    """A SCRAM mechanism: its name, its code in the SCRAM APIs and its hash."""

    name: str
    code: int
    hash_name: str

    def digest(self, data: bytes) -> bytes:
        import hashlib

        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        import hmac

        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i) of RFC 5802: PBKDF2 with this mechanism's HMAC."""
        import hashlib

        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted: bytes) -> bytes:
        return self.hmac(salted, b"Client Key")

    def stored_key(self, salted: bytes) -> bytes:
        return self.digest(self.client_key(salted))

    def server_key(self, salted: bytes) -> bytes:
        return self.hmac(salted, b"Server Key")


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_CODE: dict[int, ScramMechanism] = {m.code: m for m in MECHANISMS.values()}


class ScramError(Exception):
    """The peer's SCRAM message is malformed or its proof/signature is wrong."""


def new_nonce() -> str:
    import secrets

    return secrets.token_urlsafe(24)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"invalid base64 {text!r}") from None


def escape_name(name: str) -> str:
    """saslname of RFC 5802: ',' and '=' escaped as =2C and =3D."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        if text[i] == "=":
            code = text[i : i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise ScramError(f"invalid escape in user name {text!r}")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_attributes(message: str) -> dict[str, str]:
    """'a=1,b=2' -> {'a': '1', 'b': '2'}; every attribute is one letter and '='."""
    attrs: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"invalid SCRAM attribute {part!r} in {message!r}")
        attrs.setdefault(part[0], part[2:])
    return attrs


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramClient:
    """The client side: ``first()``, then ``final(server_first)``, then ``verify(server_final)``."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.nonce = nonce or new_nonce()
        self._first_bare = f"n={escape_name(username)},r={self.nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = parse_attributes(text)
        if "e" in attrs:
            raise ScramError(f"server refused: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), unb64(attrs.get("s", "")), attrs.get("i", "")
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise ScramError("server nonce does not extend the client nonce")
        if not iterations.isdigit():
            raise ScramError(f"invalid iteration count {iterations!r}")
        m = self.mechanism
        salted = m.salted_password(self.password, salt, int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = m.client_key(salted)
        proof = xor(client_key, m.hmac(m.digest(client_key), auth_message))
        self._server_signature = m.hmac(m.server_key(salted), auth_message)
        return f"{without_proof},p={b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        import hmac

        attrs = parse_attributes(server_final.decode("utf-8", "replace"))
        if "e" in attrs:
            raise ScramError(f"server refused: {attrs['e']}")
        if self._server_signature is None or not hmac.compare_digest(
            unb64(attrs.get("v", "")), self._server_signature
        ):
            raise ScramError("the server's signature is wrong: it does not know this user's credential")


def plain_token(username: str, password: str) -> bytes:
    """The one PLAIN message (RFC 4616): authzid NUL authcid NUL password, authzid empty."""
    return b"\0" + username.encode() + b"\0" + password.encode()
