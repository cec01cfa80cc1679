"""Java ``.properties`` files: the one reader and writer (server.properties, client configs,
meta.properties).

Reading follows ``java.util.Properties.load``; ``format_properties`` renders what Kafka writes for
``meta.properties`` (storage writes it atomically).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

__all__ = ["format_properties", "parse_properties", "read_properties"]


_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(path: str | Path, encoding: str = "latin-1") -> dict[str, str]:
    """Read a Java .properties file. Latin-1 by default, as Kafka's loader reads it (non-Latin
    characters must be written as \\uXXXX escapes)."""
    return parse_properties(Path(path).read_text(encoding=encoding))


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` rules: ``#``/``!`` comments, ``key=value``, ``key: value`` or
    ``key value``, backslash line continuation, and ``\\t \\n \\r \\f \\uXXXX`` escapes (a backslash
    before any other character keeps that character). Later keys win. Values are not trimmed
    at the end; Kafka trims when it parses them."""
    result: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue  # comment lines never continue, even ending in a backslash
        while _continues(line):
            line = line[:-1]
            if index >= len(lines):
                break
            line += lines[index].lstrip(_WHITESPACE)
            index += 1
        key, value = _split_property(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes escapes the line end."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    escaped = False
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    for pos, char in enumerate(line):
        if not escaped and char in "=:":
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if not escaped and char in _WHITESPACE:
            key_end, value_start = pos, pos + 1
            break
        escaped = char == "\\" and not escaped
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        pos += 1
        if char != "\\":
            out.append(char)
            continue
        if pos >= len(text):
            break  # a lone trailing backslash is dropped
        char = text[pos]
        pos += 1
        if char == "u":
            digits = text[pos : pos + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"malformed \\uXXXX escape in properties text: {text!r}")
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


def format_properties(props: dict[str, str]) -> str:
    """``props`` as Kafka writes meta.properties: a date comment, then one ``key=value`` per line.
    (Keys and values here are plain identifiers and ids; nothing needs escaping.)"""
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    return "#\n#" + stamp + "\n" + "".join(f"{k}={v}\n" for k, v in props.items())
