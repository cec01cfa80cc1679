"""A TLS listener's server side: its SSL context, built from the listener's ssl.* configs, and its
rotation without a restart (Kafka's SslFactory as a listener reconfigurable).

Each SSL / SASL_SSL listener has one ``ListenerTls``. Its ``context`` is what new connections are
wrapped with; ``reconfigure(config)`` builds a new context when the listener's ssl.* values changed (a
dynamic per-broker config update, e.g. ``listener.name.ssl.ssl.keystore.location``) or a keystore or
truststore file was modified, after Kafka's checks:

- a keystore cannot be added to or removed from a listener;
- the new certificate keeps the old one's DN unless ``ssl.allow.dn.changes``, and all its SANs unless
  ``ssl.allow.san.changes``;
- a truststore cannot be added to a listener that had none;
- on the inter-broker listener, old and new settings must complete a handshake with each other
  (Kafka's SslEngineValidator), so brokers not yet updated can still connect.

Connections already open keep the context they were accepted with, as in Kafka.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.security.ssl_principal import SslPrincipalMapper
from config.registry import BrokerConfig, ConfigError
from protocol import tls

log = logging.getLogger(__name__)

# Configs that shape the listener's TLS engine or its checks on reconfiguration.
_LISTENER_SSL_NAMES = (*tls.SSL_CONFIG_NAMES, "ssl.allow.dn.changes", "ssl.allow.san.changes",
                       "ssl.principal.mapping.rules")
_FILES = ("ssl.keystore.location", "ssl.truststore.location")


def listener_ssl_settings(config: BrokerConfig, listener: str) -> dict[str, object]:
    """The ssl.* values one listener sees (``listener.name.<l>.ssl.*`` over the broker-wide value)."""
    return {name: config.listener_get(listener, name) for name in _LISTENER_SSL_NAMES}


def _file_stamps(settings: Mapping[str, object]) -> dict[str, tuple[int, int] | None]:
    stamps: dict[str, tuple[int, int] | None] = {}
    for name in _FILES:
        path = settings.get(name)
        if isinstance(path, str):
            try:
                st = os.stat(path)
                stamps[path] = (st.st_mtime_ns, st.st_size)
            except OSError:
                stamps[path] = None
    return stamps


@dataclass
class ListenerTls:
    """One TLS listener's current server context and what it was built from."""

    listener: str
    inter_broker: bool
    settings: dict[str, object]
    context: ssl.SSLContext
    keystore: tls.Keystore | None
    truststore: str | None
    principal_mapper: SslPrincipalMapper
    stamps: dict[str, tuple[int, int] | None] = field(default_factory=dict)

    @classmethod
    def build(cls, config: BrokerConfig, listener: str, *, inter_broker: bool) -> ListenerTls:
        """The listener's context at start-up; raises ConfigError with Kafka's message when the
        keystore is missing or unusable."""
        settings = listener_ssl_settings(config, listener)
        made = cls._make(listener, settings, inter_broker=inter_broker)
        if inter_broker:
            _validate_self(made)
        return made

    @classmethod
    def _make(cls, listener: str, settings: dict[str, object], *, inter_broker: bool) -> ListenerTls:
        context = tls.server_context(settings)
        mapper = _principal_mapper(settings, listener)
        return cls(listener, inter_broker, settings, context, tls.load_keystore(settings), tls.load_truststore(settings),
                   mapper, _file_stamps(settings))

    def _needs_rebuild(self, settings: Mapping[str, object]) -> bool:
        return dict(settings) != self.settings or _file_stamps(settings) != self.stamps

    def validate_reconfiguration(self, config: BrokerConfig) -> ListenerTls | None:
        """The rebuilt listener state if ``config`` changes this listener's TLS, None if it does not;
        raises ConfigError (Kafka's "Validation of dynamic config update of SSLFactory failed: ...")."""
        settings = listener_ssl_settings(config, self.listener)
        if not self._needs_rebuild(settings):
            return None
        try:
            new = self._make(self.listener, settings, inter_broker=self.inter_broker)
            self._check_compatible(new, settings)
        except (ConfigError, ssl.SSLError, ValueError) as e:
            reason = e.reason if isinstance(e, ConfigError) else str(e)
            raise ConfigError(_changed_name(settings, self.settings, self.listener), "[hidden]",
                              f"Validation of dynamic config update of SSLFactory failed: {reason}") from None
        return new

    def _check_compatible(self, new: ListenerTls, settings: Mapping[str, object]) -> None:
        old_store, new_store = self.keystore, new.keystore
        if old_store is None and new_store is not None:
            raise ConfigError("ssl.keystore.location", None,
                              "Cannot add SSL keystore to an existing listener for which no keystore was configured.")
        if old_store is not None and new_store is None:
            raise ConfigError("ssl.keystore.location", None, "Cannot remove the SSL keystore from an existing "
                              "listener for which a keystore was configured.")
        if old_store is not None and new_store is not None:
            if not settings.get("ssl.allow.dn.changes") and old_store.subject.lower() != new_store.subject.lower():
                raise ConfigError("ssl.keystore.location", None, "Keystore DistinguishedName does not match:  "
                                  f"existing={{DN={old_store.subject}}}, new={{DN={new_store.subject}}}")
            if not settings.get("ssl.allow.san.changes") and \
                    not old_store.subject_alt_names <= new_store.subject_alt_names:
                raise ConfigError("ssl.keystore.location", None, "Keystore SubjectAltNames do not match:  "
                                  f"existing={{SAN={_sans(old_store)}}}, new={{SAN={_sans(new_store)}}}")
        if self.truststore is None and new.truststore is not None:
            raise ConfigError("ssl.truststore.location", None, "Cannot add SSL truststore to an existing listener "
                              "for which no truststore was configured.")
        if self.inter_broker:
            # Brokers still on the old certificate must reach this one and the other way round.
            tls.validate_handshake(_validation_client(self.settings), new.context)
            tls.validate_handshake(_validation_client(new.settings), self.context)

    def adopt(self, new: ListenerTls) -> None:
        """Switch to a validated rebuild: new connections use its context from now on."""
        self.settings, self.context, self.keystore = new.settings, new.context, new.keystore
        self.truststore, self.principal_mapper, self.stamps = new.truststore, new.principal_mapper, new.stamps

    def reconfigure(self, config: BrokerConfig) -> bool:
        """Validate and adopt ``config``'s TLS settings for this listener; True if the context changed."""
        new = self.validate_reconfiguration(config)
        if new is None:
            return False
        self.adopt(new)
        subject = new.keystore.subject if new.keystore else None
        log.info("Created new SERVER SSL engine builder for listener %s with keystore %s (certificate %s)",
                 self.listener, new.settings.get("ssl.keystore.location") or "(inline PEM)", subject)
        return True


def _principal_mapper(settings: Mapping[str, object], listener: str) -> SslPrincipalMapper:
    rules = settings.get("ssl.principal.mapping.rules")
    try:
        return SslPrincipalMapper(rules if isinstance(rules, str) else None)
    except ValueError as e:
        raise ConfigError("ssl.principal.mapping.rules", rules, str(e)) from None


def _validation_client(settings: Mapping[str, object]) -> ssl.SSLContext:
    """A client context with the listener's own settings, as Kafka's validator builds its client
    engine: the listener's keystore is offered as the client certificate, its truststore verifies."""
    return tls.client_context({**settings, "ssl.endpoint.identification.algorithm": ""})


def _validate_self(made: ListenerTls) -> None:
    """Kafka validates the inter-broker listener's own settings at start-up (keystoreVerifiableUsingTruststore):
    a client built from them must be able to connect to a server built from them."""
    try:
        tls.validate_handshake(_validation_client(made.settings), made.context)
    except (ssl.SSLError, ConfigError) as e:
        raise ConfigError("ssl.keystore.location", made.settings.get("ssl.keystore.location"),
                          "A client SSLEngine created with the provided settings can't connect to a server "
                          f"SSLEngine created with those settings. ({e})") from None


def _sans(store: tls.Keystore) -> str:
    return "[" + ", ".join(f"{kind}:{value}" for kind, value in sorted(store.subject_alt_names)) + "]"


def _changed_name(new: Mapping[str, object], old: Mapping[str, object], listener: str) -> str:
    for name in _LISTENER_SSL_NAMES:
        if new.get(name) != old.get(name):
            return f"listener.name.{listener.lower()}.{name}"
    return f"listener.name.{listener.lower()}.ssl.keystore.location"
