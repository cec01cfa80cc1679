"""Kafka's ``sasl.jaas.config`` format, and what the broker reads from it.

A value is one or more login module entries, each ``<LoginModule class> <control flag> (key=value)* ;``
with values quoted or bare, ``//`` and ``/* */`` comments allowed (Kafka's JaasConfig, which tokenizes
with Java's StreamTokenizer). The broker reads it per listener and mechanism:
``listener.name.<listener>.<mechanism>.sasl.jaas.config``, then the broker-wide ``sasl.jaas.config``.
(Kafka's broker ignores the broker-wide value and falls back to a static JAAS file given with
``-Djava.security.auth.login.config``; kafkette has no JAAS file, so the broker-wide value takes its
place.)

What the options mean:

- PlainLoginModule: ``user_<name>="<password>"`` declares the users PLAIN authenticates (Kafka's
  PlainServerCallbackHandler); SCRAM users live in ZooKeeper instead.
- ``username`` / ``password``: the broker's own credentials, used by its connections to other brokers
  over this listener (``client_credentials``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from config.registry import BrokerConfig, ConfigError, Password

__all__ = ["PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE", "JaasConfigError", "JaasEntry", "client_credentials",
           "parse_jaas_config", "plain_users", "server_jaas_entries"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS_CONFIG = "sasl.jaas.config"
_USER_PREFIX = "user_"
_CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
# Characters of a bare word: StreamTokenizer's letters plus the ones Kafka's JaasConfig adds ('-', '_',
# '$'), and digits and '.', which continue a word (class names are dotted).
_WORD_EXTRA = frozenset("-_$.")


class JaasConfigError(ValueError):
    """A malformed ``sasl.jaas.config`` (the text is Kafka's, without the secret value)."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    control_flag: str  # REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL
    options: Mapping[str, str] = field(default_factory=dict)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c in _WORD_EXTRA or ord(c) >= 128


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) tokens: "word", "quoted", or the character itself for '=' and ';' and others."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c in "\"'":
            value, i = _quoted(text, i)
            out.append(("quoted", value))
        elif _is_word_char(c):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            out.append(("word", text[start:i]))
        else:
            out.append((c, c))
            i += 1
    return out


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


def _quoted(text: str, i: int) -> tuple[str, int]:
    """A quoted string from ``text[i]`` (the quote) with StreamTokenizer's escapes; ends at the closing
    quote or the end of the line, as StreamTokenizer's do."""
    quote, i = text[i], i + 1
    chars: list[str] = []
    while i < len(text) and text[i] != quote and text[i] != "\n":
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            i += 1
            c = text[i]
            if c in "01234567":
                digits = c
                while len(digits) < 3 and i + 1 < len(text) and text[i + 1] in "01234567":
                    i += 1
                    digits += text[i]
                c = chr(int(digits, 8))
            else:
                c = _ESCAPES.get(c, c)
        chars.append(c)
        i += 1
    if i < len(text) and text[i] == quote:
        i += 1
    return "".join(chars), i


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Parse a ``sasl.jaas.config`` value; JaasConfigError with Kafka's messages when malformed."""
    toks = _tokens(text)
    entries: list[JaasEntry] = []
    pos = 0

    def value_of(k: int) -> str | None:
        return toks[k][1] if k < len(toks) and toks[k][0] in ("word", "quoted") else None

    while pos < len(toks):
        module = value_of(pos)
        if module is None:
            raise JaasConfigError(f"Unexpected '{toks[pos][1]}' where a login module class is expected in JAAS config")
        pos += 1
        if pos >= len(toks):
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        flag = value_of(pos)
        if flag is None:
            raise JaasConfigError("Login module control flag is not available in the JAAS config")
        if flag.upper() not in _CONTROL_FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        pos += 1
        options: dict[str, str] = {}
        while pos < len(toks) and toks[pos][0] != ";":
            key = toks[pos][1]
            value = value_of(pos + 2)
            if pos + 1 >= len(toks) or toks[pos + 1][0] != "=" or value is None:
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value
            pos += 3
        if pos >= len(toks):
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        pos += 1  # the ';'
        entries.append(JaasEntry(module, flag.upper(), options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def _config_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.{JAAS_CONFIG}"


def server_jaas_entries(config: BrokerConfig, listener: str, mechanism: str) -> list[JaasEntry]:
    """The JAAS entries for ``mechanism`` on ``listener``; ConfigError when none is configured or the
    value does not parse (the message names the key to set, never the value: it holds passwords)."""
    raw = config.listener_get(listener, JAAS_CONFIG, mechanism)
    key = _config_key(listener, mechanism)
    if raw is None:
        raise ConfigError(key, None, f"no JAAS configuration for SASL mechanism {mechanism} on listener "
                          f"{listener}: set {key} (or {JAAS_CONFIG})")
    text = raw.value if isinstance(raw, Password) else str(raw)
    try:
        return parse_jaas_config(text)
    except JaasConfigError as e:
        raise ConfigError(key, "[hidden]", str(e)) from None


def plain_users(entries: list[JaasEntry]) -> dict[str, str]:
    """``user_<name>="<password>"`` options of the PlainLoginModule entries: name -> password."""
    users: dict[str, str] = {}
    for entry in entries:
        if entry.login_module != PLAIN_LOGIN_MODULE:
            continue
        for key, value in entry.options.items():
            if key.startswith(_USER_PREFIX):
                users.setdefault(key[len(_USER_PREFIX):], value)
    return users


def client_credentials(config: BrokerConfig, listener: str, mechanism: str) -> tuple[str, str]:
    """The broker's own (username, password) for connections it opens over ``listener`` with
    ``mechanism`` (inter-broker and controller connections), from the JAAS ``username``/``password``."""
    for entry in server_jaas_entries(config, listener, mechanism):
        username, password = entry.options.get("username"), entry.options.get("password")
        if username is not None and password is not None:
            return username, password
    key = _config_key(listener, mechanism)
    raise ConfigError(key, "[hidden]", f"the JAAS configuration for SASL mechanism {mechanism} on listener "
                      f"{listener} has no username and password for the broker's own connections")
