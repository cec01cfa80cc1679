"""TLS contexts from Kafka's ``ssl.*`` settings, for both ends of a connection.

API (``settings`` is any mapping of Kafka config name -> value; values may be the strings of a
properties file or the typed values ``BrokerConfig`` returns -- tuples for lists, ``Password`` for
secrets; a missing name takes Kafka's default from the config registry)::

    server_context(settings) -> ssl.SSLContext     # a listener's context (needs a keystore)
    client_context(settings) -> ssl.SSLContext     # for connections we open (inter-broker, CLI)
    load_keystore(settings)  -> Keystore | None    # the key and chain, their DN and SANs
    load_truststore(settings) -> str | None        # trusted certificates as PEM text
    validate_handshake(client_ctx, server_ctx)     # Kafka's SslEngineValidator: an in-memory handshake
    java_cipher_to_openssl(name) -> str            # TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-...
    SSL_CONFIG_NAMES                               # every name these functions read

Every invalid setting raises ``config.registry.ConfigError`` naming the config at fault, with
Kafka's wording where Kafka has one.

What maps how:

- ``ssl.keystore.type`` PEM: ``ssl.keystore.location`` (a file holding the private key and the
  certificate chain) or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``; the key may be
  encrypted with ``ssl.key.password``. ``ssl.keystore.password`` is refused for PEM, as in Kafka.
  PKCS12: opened with ``ssl.keystore.password`` (``ssl.key.password`` is tried when it differs).
  JKS (the default type): a real JKS file cannot be read here and is refused with a clear error; a
  PKCS12 file declared as JKS is read, as Java's compatibility mode does.
- ``ssl.truststore.type`` PEM: ``ssl.truststore.location`` or inline ``ssl.truststore.certificates``;
  PKCS12/JKS as above (the password may be absent: Java then skips the integrity check; a PKCS12 file
  without a password is read here only if it is not encrypted). No truststore: the system CAs.
- ``ssl.enabled.protocols`` picks the lowest and highest TLS version (OpenSSL enables a contiguous
  range, so a gap such as "TLSv1.1,TLSv1.3" becomes TLSv1.1..TLSv1.3). When it is empty,
  ``ssl.protocol`` is the highest version. ``TLS`` means "any supported version".
- ``ssl.cipher.suites`` takes Kafka/Java (IANA) names or OpenSSL names. TLSv1.2 and older suites are
  set exactly (``SSL_CTX_set_cipher_list``). TLSv1.3 suites (``TLS_AES_128_GCM_SHA256``,
  ``TLS_AES_256_GCM_SHA384``, ``TLS_CHACHA20_POLY1305_SHA256``) cannot be chosen one by one through
  Python's ssl module, which has no ``SSL_CTX_set_ciphersuites``: when the list names at least one of
  them, OpenSSL's TLSv1.3 defaults (those three) stay enabled; when it names none, TLSv1.3 is turned off,
  which is what Java does when no TLSv1.3 suite is enabled.
- ``ssl.client.auth`` (server side): none / requested / required -> CERT_NONE / CERT_OPTIONAL /
  CERT_REQUIRED. A client always verifies the server's chain (as Java does);
  ``ssl.endpoint.identification.algorithm`` = ``https`` (the default) also checks the host name, empty
  turns that off. Pass ``server_hostname`` to ``wrap_socket`` / ``SSLObject`` as usual.

Python's ``SSLContext.load_cert_chain`` reads only files. The key is therefore written, encrypted
with a one-time random password, into a private (0700) temporary directory and removed as soon as
OpenSSL has read it: no unprotected private key ever reaches the disk.
"""

from __future__ import annotations

import os
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from config.registry import REGISTRY, ConfigError, Password, parse_value

__all__ = [
    "SSL_CONFIG_NAMES", "TLS13_CIPHER_SUITES", "Keystore", "client_context", "java_cipher_to_openssl",
    "load_keystore", "load_truststore", "server_context", "validate_handshake",
]

SSL_CONFIG_NAMES: tuple[str, ...] = (
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class",
)

TLS13_CIPHER_SUITES = frozenset({
    "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256",
})

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class Keystore:
    """A loaded keystore: the private key, its certificate chain (leaf first), and the leaf's identity,
    which a dynamic keystore update must keep unless ssl.allow.dn.changes / ssl.allow.san.changes."""

    key: PrivateKeyTypes
    chain: tuple[x509.Certificate, ...]
    subject: str = field(init=False)  # RFC 2253/4514 form, as Java's X500Principal.getName()
    subject_alt_names: frozenset[tuple[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        leaf = self.chain[0]
        object.__setattr__(self, "subject", leaf.subject.rfc4514_string())
        object.__setattr__(self, "subject_alt_names", subject_alt_names(leaf))

    def chain_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.chain)


def subject_alt_names(cert: x509.Certificate) -> frozenset[tuple[str, str]]:
    """The certificate's SANs as (kind, value) pairs, e.g. ("DNS", "localhost"), ("IP", "127.0.0.1")."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    names: set[tuple[str, str]] = set()
    for gn in ext:
        if isinstance(gn, x509.DNSName):
            names.add(("DNS", gn.value))
        elif isinstance(gn, x509.IPAddress):
            names.add(("IP", str(gn.value)))
        elif isinstance(gn, x509.RFC822Name):
            names.add(("EMAIL", gn.value))
        elif isinstance(gn, x509.UniformResourceIdentifier):
            names.add(("URI", gn.value))
        else:
            names.add((type(gn).__name__, str(gn.value)))
    return frozenset(names)


# -- settings ---------------------------------------------------------------------------------------


def _get(settings: Mapping[str, object], name: str) -> Any:
    if name in settings and settings[name] is not None:
        return parse_value(name, settings[name])
    return REGISTRY[name].default


def _secret(settings: Mapping[str, object], name: str) -> str | None:
    value = _get(settings, name)
    if value is None:
        return None
    return value.value if isinstance(value, Password) else str(value)


def _read(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(name, path, f"cannot read the file: {e.strerror or e}") from None


# -- keystores --------------------------------------------------------------------------------------


def _pem_certificates(name: str, shown: object, pem: bytes) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        certs = []
    if not certs:
        raise ConfigError(name, shown, "At least one certificate expected, but none found")
    return certs


def _pem_private_key(name: str, shown: object, pem: bytes, password: str | None) -> PrivateKeyTypes:
    begin = pem.find(b"-----BEGIN")
    blocks = [b for b in pem.split(b"-----BEGIN")[1:] if b.split(b"-----", 1)[0].endswith(b"PRIVATE KEY")]
    if begin < 0 or not blocks:
        raise ConfigError(name, shown, "Private key not provided")
    if len(blocks) != 1:
        raise ConfigError(name, shown, f"Expected one private key, but found {len(blocks)}")
    block = b"-----BEGIN" + blocks[0]
    try:
        return serialization.load_pem_private_key(block, password.encode() if password is not None else None)
    except (ValueError, TypeError) as e:
        raise ConfigError(name, shown, f"Private key could not be loaded: {e}") from None


def _pkcs12(name: str, path: str, data: bytes, passwords: list[str | None]) -> pkcs12.PKCS12KeyAndCertificates:
    if data.startswith(_JKS_MAGIC):
        raise ConfigError(name, path, "JKS keystores cannot be read here; convert it to PKCS12 (keytool "
                          "-importkeystore -deststoretype PKCS12) or PEM and set the store type accordingly")
    error: Exception | None = None
    for password in dict.fromkeys(passwords):  # each distinct password once, in order
        try:
            return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
        except (ValueError, TypeError) as e:
            error = e
    raise ConfigError(name, path, f"Failed to load SSL keystore {path}: {error}")


def load_keystore(settings: Mapping[str, object]) -> Keystore | None:
    """The configured keystore, or None when none is configured. Kafka's checks and messages
    (DefaultSslEngineFactory.createKeystore)."""
    kind = str(_get(settings, "ssl.keystore.type")).upper()
    path = _get(settings, "ssl.keystore.location")
    password = _secret(settings, "ssl.keystore.password")
    key_password = _secret(settings, "ssl.key.password")
    inline_key = _secret(settings, "ssl.keystore.key")
    inline_chain = _secret(settings, "ssl.keystore.certificate.chain")
    if inline_key is not None:
        if kind != "PEM":
            raise ConfigError("ssl.keystore.key", "[hidden]", "SSL private key can be specified only for PEM, "
                              f"but key store type is {kind}.")
        if inline_chain is None:
            raise ConfigError("ssl.keystore.certificate.chain", None,
                              "SSL private key is specified, but certificate chain is not specified.")
        if path is not None:
            raise ConfigError("ssl.keystore.location", path,
                              "Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise ConfigError("ssl.keystore.password", "[hidden]", "SSL key store password cannot be specified "
                              "with PEM format, only key password may be specified.")
        certs = _pem_certificates("ssl.keystore.certificate.chain", "[hidden]", inline_chain.encode())
        key = _pem_private_key("ssl.keystore.key", "[hidden]", inline_key.encode(), key_password)
        return _checked(Keystore(key, tuple(certs)), "ssl.keystore.key")
    if inline_chain is not None:
        raise ConfigError("ssl.keystore.key", None,
                          "SSL certificate chain is specified, but private key is not specified")
    if path is None:
        if password is not None:
            raise ConfigError("ssl.keystore.password", "[hidden]",
                              "SSL key store is not specified, but key store password is specified.")
        return None
    if kind == "PEM":
        if password is not None:
            raise ConfigError("ssl.keystore.password", "[hidden]", "SSL key store password cannot be specified "
                              "with PEM format, only key password may be specified")
        data = _read("ssl.keystore.location", path)
        certs = _pem_certificates("ssl.keystore.location", path, data)
        key = _pem_private_key("ssl.keystore.location", path, data, key_password)
        return _checked(Keystore(key, tuple(certs)), "ssl.keystore.location")
    if password is None:
        raise ConfigError("ssl.keystore.password", None,
                          "SSL key store is specified, but key store password is not specified.")
    if kind not in ("PKCS12", "JKS"):
        raise ConfigError("ssl.keystore.type", kind, "supported key store types are PEM and PKCS12")
    data = _read("ssl.keystore.location", path)
    bundle = _pkcs12("ssl.keystore.location", path, data, [password, key_password])
    if bundle.key is None or bundle.cert is None:
        raise ConfigError("ssl.keystore.location", path, "the key store holds no private key entry")
    chain = (bundle.cert.certificate, *(c.certificate for c in bundle.additional_certs))
    return _checked(Keystore(bundle.key, chain), "ssl.keystore.location")


def _checked(store: Keystore, name: str) -> Keystore:
    public = store.chain[0].public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    mine = store.key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if public != mine:
        raise ConfigError(name, "[hidden]", "the private key does not match the first certificate of the chain")
    return store


def load_truststore(settings: Mapping[str, object]) -> str | None:
    """The trusted certificates as PEM text, or None when no truststore is configured
    (DefaultSslEngineFactory.createTruststore's checks and messages)."""
    kind = str(_get(settings, "ssl.truststore.type")).upper()
    path = _get(settings, "ssl.truststore.location")
    password = _secret(settings, "ssl.truststore.password")
    inline = _secret(settings, "ssl.truststore.certificates")
    if inline is not None:
        if kind != "PEM":
            raise ConfigError("ssl.truststore.certificates", "[hidden]", "SSL trust store certs can be specified "
                              f"only for PEM, but trust store type is {kind}.")
        if path is not None:
            raise ConfigError("ssl.truststore.location", path,
                              "Both SSL trust store location and separate trust certificates are specified.")
        if password is not None:
            raise ConfigError("ssl.truststore.password", "[hidden]",
                              "SSL trust store password cannot be specified for PEM format.")
        certs = _pem_certificates("ssl.truststore.certificates", "[hidden]", inline.encode())
        return _to_pem(certs)
    if path is None:
        if password is not None:
            raise ConfigError("ssl.truststore.password", "[hidden]",
                              "SSL trust store is not specified, but trust store password is specified.")
        return None
    if kind == "PEM":
        if password is not None:
            raise ConfigError("ssl.truststore.password", "[hidden]",
                              "SSL trust store password cannot be specified for PEM format.")
        return _to_pem(_pem_certificates("ssl.truststore.location", path, _read("ssl.truststore.location", path)))
    data = _read("ssl.truststore.location", path)
    if kind not in ("PKCS12", "JKS"):
        raise ConfigError("ssl.truststore.type", kind, "supported trust store types are PEM and PKCS12")
    bundle = _pkcs12("ssl.truststore.location", path, data, [password])
    certs = [c.certificate for c in bundle.additional_certs]
    if bundle.cert is not None:
        certs.insert(0, bundle.cert.certificate)
    if not certs:
        raise ConfigError("ssl.truststore.location", path, "the trust store holds no certificate")
    return _to_pem(certs)


def _to_pem(certs: list[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def _install_keystore(ctx: ssl.SSLContext, store: Keystore) -> None:
    """Give OpenSSL the key and chain. load_cert_chain reads files only: write the key encrypted with a
    one-time password into a private directory and remove it right after loading."""
    one_time = secrets.token_urlsafe(32)
    key_pem = store.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()))
    directory = tempfile.mkdtemp(prefix="kafkette-tls-")  # mkdtemp creates it 0700
    try:
        chain_path = os.path.join(directory, "chain.pem")
        key_path = os.path.join(directory, "key.pem")
        for path, data in ((chain_path, store.chain_pem()), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            ctx.load_cert_chain(chain_path, key_path, password=one_time)
        except ssl.SSLError as e:
            raise ConfigError("ssl.keystore.location", "[hidden]", f"the key store was not accepted: {e}") from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- protocols and ciphers --------------------------------------------------------------------------


def _apply_protocols(ctx: ssl.SSLContext, settings: Mapping[str, object]) -> None:
    enabled: tuple[str, ...] = tuple(_get(settings, "ssl.enabled.protocols") or ())
    if not enabled:
        protocol = str(_get(settings, "ssl.protocol"))
        if protocol in ("TLS", "SSL"):
            return
        if protocol not in _VERSIONS:
            raise ConfigError("ssl.protocol", protocol, f"unsupported protocol; use one of {', '.join(_VERSIONS)}")
        ctx.maximum_version = _VERSIONS[protocol]
        return
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown:
        raise ConfigError("ssl.enabled.protocols", ",".join(enabled),
                          f"unsupported protocol {unknown[0]}; use TLSv1.2 and/or TLSv1.3")
    versions = sorted(_VERSIONS[p] for p in enabled)
    if versions[0] < ssl.TLSVersion.TLSv1_2:
        # OpenSSL 3 refuses these at its default security level; lower it only when asked for them.
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = versions[0]
    ctx.maximum_version = versions[-1]


_KX = {"ECDHE_ECDSA": "ECDHE-ECDSA", "ECDHE_RSA": "ECDHE-RSA", "DHE_RSA": "DHE-RSA", "DHE_DSS": "DHE-DSS",
       "ECDH_ECDSA": "ECDH-ECDSA", "ECDH_RSA": "ECDH-RSA", "RSA": "", "PSK": "PSK", "ECDHE_PSK": "ECDHE-PSK",
       "DHE_PSK": "DHE-PSK", "RSA_PSK": "RSA-PSK"}
_BULK = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128",
         "AES_256_CBC": "AES256", "CHACHA20_POLY1305": "CHACHA20-POLY1305", "AES_128_CCM": "AES128-CCM",
         "AES_256_CCM": "AES256-CCM", "AES_128_CCM_8": "AES128-CCM8", "AES_256_CCM_8": "AES256-CCM8",
         "CAMELLIA_128_CBC": "CAMELLIA128", "CAMELLIA_256_CBC": "CAMELLIA256",
         "ARIA_128_GCM": "ARIA128-GCM", "ARIA_256_GCM": "ARIA256-GCM", "3DES_EDE_CBC": "DES-CBC3"}


def java_cipher_to_openssl(name: str) -> str:
    """Kafka/Java (IANA) cipher suite name -> OpenSSL name; OpenSSL names come back unchanged.
    E.g. TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 -> ECDHE-RSA-AES256-GCM-SHA384,
    TLS_RSA_WITH_AES_128_CBC_SHA -> AES128-SHA. TLSv1.3 names are returned as they are (OpenSSL uses the
    IANA names for those)."""
    if name in TLS13_CIPHER_SUITES or not name.startswith(("TLS_", "SSL_")):
        return name
    body = name[4:]
    if "_WITH_" not in body:
        return name
    kx, rest = body.split("_WITH_", 1)
    if kx not in _KX:
        return name
    bulk, _, mac = rest.rpartition("_")
    if bulk not in _BULK or mac not in ("SHA", "SHA256", "SHA384", "POLY1305", "8", "CCM"):
        # CHACHA20_POLY1305_SHA256 and AES_128_CCM (no MAC suffix) land here.
        if rest in _BULK:
            bulk, mac = rest, ""
        elif rest.endswith("_SHA256") and rest[:-7] == "CHACHA20_POLY1305":
            bulk, mac = "CHACHA20_POLY1305", ""
        else:
            return name
    if bulk == "CHACHA20_POLY1305" or bulk.endswith(("_CCM", "_CCM_8")):
        mac = ""  # OpenSSL names these without the PRF hash
    if bulk == "3DES_EDE_CBC" and kx in ("ECDHE_RSA", "ECDHE_ECDSA", "DHE_RSA"):
        parts = [_KX[kx].replace("DHE-RSA", "EDH-RSA") if kx == "DHE_RSA" else _KX[kx], "DES-CBC3", mac]
    else:
        parts = [_KX[kx], _BULK[bulk], mac]
    return "-".join(p for p in parts if p)


def _known_ciphers() -> frozenset[str]:
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.set_ciphers("ALL:COMPLEMENTOFALL:@SECLEVEL=0")
    return frozenset(str(c["name"]) for c in probe.get_ciphers())


def _rank(v: ssl.TLSVersion) -> int:
    # Python's enum gives MINIMUM_SUPPORTED / MAXIMUM_SUPPORTED the values -2 / -1: rank them outside
    # every real version.
    if v is ssl.TLSVersion.MINIMUM_SUPPORTED:
        return -(1 << 20)
    if v is ssl.TLSVersion.MAXIMUM_SUPPORTED:
        return 1 << 20
    return int(v)


def _apply_ciphers(ctx: ssl.SSLContext, settings: Mapping[str, object]) -> None:
    suites: tuple[str, ...] = tuple(_get(settings, "ssl.cipher.suites") or ())
    if not suites:
        return
    shown = ",".join(suites)
    known = _known_ciphers()
    tls12: list[str] = []
    wants_tls13 = False
    for suite in suites:
        mapped = java_cipher_to_openssl(suite)
        if mapped in TLS13_CIPHER_SUITES:
            wants_tls13 = True
        elif mapped in known:
            tls12.append(mapped)
        else:
            raise ConfigError("ssl.cipher.suites", shown, f"unsupported cipher suite {suite}")
    tls13 = _rank(ssl.TLSVersion.TLSv1_3)
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    elif _rank(ctx.minimum_version) < tls13:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3  # only TLSv1.3 suites named: older protocols cannot work
    if not wants_tls13:
        if _rank(ctx.minimum_version) >= tls13:
            raise ConfigError("ssl.cipher.suites", shown, "no cipher suite of the enabled protocols is listed")
        if _rank(ctx.maximum_version) >= tls13:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # as Java: no TLSv1.3 suite enabled, no TLSv1.3
    elif _rank(ctx.maximum_version) < tls13 and not tls12:
        raise ConfigError("ssl.cipher.suites", shown, "no cipher suite of the enabled protocols is listed")


def _unsupported(settings: Mapping[str, object]) -> None:
    if _get(settings, "ssl.engine.factory.class") is not None:
        raise ConfigError("ssl.engine.factory.class", _get(settings, "ssl.engine.factory.class"),
                          "custom SSL engine factories are not supported")
    provider = _get(settings, "ssl.provider")
    if provider is not None:
        raise ConfigError("ssl.provider", provider, "only the default (OpenSSL) provider is supported")


def _base_context(settings: Mapping[str, object], protocol: int) -> ssl.SSLContext:
    _unsupported(settings)
    ctx = ssl.SSLContext(protocol)
    _apply_protocols(ctx, settings)
    _apply_ciphers(ctx, settings)
    ctx.options |= ssl.OP_NO_COMPRESSION
    return ctx


# -- contexts ---------------------------------------------------------------------------------------


def server_context(settings: Mapping[str, object]) -> ssl.SSLContext:
    """A listener's context. Raises ConfigError when no keystore is configured or it cannot be used."""
    ctx = _base_context(settings, ssl.PROTOCOL_TLS_SERVER)
    store = load_keystore(settings)
    if store is None:
        # What a Java server engine without a key manager ends with on the first handshake.
        raise ConfigError("ssl.keystore.location", None, "A client SSLEngine created with the provided settings "
                          "can't connect to a server SSLEngine created with those settings. "
                          "(no cipher suites in common: no SSL key store is configured)")
    _install_keystore(ctx, store)
    auth = str(_get(settings, "ssl.client.auth")).lower()
    ctx.verify_mode = _CLIENT_AUTH.get(auth, ssl.CERT_NONE)  # Kafka falls back to NONE, with a warning
    if ctx.verify_mode is not ssl.CERT_NONE:
        trusted = load_truststore(settings)
        if trusted is None:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        else:
            ctx.load_verify_locations(cadata=trusted)
    return ctx


def client_context(settings: Mapping[str, object]) -> ssl.SSLContext:
    """A context for connections we open. The server's chain is always verified against the truststore
    (or the system CAs); its host name too unless ssl.endpoint.identification.algorithm is empty.
    The keystore, when configured, is offered as the client certificate."""
    ctx = _base_context(settings, ssl.PROTOCOL_TLS_CLIENT)
    algorithm = _get(settings, "ssl.endpoint.identification.algorithm")
    algorithm = str(algorithm).strip().lower() if algorithm is not None else ""
    if algorithm not in ("", "https"):
        raise ConfigError("ssl.endpoint.identification.algorithm", algorithm, "supported values: https or empty")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    trusted = load_truststore(settings)
    if trusted is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.load_verify_locations(cadata=trusted)
    store = load_keystore(settings)
    if store is not None:
        _install_keystore(ctx, store)
    return ctx


def validate_handshake(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext) -> None:
    """Kafka's SslEngineValidator: run a full handshake between the two contexts in memory (no host
    name check, as Kafka's validator passes no endpoint identification). Raises ssl.SSLError."""
    check_hostname = client_ctx.check_hostname
    client_ctx.check_hostname = False
    try:
        c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
        server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    finally:
        client_ctx.check_hostname = check_hostname
    done = [False, False]
    for _ in range(20):
        for i, (obj, out, peer_in) in enumerate(((client, c_out, s_in), (server, s_out, c_in))):
            if not done[i]:
                try:
                    obj.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
            data = out.read()
            if data:
                peer_in.write(data)
        if all(done) and not c_out.pending and not s_out.pending:
            # TLSv1.3: the server learns about a rejected client certificate only after its handshake
            # completes; exchanging one application byte surfaces that alert.
            client.write(b"\0")
            s_in.write(c_out.read())
            server.read(1)
            return
    raise ssl.SSLError("the handshake did not complete")
