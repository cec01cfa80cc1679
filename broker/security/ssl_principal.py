"""Kafka's SslPrincipalMapper: ``ssl.principal.mapping.rules`` turns a client certificate's distinguished
name into the principal name of an SSL connection.

Rules are a comma-separated list, tried in order; the first that applies gives the name:

- ``DEFAULT``: the DN as it is (RFC 2253 form, e.g. ``CN=alice,OU=eng,O=kafkette``);
- ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` to lower- or upper-case the result):
  applies when ``pattern`` (a regular expression) matches the whole DN; the result is the DN with
  every match of ``pattern`` replaced by ``replacement``, where ``$1`` ... refer to groups.
  ``\\/`` and ``\\,`` escape the separators.

No rule applying is an error (Kafka's NoMatchingRule): the client cannot connect. Patterns are Java
regular expressions; Python's ``re`` reads the common subset (groups, classes, quantifiers, anchors)
the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NoMatchingRule", "SslPrincipalMapper"]

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules applies to a certificate's DN."""


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        assert self.pattern is not None
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        replacement = _escape_literal_back_references(self.replacement, self.pattern.groups)
        result = self.pattern.sub(lambda match: _java_replacement(replacement, match), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.default:
            return "DEFAULT"
        text = f"RULE:{self.pattern.pattern if self.pattern else ''}/{self.replacement}"
        return text + ("/L" if self.lower else "/U" if self.upper else "")


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """A ``$n`` naming a group the pattern lacks is literal text, as in Kafka (which took this from
    Apache NiFi): ``$123`` with 12 groups is ``$12`` then ``3``; with no such group at all, ``$1``."""
    if groups == 0:
        return replacement
    value = replacement
    for m in list(_BACK_REFERENCE.finditer(replacement)):
        number = m.group(1)
        if number.startswith("0"):
            continue
        index = int(number)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            # Kafka escapes the '$' in the running string at the original position; the positions
            # shift by the escapes already added, which we replicate by searching the running string.
            pos = value.find("$" + number)
            if pos >= 0:
                value = value[:pos] + "\\" + value[pos:]
    return value


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    """Expand a java.util.regex replacement string: ``\\x`` is a literal x, ``$n`` a group (the longest
    group number that exists), ``${name}`` a named group."""
    out: list[str] = []
    i, n = 0, len(replacement)
    groups = match.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i >= n:
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                out.append(match.group(replacement[i + 1:end]) or "")
                i = end + 1
                continue
            if not replacement[i].isdigit():
                raise ValueError("Illegal group reference")
            number = int(replacement[i])
            i += 1
            while i < n and replacement[i].isdigit() and number * 10 + int(replacement[i]) <= groups:
                number = number * 10 + int(replacement[i])
                i += 1
            if number > groups:
                raise IndexError(f"No group {number}")
            out.append(match.group(number) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Parsed ``ssl.principal.mapping.rules``; ``get_name(dn)`` maps a DN. Invalid rules raise
    ValueError with Kafka's message."""

    def __init__(self, rules: str | None) -> None:
        self.rules = [r for r in (self._parse(text) for text in self._split("DEFAULT" if rules is None else rules)) if r is not None]

    @staticmethod
    def _split(rules: str) -> list[str]:
        out: list[str] = []
        text = rules.strip()
        pos = 0
        while pos <= len(text):
            m = _SPLITTER.search(text, pos)
            if m is None:
                break
            out.append(m.group(1))
            # Java's Matcher.find continues after an empty match one character further.
            pos = m.end() if m.end() > m.start() else m.end() + 1
        return out

    @staticmethod
    def _parse(rule: str) -> _Rule | None:
        m = _PARSER.match(rule)
        if m is None:
            raise ValueError(f"Invalid rule: {rule}")
        if m.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`")
        if m.group(1) is not None:
            return _Rule(default=True)
        if m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"Invalid rule: {rule}: {e}") from None
            return _Rule(False, pattern, m.group(4), m.group(6) == "L", m.group(6) == "U")
        return None  # empty rules are ignored

    def get_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"
