"""Kafka principals: who a connection is, as the authorizer and quotas see it.

Kafka's DefaultKafkaPrincipalBuilder gives every connection a principal of type ``User``: the SASL
authorization id on SASL listeners, the certificate's distinguished name (through
``ssl.principal.mapping.rules``) on SSL listeners with a client certificate, and ``User:ANONYMOUS``
otherwise (PLAINTEXT, or SSL without a client certificate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # Kafka's KafkaPrincipal carries this flag too: a delegation token authenticated the session (such
    # a session may not create or renew tokens). As in Kafka, equality and hashing ignore it.
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice") (Kafka's SecurityUtils.parseKafkaPrincipal)."""
        if ":" not in text:
            raise ValueError(f"Expected a string in format principalType:principalName but got {text}")
        principal_type, name = text.split(":", 1)
        if not principal_type or not name:
            raise ValueError(f"Expected a string in format principalType:principalName but got {text}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
