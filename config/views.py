"""Typed views of the registry for one component (group coordinator, transaction coordinator, ...).

A view is a dataclass whose fields name the Kafka config they mirror (``config_field``); it has no
defaults of its own. ``ConfigView.from_config(source)`` fills every field from ``source`` — a
``BrokerConfig``, a mapping of Kafka names to strings or typed values, or None — falling back to the
registry's default, so a default lives in exactly one place. Keyword overrides (by field name) are
for tests and for values a caller computes.
"""

from __future__ import annotations

from dataclasses import MISSING, field, fields
from typing import Any, Self

from config.registry import REGISTRY, parse_value

__all__ = ["ConfigView", "config_field", "lookup"]


def config_field(name: str) -> Any:
    """A view field mirroring the Kafka config ``name`` (which must be in the registry)."""
    if name not in REGISTRY:
        raise KeyError(f"{name} is not a known config")
    return field(metadata={"config": name})


def lookup(source: Any, name: str) -> Any:
    """``name``'s typed value in ``source`` — anything with ``.get(name)``, a function of the name, or
    None — else the registry's default."""
    raw = None
    if source is not None:
        get = source.get if hasattr(source, "get") else source
        try:
            raw = get(name)
        except KeyError:
            raw = None
    if raw is None:
        return REGISTRY[name].default
    return parse_value(name, raw)


class ConfigView:
    """Base for views: subclasses are dataclasses whose config fields use ``config_field``."""

    @classmethod
    def from_config(cls, source: Any = None, **overrides: Any) -> Self:
        values: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            name = f.metadata.get("config")
            if f.name in overrides:
                values[f.name] = overrides.pop(f.name)
            elif name is not None:
                values[f.name] = lookup(source, name)
            elif f.default is MISSING and f.default_factory is MISSING:
                raise TypeError(f"{cls.__name__}.{f.name} has no config and no value")
        if overrides:
            raise TypeError(f"{cls.__name__} has no fields {sorted(overrides)}")
        return cls(**values)
