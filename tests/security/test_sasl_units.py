"""The SASL pieces without a broker: Kafka's JAAS config format, the PLAIN and SCRAM server exchanges
(against a client exchange built from protocol/scram), and start-up validation of SASL listeners."""

from __future__ import annotations

import pytest

from broker.security.jaas import (
    PLAIN_LOGIN_MODULE,
    JaasConfigError,
    client_credentials,
    parse_jaas_config,
    plain_users,
)
from broker.security.sasl_mechanism import SaslAuthenticationFailed, SaslFailed
from broker.security.sasl_plain import PlainSaslServer
from broker.security.sasl_scram import ScramSaslServer
from broker.security.sasl_server import BrokerSasl, listener_settings
from broker.security.scram_credentials import ScramCredentialCache
from config.registry import BrokerConfig, ConfigError
from protocol import scram
from tests.security.sasl_helpers import ScramExchange, plain_jaas, scram_jaas

# -- JAAS ------------------------------------------------------------------------------------------


def test_jaas_entries_with_quoted_and_bare_values_and_comments() -> None:
    text = (f'{PLAIN_LOGIN_MODULE} required /* the admin */ username="admin" password=\'a "b\' '
            'user_admin="a\\tb" user_x=plain;  // trailing comment\n'
            "org.example.Other optional;")
    first, second = parse_jaas_config(text)
    assert first.login_module == PLAIN_LOGIN_MODULE and first.control_flag == "REQUIRED"
    assert dict(first.options) == {"username": "admin", "password": 'a "b', "user_admin": "a\tb", "user_x": "plain"}
    assert (second.login_module, second.control_flag, dict(second.options)) == ("org.example.Other", "OPTIONAL", {})
    assert plain_users([first, second]) == {"admin": "a\tb", "x": "plain"}


@pytest.mark.parametrize(("text", "message"), [
    ("", "Login module not specified in JAAS config"),
    (f"{PLAIN_LOGIN_MODULE}", "Login module control flag not specified in JAAS config"),
    (f"{PLAIN_LOGIN_MODULE} mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    (f'{PLAIN_LOGIN_MODULE} required username="a"', "JAAS config entry not terminated by semi-colon"),
    (f"{PLAIN_LOGIN_MODULE} required username=;", "Value not specified for key 'username' in JAAS config"),
])
def test_jaas_errors_are_kafkas(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config(text)
    assert str(e.value) == message


def _config(**extra: str) -> BrokerConfig:
    base = {"zookeeper.connect": "localhost:2181", "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}
    base.update({k.replace("__", "."): v for k, v in extra.items()})
    return BrokerConfig(base)


def test_jaas_per_listener_and_mechanism_then_broker_wide() -> None:
    config = _config(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas({"alice": "s"}),
                        "sasl.jaas.config": scram_jaas()})
    settings = listener_settings(config, "SASL_PLAINTEXT")
    assert settings.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert settings.plain_users == {"alice": "s"}
    assert client_credentials(config, "SASL_PLAINTEXT", "PLAIN") == ("admin", "admin-secret")
    assert client_credentials(config, "SASL_PLAINTEXT", "SCRAM-SHA-256") == ("admin", "admin-secret")


@pytest.mark.parametrize(("extra", "needle"), [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "SASL mechanism GSSAPI is not supported"),
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "SASL mechanism OAUTHBEARER is not supported"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-1"}, "unknown SASL mechanism SCRAM-SHA-1"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "set listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "x required"}, "not terminated by semi-colon"),
])
def test_sasl_listener_config_errors_fail_start_up(extra: dict[str, str], needle: str) -> None:
    config = BrokerConfig({"zookeeper.connect": "localhost:2181",
                           "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", **extra})
    with pytest.raises(ConfigError) as e:
        BrokerSasl(lambda: config, [_Endpoint("PLAINTEXT", "PLAINTEXT"), _Endpoint("SASL_PLAINTEXT", "SASL_PLAINTEXT")])
    assert needle in str(e.value)
    assert "secret" not in str(e.value)


class _Endpoint:
    def __init__(self, name: str, security_protocol: str) -> None:
        self.name, self.security_protocol = name, security_protocol


def test_reauth_ms_per_listener_and_mechanism() -> None:
    config = _config(**{"sasl.jaas.config": f"{plain_jaas({})} {scram_jaas()}",
                        "connections.max.reauth.ms": "100000",
                        "listener.name.sasl_plaintext.connections.max.reauth.ms": "20000",
                        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "3000"})
    assert listener_settings(config, "SASL_PLAINTEXT").max_reauth_ms == {"PLAIN": 20000, "SCRAM-SHA-256": 3000}
    assert listener_settings(config, "OTHER").max_reauth_ms == {"PLAIN": 100000, "SCRAM-SHA-256": 100000}


# -- PLAIN -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0x", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_failures_say_what_kafka_says(token: bytes, message: str) -> None:
    server = PlainSaslServer(lambda: {"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationFailed) as e:
        server.evaluate(token)
    assert str(e.value) == message and not server.complete


def test_plain_success() -> None:
    server = PlainSaslServer(lambda: {"alice": "alice-secret"})
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"


# -- SCRAM -----------------------------------------------------------------------------------------


def _cache(mechanism: str, user: str, password: str, iterations: int = 4096) -> ScramCredentialCache:
    cache = ScramCredentialCache()
    cache.update_user(user, {mechanism: scram.credential_from_password(mechanism, password, iterations).format()})
    return cache


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_and_server_signature(mechanism: str) -> None:
    server = ScramSaslServer(mechanism, _cache(mechanism, "carol", "pw").get)
    client = ScramExchange(mechanism, "carol", "pw")
    server_first = server.evaluate(client.client_first())
    assert server_first is not None and not server.complete
    server_final = server.evaluate(client.client_final(server_first))
    assert server_final is not None and client.server_final_ok(server_final)
    assert server.complete and server.authorization_id == "carol"


def test_scram_wrong_password_unknown_user_and_other_mechanism_fail() -> None:
    cache = _cache("SCRAM-SHA-256", "carol", "pw")
    server = ScramSaslServer("SCRAM-SHA-256", cache.get)
    client = ScramExchange("SCRAM-SHA-256", "carol", "not-pw")
    with pytest.raises(SaslFailed, match="Invalid client credentials"):
        server.evaluate(client.client_final(server.evaluate(client.client_first()) or b""))
    with pytest.raises(SaslFailed, match="Invalid user credentials"):
        ScramSaslServer("SCRAM-SHA-256", cache.get).evaluate(ScramExchange("SCRAM-SHA-256", "dave", "x").client_first())
    # carol has no SCRAM-SHA-512 credential
    with pytest.raises(SaslFailed, match="Invalid user credentials"):
        ScramSaslServer("SCRAM-SHA-512", cache.get).evaluate(ScramExchange("SCRAM-SHA-512", "carol", "pw").client_first())
    with pytest.raises(SaslFailed, match="Invalid SCRAM client first message"):
        ScramSaslServer("SCRAM-SHA-256", cache.get).evaluate(b"garbage")


def test_scram_credentials_follow_entity_configs() -> None:
    cache = _cache("SCRAM-SHA-256", "carol", "pw")
    assert cache.get("SCRAM-SHA-256", "carol") is not None
    cache.update_user("carol", {"SCRAM-SHA-512": scram.credential_from_password("SCRAM-SHA-512", "pw", 4096).format()})
    assert cache.get("SCRAM-SHA-256", "carol") is None and cache.get("SCRAM-SHA-512", "carol") is not None
    cache.update_user("carol", {"SCRAM-SHA-512": "not a credential"})
    assert cache.get("SCRAM-SHA-512", "carol") is None
