"""The kNN leg of recall and its fusion with the BM25 leg (optional: only with an embedder).

Both legs rank inside the engine with the same filters (namespace, status / as_of, kinds,
min_importance) and the same decay + importance fusion (the stored `recall` and `recall_knn`
templates are one source, templates/search/recall.mustache.j2); they go out in one `_msearch`.
Their two ranked lists are fused here, before MMR:

    convex (default): score = (1 - weight) * minmax(bm25 leg) + weight * minmax(kNN leg)
                      minmax per query over that leg's window; a memory missing from a leg gets 0 there;
                      a BM25 leg with fewer hits than asked holds every match, and its minmax starts
                      at 0 (a memory it did not match), so its last hit keeps a share: with it on the
                      diversity set's small namespaces hybrid R@3 went from 35 % to 95 % (e5-small-q)
                      and LoCoMo did not move (docs/results/hybrid.md)
    rrf:              score = 1 / (rrf_k + rank_bm25) + 1 / (rrf_k + rank_knn)

weight 0 is lexical esmem (no kNN search is sent). keep_top (on unless the model says otherwise,
`default_fusion`): the BM25 leg's best hit stays first and the fusion re-ranks below it - with MiniLM
the kNN leg alone is right at rank 1 about half as often as BM25 on LoCoMo (P@1 0.20 vs 0.37), so it
adds recall, not a new top-1; with e5-small-v2 the fused first hit is the better one (P@1 42.2 -> 45.1),
so its model turns keep_top off (esmem/domain/embedding.py MODELS). The kNN leg brings
knn_window (40) candidates. Chosen on LoCoMo (docs/results/hybrid.md), by one rule: the setting
that keeps lexical P@1 and gains most R@5 + R@10, checked on other conversations; the weight is 0.15
since the lexical leg learned to put answers first (0.3 before: with it MiniLM now lost R@5 against
lexical recall, and e5 gained 1.8 points where 0.15 gains 2.5); dividing each leg by its top score
instead of min-max lost 4 points of R@5. MMR compares index tokens as in lexical recall
(mmr_similarity=cosine for the stored vectors). RRF is an option, not the default: it lost P@1 and
recall against convex fusion in a side-by-side LoCoMo measurement.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from esmem.domain.embedding import Embedder, embed_checked, model_of, quantize
from esmem.errors import ConfigError, InvalidInput
from esmem.index.catalog import Catalog, Search
from esmem.index.engine import Engine
from esmem.index.install import KNN_TEMPLATE, installed_embedding
from esmem.values import parse_bool

FUSION_METHODS = ("convex", "rrf")
QUERY_CACHE = 256  # query vectors a store keeps: an agent repeats queries, eval runs each one per config


@dataclass(frozen=True)
class Fusion:
    """How the two legs are combined."""

    method: str = "convex"
    weight: float = 0.15  # the kNN leg's share (convex); 0 = lexical only, 1 = kNN only
    rrf_k: int = 60
    keep_top: bool = True  # the lexical leg's best hit stays first: the fusion re-ranks below it
    knn_window: int = 40   # the kNN leg's candidates (at least the recall's window)

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ConfigError(f"unknown fusion {self.method!r} (choose from {', '.join(FUSION_METHODS)})")
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not 0 <= self.weight <= 1:
            raise ConfigError(f"knn_weight must be a number in 0..1, got {self.weight!r}")
        if isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int) or not 1 <= self.rrf_k <= 10000:
            raise ConfigError(f"rrf_k must be an integer in 1..10000, got {self.rrf_k!r}")
        if isinstance(self.knn_window, bool) or not isinstance(self.knn_window, int) or not 1 <= self.knn_window <= 1000:
            raise ConfigError(f"knn_window must be an integer in 1..1000, got {self.knn_window!r}")
        if not isinstance(self.keep_top, bool):
            raise ConfigError(f"keep_top must be true or false, got {self.keep_top!r}")

    @property
    def lexical_only(self) -> bool:
        return self.method == "convex" and self.weight == 0


LEXICAL = Fusion(weight=0.0)
FUSION_KEYS = {"fusion": "method", "knn_weight": "weight", "rrf_k": "rrf_k", "keep_top": "keep_top",
               "knn_window": "knn_window"}


def fusion_from_strings(base: Fusion, pairs: Mapping[str, str]) -> Fusion:
    """`fusion=rrf`, `knn_weight=0.15`, `rrf_k=60`, `keep_top=false` (CLI --set / eval sweeps)."""
    changes: dict[str, Any] = {"method": base.method, "weight": base.weight, "rrf_k": base.rrf_k,
                               "keep_top": base.keep_top, "knn_window": base.knn_window}
    for key, raw in pairs.items():
        field_ = FUSION_KEYS[key]
        if field_ == "keep_top":
            changes[field_] = parse_bool(raw, key)
            continue
        try:
            changes[field_] = raw if field_ == "method" else (int(raw) if field_ in ("rrf_k", "knn_window")
                                                              else float(raw))
        except ValueError:
            raise ConfigError(f"{key} takes a number, got {raw!r}") from None
    return Fusion(**changes)


def default_fusion(embedder: Embedder) -> Fusion:
    """The fusion a store with `embedder` uses when the caller names none: the defaults, with the
    model's `keep_top` when it is one of esmem's models."""
    model = model_of(embedder)
    return Fusion(keep_top=model.keep_top) if model else Fusion()


def spec(embedder: Embedder) -> dict[str, Any]:
    """What the index records about an embedder (mapping _meta): its name and vector size."""
    return {"name": str(embedder.name), "dimensions": int(embedder.dimensions)}


def minmax(scores: Sequence[float], floor: float | None = None) -> list[float]:
    """Scores scaled to [0, 1] within one list, from its lowest score or from `floor` when that is
    lower; all equal (and no lower floor) -> 1 each (the leg cannot tell them apart)."""
    if not scores:
        return []
    lo, hi = min(scores) if floor is None else min(floor, *scores), max(scores)
    return [1.0] * len(scores) if hi - lo <= 1e-12 else [(s - lo) / (hi - lo) for s in scores]


def fuse(bm25: Sequence[Mapping[str, Any]], knn: Sequence[Mapping[str, Any]], fusion: Fusion,
         exhausted: bool = False) -> list[dict[str, Any]]:
    """The two legs' hits as one list, best first: each hit keeps its source, gets the fused `_score`,
    and `_legs` = {leg: {"score", "rank"}} for explain (the engine's score: decay and importance in it).
    `exhausted`: the BM25 leg brought every memory it matched (fewer than asked), so its scale starts
    at 0, the score of a memory it did not match, not at its last hit - which would otherwise weigh no
    more than a memory the words never matched.
    `keep_top`: the BM25 leg's first hit stays first, its score raised to the best fused one (MMR picks
    the first of equals first)."""
    merged: dict[str, dict[str, Any]] = {}
    legs = (("bm25", bm25, 1 - fusion.weight), ("knn", knn, fusion.weight))
    for leg, hits, w in legs:
        norm = minmax([float(h["_score"]) for h in hits], floor=0.0 if leg == "bm25" and exhausted else None)
        for rank, (h, n) in enumerate(zip(hits, norm), start=1):
            entry = merged.setdefault(h["_id"], {**h, "_score": 0.0, "_legs": {}})
            if leg == "bm25" or "_engine_score" not in entry:
                entry["_engine_score"] = float(h["_score"])
            entry["_legs"][leg] = {"score": float(h["_score"]), "rank": rank}
            entry["_score"] += 1.0 / (fusion.rrf_k + rank) if fusion.method == "rrf" else w * n
    out = sorted(merged.values(), key=lambda e: (-e["_score"], min(x["rank"] for x in e["_legs"].values()), e["_id"]))
    if fusion.keep_top and bm25 and out[0]["_id"] != bm25[0]["_id"]:
        top = next(e for e in out if e["_id"] == bm25[0]["_id"])
        out.remove(top)
        out.insert(0, {**top, "_score": out[0]["_score"]})
    return out


class Semantic:
    """An embedder bound to one installed prefix: embeds memories on write, adds the kNN leg to
    recall. On first use it checks the index was built for this embedder (no I/O when constructed)."""

    def __init__(self, catalog: Catalog, embedder: Embedder, fusion: Fusion | None = None):
        if not isinstance(embedder, Embedder):
            raise ConfigError(f"not an embedder (needs name, dimensions, embed): {type(embedder).__name__}")
        self.catalog, self.embedder = catalog, embedder
        self.fusion = fusion or default_fusion(embedder)
        self._checked = False
        self._queries: OrderedDict[str, list[int]] = OrderedDict()  # recent query vectors (LRU)

    def check(self) -> None:
        """ConfigError unless the live index holds this embedder's vectors."""
        if self._checked:
            return
        prefix = self.catalog.names.prefix
        installed = installed_embedding(self.catalog.engine, prefix)
        if installed != spec(self.embedder):
            have = f"{installed['name']} ({installed['dimensions']} dimensions)" if installed else "no vectors"
            raise ConfigError(f"the index under prefix {prefix!r} has {have}, not {self.embedder.name} "
                              f"({self.embedder.dimensions}): run `esmem install --embedder ... --migrate`")
        self._checked = True

    def fill(self, docs: Sequence[dict[str, Any]]) -> None:
        """Embed every document that brings no vector; a given vector must have the index's size.
        Every vector is stored quantized (`quantize`)."""
        self.check()
        for d in docs:
            if "embedding" in d and len(d["embedding"]) != self.embedder.dimensions:
                raise InvalidInput(f"embedding has {len(d['embedding'])} numbers; this index holds "
                                   f"{self.embedder.dimensions} ({self.embedder.name})")
        todo = [d for d in docs if "embedding" not in d]
        for d, v in zip(todo, embed_checked(self.embedder, [d["content"] for d in todo])):
            d["embedding"] = v
        for d in docs:
            d["embedding"] = quantize(d["embedding"])

    def search(self, params: Mapping[str, Any], query: str, routing: str, fusion: Fusion | None = None) -> Search:
        """The kNN leg: the stored recall_knn template with the query's vector, over the fusion's
        knn_window nearest (at least the recall's window)."""
        self.check()
        vector = self._queries.pop(query, None) or quantize(embed_checked(self.embedder, [query], query=True)[0])
        self._queries[query] = vector
        if len(self._queries) > QUERY_CACHE:
            self._queries.popitem(last=False)
        size = max(int(params["size"]), (fusion or self.fusion).knn_window)
        return Search(KNN_TEMPLATE, {**params, "vector": vector, "size": size}, routing=routing)


def reembed(engine: Engine, prefix: str, embedder: Embedder, *, every: bool = False, batch_size: int = 64,
            progress: Callable[[int, int], None] | None = None) -> int:
    """Give every memory (every=False: every memory without one) a vector from `embedder`; returns
    how many were written. After `install --embedder ... --migrate` (which drops vectors of another
    model). Idempotent: a rerun finds nothing left to do. Pages come from a scroll (a snapshot: our
    own writes do not move it)."""
    catalog = Catalog(engine, prefix)
    Semantic(catalog, embedder).check()  # the index must be built for this embedder

    def vectors(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"embedding": quantize(v)} for v in embed_checked(embedder, [h["_source"]["content"] for h in hits])]
    return catalog.update_each(Search("unembedded", {"size": batch_size, "every": every}), batch_size, vectors, progress)


def embedder_for(engine: Engine, prefix: str) -> Embedder | None:
    """The embedder the installed index was built for, loaded (None: a lexical index). The CLI uses
    it, so every write through it carries a vector. ESMEM_EMBEDDER=NAME:<dir or jar> loads the
    model's files from elsewhere."""
    import os

    from esmem.domain.embedding import load_embedder, model_named

    installed = installed_embedding(engine, prefix)
    if installed is None:
        return None
    given = os.environ.get("ESMEM_EMBEDDER") or model_named(installed["name"])
    if given is None:
        raise ConfigError(f"the index under prefix {prefix!r} holds vectors of {installed['name']}, which esmem "
                          "cannot load by name: use the library with your own embedder")
    return load_embedder(given)
