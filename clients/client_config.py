"""Client-side configuration inputs: bootstrap server lists, Java-style .properties files, and the
security settings in them (Kafka's client property names).

``client_security(props)`` turns a client properties file (``--command-config``, ``--producer.config``,
...) into the ``ConnectionSecurity`` every connection of the CLI uses:

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL (case-insensitive, as
  Kafka's validator is);
- SSL / SASL_SSL: every ``ssl.*`` property goes to ``protocol/tls.py``'s client context:
  ``ssl.truststore.type`` PEM (``ssl.truststore.location`` or inline ``ssl.truststore.certificates``)
  or PKCS12 (with ``ssl.truststore.password``), ``ssl.keystore.*`` for a client certificate (PEM files,
  inline ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key``, or PKCS12),
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks the broker's host name;
  empty does not), ``ssl.enabled.protocols``, ``ssl.cipher.suites``;
- SASL_PLAINTEXT / SASL_SSL: ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default,
  GSSAPI, is not supported) with the ``username`` and ``password`` of ``sasl.jaas.config``
  (``org.apache.kafka.common.security.plain.PlainLoginModule required username="..." password="...";`` or
  ``...scram.ScramLoginModule``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from clients.connection import UsageError
from config.properties import read_properties
from protocol.client_connection import PLAINTEXT, AuthStepFactory, ConnectionSecurity

__all__ = ["SECURITY_PROTOCOLS", "client_security", "load_properties", "parse_bootstrap"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise UsageError(f"invalid bootstrap server {item!r}: expected host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise UsageError("no bootstrap servers given")
    return out


def load_properties(path: str | None) -> dict[str, str]:
    """A client .properties file (``--command-config``, ``--producer.config``), read by Java's rules;
    values are trimmed, as Kafka's client config parsing trims them."""
    if not path:
        return {}
    try:
        props = read_properties(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    return {k: v.strip() for k, v in props.items()}


def client_security(props: Mapping[str, str]) -> ConnectionSecurity:
    """The security of the CLI's connections from Kafka's client properties (UsageError when invalid)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise UsageError(f"Invalid value {protocol} for configuration security.protocol: String must be one of: "
                         f"{', '.join(SECURITY_PROTOCOLS)}")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = _ssl_context(props)
    auth = None
    if protocol.startswith("SASL_"):
        auth = _sasl_auth(props)
    return ConnectionSecurity(protocol, ssl_context, None, auth)


def _ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    from config.registry import ConfigError
    from protocol.tls import SSL_CONFIG_NAMES, client_context

    settings = {k: v for k, v in props.items() if k in SSL_CONFIG_NAMES}
    try:
        return client_context(settings)
    except ConfigError as e:
        raise UsageError(f"Invalid SSL settings: {e}") from None
    except (OSError, ValueError) as e:  # an unreadable or malformed certificate file
        raise UsageError(f"Invalid SSL settings: {e}") from None


def _sasl_auth(props: Mapping[str, str]) -> AuthStepFactory:
    from broker.security.jaas import JaasConfigError, parse_jaas_config
    from protocol.sasl_client import MECHANISMS, sasl_auth_factory

    mechanism = props.get("sasl.mechanism", "GSSAPI").strip()
    if mechanism not in MECHANISMS:
        default = " (Kafka's default)" if "sasl.mechanism" not in props else ""
        raise UsageError(f"security.protocol={props.get('security.protocol', '').strip().upper()} needs "
                         f"sasl.mechanism {', '.join(MECHANISMS[:-1])} or {MECHANISMS[-1]}; "
                         f"{mechanism}{default} is not supported by this client")
    jaas = props.get("sasl.jaas.config")
    if not jaas:
        # What Kafka's client says when neither sasl.jaas.config nor a JAAS file is given.
        raise UsageError("Could not find a 'KafkaClient' entry in the JAAS configuration: set sasl.jaas.config "
                         f"(a {'PlainLoginModule' if mechanism == 'PLAIN' else 'ScramLoginModule'} with "
                         "username and password)")
    try:
        entries = parse_jaas_config(jaas)
    except JaasConfigError as e:
        raise UsageError(f"Invalid sasl.jaas.config: {e}") from None
    for entry in entries:
        username, password = entry.options.get("username"), entry.options.get("password")
        if username is not None and password is not None:
            return sasl_auth_factory(mechanism, username, password)
    raise UsageError("sasl.jaas.config has no username and password")
