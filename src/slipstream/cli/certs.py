"""``slipstream certs DIR``: a throwaway CA with broker and client certificates, for
development and tests only (never production: the CA key sits beside the certificates).

Files written (PEM): ``ca.pem`` (trust this), ``ca-key.pem``, ``broker.pem`` and
``broker-key.pem`` (for ``ssl.certfile``/``ssl.keyfile``; valid for the given host
names, localhost and 127.0.0.1 by default; subject ``CN=<first host>,O=Slipstream Dev``;
also the client certificate a cluster's brokers present to each other), and per client
NAME ``NAME.pem`` and ``NAME-key.pem`` with subject ``CN=NAME,O=Slipstream Dev`` (its TLS principal is
``User:CN=NAME,O=Slipstream Dev``). Needs the ``cryptography`` package
(``pip install 'slipstream[security]'``).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client_commands import Sub

ORGANIZATION = "Slipstream Dev"


def add_commands(sub: Sub) -> None:
    p = sub.add_parser(
        "certs",
        help="make a throwaway CA, broker and client certificates for development",
        description="Write a development CA (ca.pem), a broker certificate (broker.pem, broker-key.pem) "
        "and client certificates (NAME.pem, NAME-key.pem) into DIR. For development and tests only.",
    )
    p.add_argument("directory")
    p.add_argument(
        "--host", action="append", default=[], metavar="NAME",
        help="host name or IP address the broker certificate is valid for; repeatable "
        "(default: localhost and 127.0.0.1)",
    )
    p.add_argument(
        "--client", action="append", default=[], metavar="NAME",
        help="make a client certificate with CN=NAME; repeatable (default: one named client)",
    )
    p.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    p.set_defaults(func=_certs)


def _certs(args: argparse.Namespace) -> int:
    written = make_dev_certs(Path(args.directory), args.host or None, args.client or None, days=args.days)
    for path in written:
        print(path)
    return 0


def make_dev_certs(
    directory: Path, hosts: list[str] | None = None, clients: list[str] | None = None, *, days: int = 365
) -> list[Path]:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise ValueError(
            "slipstream certs needs the 'cryptography' package: pip install 'slipstream[security]'"
        ) from None
    hosts = hosts or ["localhost", "127.0.0.1"]
    clients = clients or ["client"]
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    written: list[Path] = []

    def name(common: str) -> x509.Name:
        return x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ])

    def write(stem: str, cert: x509.Certificate, key: Any) -> None:
        cert_path, key_path = directory / f"{stem}.pem", directory / f"{stem}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        key_path.chmod(0o600)
        written.extend([cert_path, key_path])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("Slipstream Dev CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    written.insert(0, directory / "ca.pem")
    ca_key_path = directory / "ca-key.pem"
    ca_key_path.write_bytes(
        ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    ca_key_path.chmod(0o600)
    written.insert(1, ca_key_path)

    def leaf(common: str, usages: list[Any], sans: list[x509.GeneralName] | None) -> tuple[x509.Certificate, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common)).issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    # Also a client certificate: a cluster's brokers present it to each other (inter-broker TLS).
    write("broker", *leaf(hosts[0], [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], sans))
    for client in clients:
        write(client, *leaf(client, [ExtendedKeyUsageOID.CLIENT_AUTH], None))
    return written
