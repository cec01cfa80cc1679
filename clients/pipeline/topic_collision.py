r"""A streaming job must never read its own output: refuse input topics or patterns that name an output topic.

A job whose ``subscribePattern`` also matches the topic it writes reads its own results back as input
(they are not page views, so they are dropped, but every run re-reads them and a pattern such as
``page-views.*`` quietly turns ``page-views-per-minute`` into an input).

What "matches" means differs. Kafka's consumer (``subscribe(Pattern)``) wants the whole topic name to
match. Spark's Kafka source, which lists topics with the Admin client (Spark 4.1's default,
``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=false``), takes every topic in which the pattern
is *found* (Scala's ``Regex.findFirstIn``): ``page-views(\..+)?`` picks up ``page-views-per-minute``.
So the check here is the looser one, ``re.search``, and patterns meant as whole names are anchored:
``^page-views(\..+)?$``. Topic patterns use the syntax Java's and Python's regexes share.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable

__all__ = ["TopicCollisionError", "check"]


class TopicCollisionError(ValueError):
    """The input subscription would read an output topic."""


def check(outputs: Iterable[str], *, topics: Iterable[str] = (), pattern: str | None = None) -> None:
    """Raise ``TopicCollisionError`` if ``topics`` or ``pattern`` (a subscribe pattern, found anywhere in a
    topic name as Spark's Kafka source finds it) covers any of ``outputs``."""
    outputs = [o for o in outputs if o]
    topics = list(topics)
    same = sorted(set(topics) & set(outputs))
    if same:
        raise TopicCollisionError(f"input topic {', '.join(same)} is also the output topic: the job would read "
                                  "its own results back as input")
    if pattern is None:
        return
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise TopicCollisionError(f"topic pattern {pattern!r} is not a regular expression: {e}") from None
    matched = [o for o in outputs if compiled.search(o)]
    if matched:
        better = suggest(pattern, matched)
        raise TopicCollisionError(
            f"topic pattern '{pattern}' matches the output topic {', '.join(matched)} (Spark's Kafka source takes "
            "every topic whose name contains a match): the job would read its own results back as input. "
            "Use a pattern that leaves the output out"
            + (f" (for example '{better}')" if better else "")
            + " or another output topic name")


def suggest(pattern: str, outputs: list[str]) -> str | None:
    """For the usual ``<base>.*``: an anchored pattern for ``<base>`` and ``<base>.<suffix>`` topics, if it
    leaves ``outputs`` out."""
    base = pattern.removeprefix("^").removesuffix("$").removesuffix(".*").removesuffix(".+")
    candidates = [f"^{base}(\\..+)?$"] if re.fullmatch(r"[A-Za-z0-9_-]+", base) else []
    # Or the pattern itself, anchored: a whole-name match, as Kafka's own consumer reads it.
    candidates.append(f"^(?:{pattern})$" if "|" in pattern else f"^{pattern.removeprefix('^').removesuffix('$')}$")
    for candidate in candidates:
        with contextlib.suppress(re.error):
            if not any(re.search(candidate, o) for o in outputs):
                return candidate
    return None
