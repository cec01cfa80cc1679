"""Generated reference pages match what generates them (docs/metrics.md: tests/ops/test_metrics.py)."""

from __future__ import annotations

from config import docs


def test_configs_doc_is_generated_from_the_registry() -> None:
    assert docs.DOC_PATH.read_text() == docs.render(), "docs/configs.md is stale: run python -m config.docs"


def test_configs_doc_lists_every_config() -> None:
    from config.registry import REGISTRY

    text = docs.render()
    for name in REGISTRY:
        assert f"| `{name}` |" in text, name
