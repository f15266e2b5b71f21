"""Reference tables generated from esmem's own definitions, run by cog:

    cog -r -I docs/reference docs/reference/configuration.md docs/reference/templates.md

The defaults come from the dataclasses (RecallParams, DecayPolicy, MergePolicy, Fusion) and the template
parameters from the template sources, so the pages cannot drift from the code; tests/test_docs.py runs
`cog --check` on them. A knob without a description here fails the generation.
"""
from __future__ import annotations

import re
from dataclasses import MISSING, fields
from typing import Any

import cog

from esmem.domain.embedding import MODELS
from esmem.domain.hybrid import Fusion
from esmem.domain.installation import search_variables
from esmem.domain.merge import MergePolicy
from esmem.domain.policy import DecayPolicy
from esmem.domain.ranking import CLIENT_KNOBS, TEMPLATE_KNOBS, RecallParams
from esmem.index.install import SEMANTIC_ONLY
from esmem.index.templates import assets_root, render
from esmem.values import KINDS, format_duration

RECALL = {
    "mode": "fusion of relevance, recency and importance: `blend`, `multiply` or `weighted`",
    "half_life": "half-life of the kinds without their own (`none`: they never decay)",
    "kind_half_lives": "half-life per kind (`hl.<kind>=7d` with `--set`; `kind_half_lives=none` drops them all)",
    "c": "multiply: importance coefficient",
    "w": "blend: recency weight",
    "k": "saturation constant of sat(rel) = rel / (rel + k)",
    "alpha": "weighted: relevance weight",
    "beta": "weighted: recency weight",
    "gamma": "weighted: importance weight",
    "must_not_miss": "evergreen or important memories enter the candidates without a lexical match",
    "pinned": "at most this many pinned memories that apply, in their own section",
    "resolve": "put the older of two same-topic candidates under the newer",
    "resolve_overlap": "Jaccard of the matched query terms from which two candidates are one topic",
    "resolve_factor": "the older's score becomes at most this share of the newer's",
    "resolve_ratio": "rules and events: the newer reads as an update from this share of the older's relevance",
    "pinned_min_share": "a pinned memory keeps a ranked slot from this share of the top relevance",
    "importance_floor": "importance from which a memory is pinned (and must-not-miss)",
    "must_not_miss_boost": "a must-not-miss memory's relevance is boost × importance / 10",
    "entity_boost": "weight of a match on the memory's entities",
    "neighbour_boost": "weight of a match on a conversation turn's neighbour text",
    "question_penalty": "a memory that asks keeps rel × (1 − question_penalty × the share of its text in questions)",
    "period_boost": "rel × period_boost for a memory from a month or year the query names (1: off)",
    "when_boost": "rel × when_boost for a memory that tells a time when the query asks when (1: off)",
    "compound_boost": "weight of a compound matched as one word or two (`smartwatch` / `smart watch`, `e-mail`)",
    "neighbour_prev": "share of a candidate's relevance the turn before it inherits",
    "neighbour_next": "share of a candidate's relevance the turn after it (the reply) inherits; the turn after that, its square",
    "min_importance": "memories below this importance are never returned",
    "window": "candidates the engine returns for MMR and the client-side stages",
    "rescore_window": "the fusion reranks this many of the relevance top hits (0: every match)",
    "mmr": "diversify the top-k with Maximal Marginal Relevance",
    "mmr_lambda": "MMR: weight of the score against the similarity to what is already picked",
    "mmr_threshold": "MMR: a similarity below this is no redundancy (memories that only share a topic keep their order)",
    "mmr_similarity": "MMR similarity: `tokens` (Jaccard over the index tokens), `words` (words and CJK bigrams), `cosine`",
    "recent_n": "newest memories returned beside the top-k (de-duplicated against it)",
    "rho": "reheat: share of the gap to now an access removes from the recency anchor",
    "kinds": "only memories of these kinds (`a|b` with `--set`)",
    "include_superseded": "also superseded memories",
}
POLICY = {
    "half_lives": "table of kind = duration (`7d`, `12h`, `none`); kinds it does not name keep the defaults",
    "default_half_life": "half-life of the kinds without their own",
    "evergreen_kinds": "kinds that never decay and are pinned",
    "rho": "reheat share (as the recall key)",
    "recall": "table of any recall key above",
    "retention": "table: `retired`, `retired_by_kind`, `ttl` — what `esmem retention` erases (nothing unless set)",
}
MERGE = {
    "enabled": "supersede-merge on write (`--no-merge` turns it off)",
    "min_overlap": "topic overlap a replacement without a change cue needs (half of it with one)",
    "dup_overlap": "Jaccard from which the new memory restates the old",
    "candidates": "active memories the write-time look-up reads",
    "events": "kinds of happenings: replaced only by a reschedule, cancellation or correction",
    "never_supersede": "kinds that are only ever de-duplicated",
    "same_meaning": "with an embedder: cosine from which a text with a change cue is on its candidate's topic",
}
FUSION = {
    "method": "`convex` ((1 − w)·minmax(BM25 leg) + w·minmax(kNN leg)) or `rrf`",
    "weight": "the kNN leg's share (`knn_weight` with `--set`); 0 sends no kNN search",
    "rrf_k": "RRF constant",
    "keep_top": "the BM25 leg's best hit stays first; the model's default where it says otherwise: false with "
                + ", ".join(f"`{key}`" for key, model in MODELS.items() if not model.keep_top),
    "knn_window": "the kNN leg's candidates",
}


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return ", ".join(map(str, value)) or "—"
    if isinstance(value, dict) or hasattr(value, "items"):
        return ", ".join(f"{k} {format_duration(v)}" for k, v in value.items()) or "—"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _table(cls: type, described: dict[str, str], where: dict[str, str] | None = None) -> None:
    instance = cls()
    missing = [f.name for f in fields(cls) if f.name not in described]
    if missing:
        raise SystemExit(f"docs/reference/gen.py: describe {cls.__name__}.{', '.join(missing)}")
    cog.outl("| key | default | meaning |" + (" where |" if where else ""))
    cog.outl("|---|---|---|" + ("---|" if where else ""))
    for f in fields(cls):
        value = getattr(instance, f.name) if f.default is not MISSING or f.default_factory is not MISSING else None
        row = f"| `{f.name}` | {_value(value)} | {described[f.name]} |"
        cog.outl(row + (f" {where[f.name]} |" if where else ""))


def recall_keys() -> None:
    where = {name: "template" if name in TEMPLATE_KNOBS or name in ("half_life", "kind_half_lives", "kinds")
             else "template (`size`)" if name == "window" else "client" for name in RECALL}
    unplaced = set(RECALL) - set(TEMPLATE_KNOBS) - set(CLIENT_KNOBS) - {"half_life", "kind_half_lives", "kinds", "window"}
    if unplaced:
        raise SystemExit(f"docs/reference/gen.py: is {', '.join(sorted(unplaced))} a template or a client knob?")
    _table(RecallParams, RECALL, where)


def policy_keys() -> None:
    _table(DecayPolicy, POLICY)


def merge_keys() -> None:
    _table(MergePolicy, MERGE)


def fusion_keys() -> None:
    _table(Fusion, FUSION)


TO_JSON = re.compile(r"\{\{#toJson\}\}\s*(\w+)")  # a parameter written as JSON
MUSTACHE_NAME = re.compile(r"\{\{[#^/]?\s*([A-Za-z_][\w.]*)\s*\}\}")


def template_parameters() -> None:
    variables = {**search_variables("esmem"), "bm25_boost": 1.0, "family": "opensearch", "leg": "bm25",
                 "vectors": True, "derived_vectors": True}
    cog.outl("| template | parameters |")
    cog.outl("|---|---|")
    for path in sorted((assets_root() / "templates" / "search").glob("*.mustache.j2")):
        stem = path.name.removesuffix(".mustache.j2")
        source = render(f"templates/search/{path.name}", variables, shared=frozenset(variables))
        names = sorted(({n.split(".")[0] for n in MUSTACHE_NAME.findall(source)} | set(TO_JSON.findall(source)))
                       - {"toJson", "join", "url"})
        note = " (with an embedder)" if stem in SEMANTIC_ONLY else ""
        cog.outl(f"| `esmem-{stem}`{note} | {', '.join(f'`{n}`' for n in names)} |")


def kinds() -> None:
    cog.outl(", ".join(f"`{k}`" for k in KINDS))
