"""One Kafka client properties file (``--command-config``) for every client of the pipeline.

The file uses Kafka's client config names (what ``make run-secure`` writes as ``client.properties``)::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="...";
    ssl.truststore.type=PEM
    ssl.truststore.location=/path/to/ca.pem

- Spark's Kafka connector takes them as options prefixed with ``kafka.`` (``spark_options``), on the
  source and the sink alike; only the security settings are passed (``security.*``, ``sasl.*``,
  ``ssl.*``), since the connector manages deserializers, offsets and group ids itself and refuses
  some of those options.
- kafka-python (the event generator, topic creation, reading results) has its own argument names
  (``kafka_python_config``): security_protocol, sasl_mechanism, sasl_plain_username/password from the
  JAAS entry, ssl_cafile from a PEM truststore, ssl_certfile/ssl_keyfile from a PEM keystore.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["SECURITY_PREFIXES", "kafka_python_config", "load", "security_settings", "spark_options"]

SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")


def load(path: str | os.PathLike[str] | None) -> dict[str, str]:
    """The properties in ``path`` (Java .properties rules), values trimmed as Kafka's clients trim them;
    empty without a path."""
    if not path:
        return {}
    from config.properties import read_properties

    return {k: v.strip() for k, v in read_properties(str(path)).items()}


def security_settings(props: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k.startswith(SECURITY_PREFIXES)}


def spark_options(props: Mapping[str, str]) -> dict[str, str]:
    """Spark Kafka source/sink options: ``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ..."""
    return {f"kafka.{k}": v for k, v in security_settings(props).items()}


def _jaas_credentials(jaas: str) -> tuple[str, str]:
    from broker.security.jaas import parse_jaas_config

    for entry in parse_jaas_config(jaas):
        username, password = entry.options.get("username"), entry.options.get("password")
        if username is not None and password is not None:
            return username, password
    raise ValueError("sasl.jaas.config has no username and password")


def kafka_python_config(props: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python keyword arguments for the same security settings (ValueError for what kafka-python
    cannot take: PKCS12 or JKS stores, mechanisms other than PLAIN and SCRAM)."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return {}
    out: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism", "GSSAPI")
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"sasl.mechanism={mechanism}: the pipeline's kafka-python clients take PLAIN or SCRAM")
        username, password = _jaas_credentials(props.get("sasl.jaas.config", ""))
        out.update(sasl_mechanism=mechanism, sasl_plain_username=username, sasl_plain_password=password)
    if protocol in ("SSL", "SASL_SSL"):
        truststore = props.get("ssl.truststore.location")
        if truststore:
            if props.get("ssl.truststore.type", "JKS").upper() != "PEM":
                raise ValueError("the pipeline's kafka-python clients need ssl.truststore.type=PEM")
            out["ssl_cafile"] = truststore
        keystore = props.get("ssl.keystore.location")
        if keystore:
            if props.get("ssl.keystore.type", "JKS").upper() != "PEM":
                raise ValueError("the pipeline's kafka-python clients need ssl.keystore.type=PEM")
            out.update(ssl_certfile=keystore, ssl_keyfile=keystore, ssl_password=props.get("ssl.key.password"))
        # Kafka's clients check the broker's host name by default; an empty algorithm turns that off.
        out["ssl_check_hostname"] = props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    return out
