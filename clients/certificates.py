"""A small certificate authority for TLS listeners: create a CA, issue server and client certificates,
and write them as Kafka's ssl.* configs read them (PEM files, encrypted PEM keys, PKCS12 bundles).

    ca = CertificateAuthority.create("kafkette test CA")
    server = ca.issue_server("broker")                  # SANs: localhost, 127.0.0.1, ::1, this host
    client = ca.issue_client("CN=alice,OU=eng,O=kafkette")
    paths = server.write_pem(directory, "broker", key_password="secret")
    server.write_pkcs12(directory / "broker.p12", "store-password")
    ca.write_pem(directory / "ca.pem")

Used by the tests and by the development cluster's secure mode. Keys are EC P-256 (fast to make, and
every Kafka client accepts them); ``key_type="rsa"`` gives RSA 2048 for tools that want RSA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "IssuedCertificate", "PemFiles", "parse_dn"]

_ATTRIBUTES = {
    "CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
    "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME,
    "DC": NameOID.DOMAIN_COMPONENT, "UID": NameOID.USER_ID, "EMAILADDRESS": NameOID.EMAIL_ADDRESS,
}


def parse_dn(dn: str) -> x509.Name:
    """"CN=alice,OU=eng,O=kafkette" (RFC 4514 order: most specific first) -> x509.Name. A bare string
    without '=' is taken as the common name."""
    if "=" not in dn:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dn)])
    attributes = []
    for part in dn.split(","):
        key, _, value = part.strip().partition("=")
        attributes.append(x509.NameAttribute(_ATTRIBUTES[key.strip().upper()], value.strip()))
    return x509.Name(list(reversed(attributes)))  # x509.Name is stored least specific first


def _new_key(key_type: str) -> CertificateIssuerPrivateKeyTypes:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"unknown key type {key_type!r}; use 'ec' or 'rsa'")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class PemFiles:
    cert: Path  # the leaf certificate
    chain: Path  # leaf + issuing CA
    key: Path  # PKCS#8 private key, encrypted when a key password was given
    keystore: Path  # key + chain in one file: ssl.keystore.type=PEM with ssl.keystore.location


@dataclass(frozen=True)
class IssuedCertificate:
    key: CertificateIssuerPrivateKeyTypes
    cert: x509.Certificate
    ca_cert: x509.Certificate

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode("ascii")

    @property
    def chain_pem(self) -> str:
        return self.cert_pem + self.ca_cert.public_bytes(serialization.Encoding.PEM).decode("ascii")

    def key_pem(self, password: str | None = None) -> str:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      encryption).decode("ascii")

    @property
    def subject(self) -> str:
        return self.cert.subject.rfc4514_string()

    def write_pem(self, directory: Path, stem: str, key_password: str | None = None) -> PemFiles:
        directory.mkdir(parents=True, exist_ok=True)
        files = PemFiles(directory / f"{stem}.crt", directory / f"{stem}-chain.pem", directory / f"{stem}.key",
                         directory / f"{stem}-keystore.pem")
        files.cert.write_text(self.cert_pem)
        files.chain.write_text(self.chain_pem)
        _write_private(files.key, self.key_pem(key_password))
        _write_private(files.keystore, self.key_pem(key_password) + self.chain_pem)
        return files

    def pkcs12_bytes(self, password: str, alias: str = "kafkette") -> bytes:
        if not isinstance(self.key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise TypeError("PKCS12 bundles are written for RSA and EC keys")
        return pkcs12.serialize_key_and_certificates(
            alias.encode(), self.key, self.cert, [self.ca_cert],
            serialization.BestAvailableEncryption(password.encode()))

    def write_pkcs12(self, path: Path, password: str, alias: str = "kafkette") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_private(path, self.pkcs12_bytes(password, alias))
        return path


def _write_private(path: Path, data: str | bytes) -> None:
    raw = data.encode("ascii") if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)


@dataclass(frozen=True)
class CertificateAuthority:
    key: CertificateIssuerPrivateKeyTypes
    cert: x509.Certificate
    key_type: str = "ec"

    @classmethod
    def create(cls, name: str = "kafkette CA", *, days: int = 3650, key_type: str = "ec") -> CertificateAuthority:
        key = _new_key(key_type)
        subject = parse_dn(name)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert, key_type)

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode("ascii")

    def write_pem(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.cert_pem)
        return path

    def truststore_pkcs12(self, password: str | None) -> bytes:
        """A PKCS12 truststore holding the CA certificate (no key), as keytool -importcert makes one."""
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.cert, b"ca")], encryption)

    def issue(self, subject: str, *, server: bool, client: bool, dns_names: Sequence[str] = (),
              ip_addresses: Sequence[str] = (), days: int = 825, key_type: str | None = None) -> IssuedCertificate:
        key = _new_key(key_type or self.key_type)
        usages = [u for u, on in ((ExtendedKeyUsageOID.SERVER_AUTH, server),
                                  (ExtendedKeyUsageOID.CLIENT_AUTH, client)) if on]
        builder = (
            x509.CertificateBuilder()
            .subject_name(parse_dn(subject)).issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                           critical=False)
        )
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return IssuedCertificate(key, builder.sign(self.key, hashes.SHA256()), self.cert)

    def issue_server(self, subject: str = "CN=localhost", *, extra_dns: Sequence[str] = (),
                     **kwargs: object) -> IssuedCertificate:
        """A broker certificate valid for localhost, 127.0.0.1, ::1 and this machine's host name. It is
        also a client certificate (brokers present it to each other)."""
        dns = list(dict.fromkeys(["localhost", socket.gethostname(), socket.getfqdn(), *extra_dns]))
        return self.issue(subject, server=True, client=True, dns_names=dns,
                          ip_addresses=("127.0.0.1", "::1"), **kwargs)  # type: ignore[arg-type]

    def issue_client(self, subject: str = "CN=client", **kwargs: object) -> IssuedCertificate:
        return self.issue(subject, server=False, client=True, **kwargs)  # type: ignore[arg-type]
