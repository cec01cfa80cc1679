"""protocol/tls.py and the listener side of rotation, without a broker: contexts from Kafka's ssl.*
settings (checked by in-memory handshakes), Kafka's keystore/truststore errors, cipher names,
protocol versions, and ListenerTls' checks on a changed keystore."""

from __future__ import annotations

import os
import ssl
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from broker.listeners import listener_config_name, parse_listeners, parse_protocol_map
from broker.security.tls_listener import ListenerTls
from config.registry import BrokerConfig, ConfigError
from protocol import tls
from tests.security.conftest import KEY_PASSWORD, STORE_PASSWORD, Certs, Party


def pem_keystore(party: Party) -> dict[str, Any]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(party.keystore_pem),
            "ssl.key.password": KEY_PASSWORD}


def trust(certs: Certs) -> dict[str, Any]:
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_file)}


def client_settings(certs: Certs, party: Party | None = None) -> dict[str, Any]:
    settings = {**trust(certs), "ssl.endpoint.identification.algorithm": ""}
    if party is not None:
        settings.update({"ssl.keystore.type": "PEM", "ssl.keystore.key": party.key_pem(),
                         "ssl.keystore.certificate.chain": party.chain_pem})
    return settings


def test_keystore_variants_load_the_same_identity(certs: Certs) -> None:
    variants = [
        pem_keystore(certs.broker),
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.keystore_pem).replace(
            "-enc-keystore", "-keystore").replace("broker-enc", "broker")},  # unencrypted key file
        {"ssl.keystore.type": "PEM", "ssl.keystore.key": certs.broker.key_pem(KEY_PASSWORD),
         "ssl.key.password": KEY_PASSWORD, "ssl.keystore.certificate.chain": certs.broker.chain_pem},
        {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs.broker.pkcs12),
         "ssl.keystore.password": STORE_PASSWORD},
        # Java reads a PKCS12 file declared JKS (keystore.type.compat); so do we.
        {"ssl.keystore.location": str(certs.broker.pkcs12), "ssl.keystore.password": STORE_PASSWORD},
    ]
    for settings in variants:
        store = tls.load_keystore(settings)
        assert store is not None and store.subject == certs.broker.subject, settings
        assert ("DNS", "localhost") in store.subject_alt_names and ("IP", "127.0.0.1") in store.subject_alt_names
        tls.validate_handshake(tls.client_context(client_settings(certs)), tls.server_context(settings))


def test_truststore_variants(certs: Certs) -> None:
    for settings in (trust(certs),
                     {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs.ca_pem},
                     {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(certs.truststore_p12),
                      "ssl.truststore.password": STORE_PASSWORD}):
        assert tls.load_truststore(settings) == certs.ca_pem
        server = tls.server_context({**pem_keystore(certs.broker), **settings, "ssl.client.auth": "required"})
        tls.validate_handshake(tls.client_context(client_settings(certs, certs.client)), server)


@pytest.mark.parametrize(("auth", "party", "accepted"), [
    ("required", "client", True), ("required", None, False), ("required", "untrusted_client", False),
    ("requested", "client", True), ("requested", None, True), ("requested", "untrusted_client", False),
    ("none", None, True), ("none", "untrusted_client", True),
])
def test_client_auth(certs: Certs, auth: str, party: str | None, accepted: bool) -> None:
    server = tls.server_context({**pem_keystore(certs.broker), **trust(certs), "ssl.client.auth": auth})
    client = tls.client_context(client_settings(certs, getattr(certs, party) if party else None))
    if accepted:
        tls.validate_handshake(client, server)
    else:
        with pytest.raises(ssl.SSLError):
            tls.validate_handshake(client, server)


def test_client_checks_the_server(certs: Certs) -> None:
    server = tls.server_context(pem_keystore(certs.broker))
    # Another CA: the server's chain does not verify.
    other = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs.untrusted_ca.cert_pem}
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        tls.validate_handshake(tls.client_context(other), server)
    # Host name checking (https) is on by default and checks the SANs.
    ctx = tls.client_context(trust(certs))
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert not tls.client_context({**trust(certs), "ssl.endpoint.identification.algorithm": ""}).check_hostname
    for name, ok in (("localhost", True), ("127.0.0.1", True), ("elsewhere.example", False)):
        c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        client = ctx.wrap_bio(c_in, c_out, server_hostname=name)
        srv = server.wrap_bio(s_in, s_out, server_side=True)
        error: Exception | None = None
        for _ in range(10):
            for obj, out, peer in ((client, c_out, s_in), (srv, s_out, c_in)):
                try:
                    obj.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as e:
                    error = e
                peer.write(out.read())
        assert (error is None) == ok, (name, error)


@pytest.mark.parametrize(("settings", "message"), [
    ({"ssl.keystore.key": "x", "ssl.keystore.certificate.chain": "y"},
     "SSL private key can be specified only for PEM, but key store type is JKS."),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"},
     "SSL private key is specified, but certificate chain is not specified."),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "y"},
     "SSL certificate chain is specified, but private key is not specified"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/x", "ssl.keystore.password": "p"},
     "SSL key store password cannot be specified with PEM format, only key password may be specified"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/x"},
     "SSL key store is specified, but key store password is not specified."),
    ({"ssl.keystore.password": "p"}, "SSL key store is not specified, but key store password is specified."),
    ({"ssl.truststore.certificates": "x"},
     "SSL trust store certs can be specified only for PEM, but trust store type is JKS."),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/x", "ssl.truststore.password": "p"},
     "SSL trust store password cannot be specified for PEM format."),
    ({"ssl.truststore.password": "p"}, "SSL trust store is not specified, but trust store password is specified."),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "no key", "ssl.keystore.certificate.chain": "no cert"},
     "At least one certificate expected, but none found"),
])
def test_kafka_store_errors(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        tls.load_keystore(settings)
        tls.load_truststore(settings)
    assert message in str(e.value)


def test_jks_keystore_is_refused_clearly(certs: Certs) -> None:
    jks = certs.directory / "real.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + os.urandom(64))
    with pytest.raises(ConfigError, match="JKS keystores cannot be read here; convert it to PKCS12"):
        tls.load_keystore({"ssl.keystore.type": "JKS", "ssl.keystore.location": str(jks),
                           "ssl.keystore.password": "x"})


def test_wrong_key_password_and_mismatched_key(certs: Certs) -> None:
    with pytest.raises(ConfigError, match="Private key could not be loaded"):
        tls.load_keystore({**pem_keystore(certs.broker), "ssl.key.password": "wrong"})
    with pytest.raises(ConfigError, match="Failed to load SSL keystore"):
        tls.load_keystore({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs.broker.pkcs12),
                           "ssl.keystore.password": "wrong"})
    with pytest.raises(ConfigError, match="does not match the first certificate"):
        tls.load_keystore({"ssl.keystore.type": "PEM", "ssl.keystore.key": certs.client.key_pem(),
                           "ssl.keystore.certificate.chain": certs.broker.chain_pem})


def test_no_key_left_on_disk(certs: Certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A temporary directory of this test's own: brokers of the tests that run beside it (`make test`
    # runs two workers) load keys through the shared one meanwhile.
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    made_by_tls: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recorded_mkdtemp(*args: Any, **kwargs: Any) -> str:
        made_by_tls.append(mkdtemp(*args, **kwargs))
        return made_by_tls[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recorded_mkdtemp)
    tls.server_context(pem_keystore(certs.broker))
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    assert [os.path.dirname(d) for d in made_by_tls] == [str(private)]  # the key went through one
    assert os.listdir(private) == []
    # The directory the key passes through is private while it exists.
    made = tempfile.mkdtemp(prefix="kafkette-tls-probe-")
    try:
        assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    finally:
        os.rmdir(made)


def test_cipher_suite_names() -> None:
    cases = {
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
        "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
        "TLS_AES_128_GCM_SHA256": "TLS_AES_128_GCM_SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    }
    for java, openssl in cases.items():
        assert tls.java_cipher_to_openssl(java) == openssl


def test_cipher_suites_and_protocols(certs: Certs) -> None:
    server = {**pem_keystore(certs.broker)}
    # Only TLSv1.2 suites: TLSv1.3 is off (Java enables no TLSv1.3 suite either) and the suite is used.
    ctx = tls.server_context({**server, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"})
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES256-GCM-SHA384"]
    # Only TLSv1.3 suites: TLSv1.3 only.
    ctx = tls.server_context({**server, "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"})
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match="unsupported cipher suite TLS_NOPE"):
        tls.server_context({**server, "ssl.cipher.suites": "TLS_NOPE"})
    ctx = tls.server_context({**server, "ssl.enabled.protocols": "TLSv1.3"})
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match="unsupported protocol SSLv3"):
        tls.server_context({**server, "ssl.enabled.protocols": "SSLv3"})
    # Client limited to TLSv1.2 against the default server: they agree on TLSv1.2.
    client = tls.client_context({**client_settings(certs), "ssl.enabled.protocols": "TLSv1.2"})
    tls.validate_handshake(client, tls.server_context(server))


def test_server_context_needs_a_keystore() -> None:
    with pytest.raises(ConfigError, match="A client SSLEngine created with the provided settings can't connect"):
        tls.server_context({})


# -- listeners --------------------------------------------------------------------------------------


def test_listener_protocols_and_kafka_messages() -> None:
    pmap = parse_protocol_map("PLAINTEXT:PLAINTEXT,SSL:SSL,SECURE:SASL_SSL,INTERNAL:SASL_PLAINTEXT")
    eps = parse_listeners("listeners", "PLAINTEXT://:9092,SSL://:9093,SECURE://h:9094,INTERNAL://h:9095", pmap)
    assert [(e.name, e.security_protocol, e.security_protocol_id) for e in eps] == [
        ("PLAINTEXT", "PLAINTEXT", 0), ("SSL", "SSL", 1), ("SECURE", "SASL_SSL", 3), ("INTERNAL", "SASL_PLAINTEXT", 2)]
    assert [e.uses_tls for e in eps] == [False, True, True, False]
    with pytest.raises(ConfigError, match="Error creating broker listeners from 'FOO://:1': No security protocol "
                                          "defined for listener FOO"):
        parse_listeners("listeners", "FOO://:1", pmap)
    with pytest.raises(ConfigError, match="Invalid security protocol `TLS` defined in listener.security.protocol.map"):
        parse_protocol_map("A:TLS")
    with pytest.raises(ConfigError, match="Each listener must have a different port"):
        parse_listeners("listeners", "PLAINTEXT://:1,SSL://:1", pmap)
    with pytest.raises(ConfigError, match="Each listener must have a different name"):
        parse_listeners("listeners", "SSL://:1,SSL://:2", pmap)
    assert listener_config_name("listener.name.ssl.ssl.keystore.location") == "ssl.keystore.location"
    assert listener_config_name("listener.name.sasl_ssl.plain.sasl.jaas.config") == "sasl.jaas.config"
    assert listener_config_name("listener.name.ssl.nope") is None


def _listener(certs: Certs, **extra: str) -> ListenerTls:
    props = {"listeners": "PLAINTEXT://:9092,SSL://:9093", "zookeeper.connect": "x:1",
             **{f"listener.name.ssl.{k}": v for k, v in {**pem_keystore(certs.broker), **trust(certs)}.items()},
             **extra}
    return ListenerTls.build(BrokerConfig(props), "SSL", inter_broker=False)


def _with_keystore(listener: ListenerTls, party: Party, **static: str) -> BrokerConfig:
    props: dict[str, str] = {"listeners": "PLAINTEXT://:9092,SSL://:9093", "zookeeper.connect": "x:1", **static}
    return BrokerConfig(props, dynamic_broker={
        **{f"listener.name.ssl.{k}": v for k, v in {**pem_keystore(party), **trust_of(listener)}.items()}})


def trust_of(listener: ListenerTls) -> dict[str, Any]:
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(listener.settings["ssl.truststore.location"])}


def test_listener_rotation_checks(certs: Certs) -> None:
    listener = _listener(certs)
    same = certs.new_broker_certificate("unit-same", certs.broker.subject)
    other_dn = certs.new_broker_certificate("unit-dn", "CN=other,O=kafkette")
    fewer_sans = make_narrow(certs)
    assert listener.validate_reconfiguration(_with_keystore(listener, certs.broker)) is None  # nothing changed
    with pytest.raises(ConfigError, match="Keystore DistinguishedName does not match"):
        listener.validate_reconfiguration(_with_keystore(listener, other_dn))
    with pytest.raises(ConfigError, match="Keystore SubjectAltNames do not match"):
        listener.validate_reconfiguration(_with_keystore(listener, fewer_sans))
    # Kafka's escape hatches (static configs here: they are not dynamic).
    assert listener.validate_reconfiguration(_with_keystore(listener, other_dn, **{"ssl.allow.dn.changes": "true"}))
    assert listener.validate_reconfiguration(_with_keystore(listener, fewer_sans,
                                                            **{"ssl.allow.san.changes": "true"}))
    assert listener.reconfigure(_with_keystore(listener, same))
    assert listener.keystore is not None and listener.keystore.chain[0] == same.issued.cert


def make_narrow(certs: Certs) -> Party:
    from tests.security.conftest import make_party

    issued = certs.ca.issue(certs.broker.subject, server=True, client=True, dns_names=["localhost"])
    return make_party(certs.directory, "unit-narrow", issued)


def test_inter_broker_listener_validates_its_own_handshake(certs: Certs) -> None:
    props = {"listeners": "SSL://:9093", "zookeeper.connect": "x:1", "security.inter.broker.protocol": "SSL",
             **pem_keystore(certs.broker)}
    # No truststore: the broker's own certificate does not verify against the system CAs.
    with pytest.raises(ConfigError, match="A client SSLEngine created with the provided settings can't connect"):
        ListenerTls.build(BrokerConfig(props), "SSL", inter_broker=True)
    ListenerTls.build(BrokerConfig({**props, **trust(certs)}), "SSL", inter_broker=True)
