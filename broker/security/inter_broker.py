"""How a broker secures the connections it opens to other brokers: one place, one answer.

Every broker-initiated connection -- the controller's channels to brokers, a broker's channel to the
controller (AlterPartition, ControlledShutdown), replica fetchers, forwarding to the controller and
WriteTxnMarkers -- goes to another broker's inter-broker listener (controller traffic: the control-plane
listener when ``control.plane.listener.name`` is set) and speaks that listener's security protocol,
as Kafka's ``ChannelBuilders.clientChannelBuilder`` sets it up for ``interBrokerListenerName`` /
``controlPlaneListenerName``:

- the security protocol is the listener's entry in ``listener.security.protocol.map``;
- SSL / SASL_SSL: a client TLS context from the listener's ssl.* settings
  (``listener.name.<l>.ssl.*`` over the broker-wide ``ssl.*``): the truststore verifies the other
  broker, the keystore is offered as this broker's certificate (for ``ssl.client.auth``), and
  ``ssl.endpoint.identification.algorithm`` decides whether the advertised host name is checked;
- SASL_PLAINTEXT / SASL_SSL: the mechanism ``sasl.mechanism.inter.broker.protocol`` with the broker's
  own ``username``/``password`` from the listener's JAAS configuration
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``), for both the inter-broker and the
  control-plane listener (Kafka uses the inter-broker mechanism for controller connections too).

The result is computed once, when the component that opens the connections is built (as Kafka builds
its client channel builders at start-up); a misconfiguration fails start-up with a ConfigError naming
the config at fault.
"""

from __future__ import annotations

from broker.listeners import parse_protocol_map
from config.registry import BrokerConfig, ConfigError
from protocol.client_connection import PLAINTEXT, ConnectionSecurity
from protocol.sasl_client import MECHANISMS, sasl_auth_factory

__all__ = ["inter_broker_security", "listener_security_protocol"]


def listener_security_protocol(config: BrokerConfig, listener: str) -> str:
    """The security protocol of ``listener`` (``listener.security.protocol.map``; a listener named
    after a protocol defaults to that protocol, as in Kafka)."""
    protocol_map = parse_protocol_map(config.get("listener.security.protocol.map"))
    name = listener.upper()
    protocol = protocol_map.get(name)
    if protocol is None:
        if name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            return name
        raise ConfigError("listener.security.protocol.map", config.get("listener.security.protocol.map"),
                          f"No security protocol defined for listener {name}")
    return protocol


def _ssl_settings(config: BrokerConfig, listener: str) -> dict[str, object]:
    from protocol.tls import SSL_CONFIG_NAMES

    return {name: config.listener_get(listener, name) for name in SSL_CONFIG_NAMES}


def inter_broker_security(config: BrokerConfig, listener: str) -> ConnectionSecurity:
    """The security of connections this broker opens to ``listener`` on other brokers (the inter-broker
    listener, or the control-plane listener for controller requests)."""
    protocol = listener_security_protocol(config, listener)
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        from protocol.tls import client_context

        ssl_context = client_context(_ssl_settings(config, listener))
    auth = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        from broker.security.jaas import client_credentials

        mechanism = str(config.get("sasl.mechanism.inter.broker.protocol"))
        if mechanism not in MECHANISMS:
            raise ConfigError("sasl.mechanism.inter.broker.protocol", mechanism,
                              f"SASL mechanism {mechanism} is not supported for inter-broker connections "
                              f"(supported: {', '.join(MECHANISMS)})")
        enabled = [m.strip() for m in config.listener_get(listener, "sasl.enabled.mechanisms") or ()]
        if mechanism not in enabled:
            # Kafka's KafkaConfig.validateValues wording.
            raise ConfigError("sasl.mechanism.inter.broker.protocol", mechanism,
                              "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                              "when SASL is used for inter-broker communication")
        username, password = client_credentials(config, listener, mechanism)
        auth = sasl_auth_factory(mechanism, username, password)
    elif protocol != "SSL":
        raise ConfigError("listener.security.protocol.map", config.get("listener.security.protocol.map"),
                          f"unknown security protocol {protocol} for listener {listener}")
    return ConnectionSecurity(protocol, ssl_context, None, auth)
