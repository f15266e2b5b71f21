"""The semantic leg on the real engine with the real MiniLM: vectors in the index, the kNN leg's
filters and scores against the documented formula, fusion, one round trip, migration + re-embed."""
from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain import ranking
from esmem.domain.hybrid import LEXICAL, Fusion, fuse, fusion_from_strings, minmax, quantize, reembed, spec
from esmem.domain.installation import check, install
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError, InvalidInput
from esmem.index.engine import Engine
from esmem.index.install import KNN_TEMPLATE, derives_vectors, installed_embedding, uninstall
from esmem.values import epoch_ms, parse_time
from semantic_support import embedder, minilm

ROOT = Path(__file__).resolve().parents[1]
NOW = parse_time("2026-10-08T12:00:00Z")
PETS = [
    MemoryInput("The user adopted a kitten named Miso last spring.", "u", kind="fact", valid_from="2026-04-01T00:00:00Z"),
    MemoryInput("Deploys to production happen on Fridays after the standup.", "u", kind="rule", valid_from="2026-05-01T00:00:00Z"),
    MemoryInput("The quarterly report is due at the end of the month.", "u", kind="intent", valid_from="2026-10-01T00:00:00Z"),
    MemoryInput("Favourite pizza topping is mushrooms.", "u", kind="preference", valid_from="2026-02-01T00:00:00Z"),
    MemoryInput("The office wifi password changed last week.", "u", kind="note", valid_from="2026-09-30T00:00:00Z"),
]


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture
def semantic(engine: Engine, installed_semantic: str) -> MemoryStore:
    return MemoryStore(engine, installed_semantic, embedder=minilm(), merge=MergePolicy(enabled=False),
                       clock=lambda: NOW)


def test_install_maps_a_vector_field_sized_from_the_embedder(engine, semantic, prefix) -> None:
    assert installed_embedding(engine, prefix) == {"name": "all-MiniLM-L6-v2", "dimensions": 384}
    assert check(engine, prefix) == []  # the engine echoes exactly the rendered mapping
    live = engine.request("GET", f"/{semantic.alias}/_mapping")
    field = next(iter(live.values()))["mappings"]["properties"]["embedding"]
    assert field["type"] == "knn_vector" and field["dimension"] == 384 and field["data_type"] == "BYTE"
    assert field["method"]["engine"] == "lucene" and field["method"]["space_type"] == "cosinesimil"


def test_without_an_embedder_the_index_and_store_are_lexical(engine, installed) -> None:
    assert installed_embedding(engine, installed) is None
    store = MemoryStore(engine, installed, embedder=minilm())  # no I/O yet: refused on first use
    with pytest.raises(ConfigError, match="no vectors"):
        store.recall("anything", "u")
    with pytest.raises(ConfigError, match="no vectors"):
        store.remember("a memory", "u")


def test_writes_carry_the_models_vectors_and_a_wrong_size_is_refused(engine, semantic) -> None:
    res = semantic.remember_many(PETS)
    got = engine.request("GET", f"/{semantic.alias}/_doc/{res[0].id}", params={"routing": "u"})["_source"]
    vector = minilm().embed([PETS[0].content])[0]
    assert got["embedding"] == quantize(vector)  # bytes, scaled so the largest component is 127
    assert max(map(abs, got["embedding"])) == 127 and cos(got["embedding"], vector) > 0.999
    with pytest.raises(InvalidInput, match="384"):
        semantic.remember("given vector of the wrong size", "u", embedding=[1.0, 0.0])


@pytest.mark.parametrize("mode", ["blend", "multiply", "weighted"])
def test_knn_leg_scores_are_the_documented_formula_over_cosine(engine, semantic, mode) -> None:
    """The kNN leg applies the same decay and importance fusion as the BM25 leg, with the Lucene
    cosine score (1 + cos) / 2 as relevance."""
    semantic.remember_many(PETS)
    params = RecallParams(mode=mode, half_life=timedelta(days=30), kind_half_lives={}, mmr=False)
    query = "pet cat"
    qv = quantize(minilm().embed([query])[0])
    tp = {"namespace": "u", "query": query, "size": 10, "now": epoch_ms(NOW), "vector": qv, "with_vectors": True,
          **ranking.template_overrides(params)}
    resp = engine.request("POST", f"/{semantic.alias}/_search/template",
                          {"id": semantic.names.script(KNN_TEMPLATE), "params": tp}, {"routing": "u"})
    hits = resp["hits"]["hits"]
    assert len(hits) == len(PETS)
    for h in hits:
        rel = (1 + cos(qv, h["_source"]["embedding"])) / 2
        assert h["_score"] == pytest.approx(ranking.reference_score(rel, h["_source"], params, NOW), rel=1e-4)
    assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)


def test_knn_leg_applies_the_bm25_legs_filters(engine, semantic) -> None:
    semantic.remember_many(PETS + [MemoryInput("Another user's cat is called Tom.", "other", kind="fact",
                                               valid_from="2026-04-01T00:00:00Z")])
    hybrid_only = Fusion(weight=1.0)

    def contents(**kw):
        return {r.memory.content for r in semantic.recall("pet cat", kw.pop("ns", "u"), 10, fusion=hybrid_only,
                                                          touch=False, **kw).items}
    everything = contents(params=RecallParams(pinned=0))  # the wifi-password note is pinned: with the pinned
    # section on it would leave the ranking (test_a_pinned_memory_reaches_the_ranking_through_the_lexical_gate_only)
    assert len(everything) == len(PETS) and "Another user's cat is called Tom." not in everything
    assert contents(params=RecallParams(kinds=("rule",))) == {PETS[1].content}
    assert contents(as_of="2026-04-15T00:00:00Z") == {PETS[0].content, PETS[3].content}
    assert contents(params=RecallParams(min_importance=9.0, pinned=0)) == {PETS[4].content}  # "password": importance 9
    assert contents(ns="nobody") == set()


def test_one_round_trip_and_fusion_matches_the_reference(engine, semantic, prefix) -> None:
    semantic.remember_many(PETS)
    calls = []
    eng = Engine(engine.config, recorder=lambda m, p, b, q: calls.append((m, p, b)))
    store = MemoryStore(eng, prefix, embedder=minilm(), clock=lambda: NOW)
    params = RecallParams(mmr=False, pinned=0, resolve=False)  # the two legs alone (no client stages)
    fusion = Fusion(weight=0.4, keep_top=False)  # the formula alone (keep_top: test_rrf_and_fusion_edge_cases)
    res = store.recall("cat kitten pet", "u", 5, params=params, touch=False, fusion=fusion)
    searches = [c for c in calls if c[1].endswith("/_msearch/template")]
    assert len(searches) == 1
    lines = [json.loads(x) for x in searches[0][2].splitlines()]
    assert [x["id"] for x in lines if "id" in x] == [store.names.script("recall"), store.names.script(KNN_TEMPLATE)]
    # fusion: recompute from each leg's engine score, as documented in esmem/hybrid.py
    bm25 = {r.memory.id: r.legs["bm25"]["score"] for r in res.items if "bm25" in r.legs}
    knn = {r.memory.id: r.legs["knn"]["score"] for r in res.items if "knn" in r.legs}
    assert knn  # every memory is a kNN candidate
    assert len(bm25) < 5  # the words match fewer memories than asked: the BM25 leg's scale starts at 0
    nb = dict(zip(bm25, [s / max(bm25.values()) for s in bm25.values()]))
    nk = dict(zip(knn, minmax(list(knn.values()))))
    for r in res.items:
        assert r.score == pytest.approx(0.6 * nb.get(r.memory.id, 0) + 0.4 * nk.get(r.memory.id, 0))
    assert [r.score for r in res.items] == sorted((r.score for r in res.items), reverse=True)
    assert res.items[0].memory.content == PETS[0].content
    # weight 0: lexical esmem, no kNN search is sent
    calls.clear()
    lexical = store.recall("cat kitten pet", "u", 5, params=params, touch=False, fusion=LEXICAL)
    assert all(r.legs == {} for r in lexical.items)
    assert KNN_TEMPLATE.encode() not in next(c[2] for c in calls if c[1].endswith("/_msearch/template"))


def test_semantic_leg_finds_what_words_miss(semantic) -> None:
    semantic.remember_many(PETS)
    lexical = semantic.recall("pet cat", "u", 1, fusion=LEXICAL, touch=False, params=RecallParams(must_not_miss=False))
    hybrid = semantic.recall("pet cat", "u", 1, touch=False, params=RecallParams(must_not_miss=False))
    assert lexical.items == ()  # no shared word
    assert hybrid.items[0].memory.content == PETS[0].content


def test_rrf_and_fusion_edge_cases() -> None:
    a = [{"_id": "x", "_score": 2.0, "_source": {}}, {"_id": "y", "_score": 1.0, "_source": {}}]
    b = [{"_id": "y", "_score": 0.9, "_source": {}}, {"_id": "z", "_score": 0.1, "_source": {}}]
    rrf = fuse(a, b, Fusion(method="rrf", rrf_k=60, keep_top=False))
    assert [h["_id"] for h in rrf] == ["y", "x", "z"]
    assert rrf[0]["_score"] == pytest.approx(1 / 62 + 1 / 61)
    convex = fuse(a, b, Fusion(weight=0.5, keep_top=False))
    assert {h["_id"]: h["_score"] for h in convex} == pytest.approx({"x": 0.5, "y": 0.5, "z": 0.0})
    # keep_top (the default): the BM25 leg's first hit stays first, at the best fused score; the rest keep their order
    kept = fuse(a, b, Fusion(method="rrf", rrf_k=60))
    assert [h["_id"] for h in kept] == ["x", "y", "z"] and kept[0]["_score"] == pytest.approx(1 / 62 + 1 / 61)
    c = [{"_id": "z", "_score": 5.0, "_source": {}}, {"_id": "x", "_score": 0.1, "_source": {}}]
    assert [h["_id"] for h in fuse(a, c, Fusion(weight=0.9))] == ["x", "z", "y"]  # z leads the fused list, x the BM25 leg
    assert [h["_id"] for h in fuse([], c, Fusion(weight=0.9))] == ["z", "x"]  # no BM25 leg: nothing to keep
    assert fusion_from_strings(Fusion(), {"keep_top": "false"}) == Fusion(keep_top=False)
    assert minmax([3.0]) == [1.0] and minmax([]) == []
    # a BM25 leg that brought every match: its scale starts at 0, so its last hit is not worth an unmatched memory
    whole = fuse(a, b, Fusion(weight=0.5, keep_top=False), exhausted=True)
    assert {h["_id"]: h["_score"] for h in whole} == pytest.approx({"x": 0.5, "y": 0.75, "z": 0.0})
    assert minmax([2.0, 1.0], floor=0.0) == [1.0, 0.5] and minmax([3.0], floor=0.0) == [1.0]
    for bad in ({"weight": 1.5}, {"method": "max"}, {"rrf_k": 0}, {"keep_top": "yes"}):
        with pytest.raises(ConfigError):
            Fusion(**bad)


@pytest.mark.fresh_prefix("migrates the index to an embedder (mapping and templates change)")
def test_migrate_to_an_embedder_then_reembed(engine, installed) -> None:
    lexical = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    lexical.remember_many(PETS[:3] + [MemoryInput("a memory with an old 3-d vector", "u", embedding=[1.0, 0.0, 0.0])])
    report = install(engine, installed, migrate=True, embedding=spec(minilm()))
    assert any("vectors dropped" in n for n in report.notes)
    alias = lexical.alias
    missing = {"query": {"bool": {"must_not": [{"exists": {"field": "embedding"}}]}}}
    assert engine.request("POST", f"/{alias}/_count", missing)["count"] == 4
    assert reembed(engine, installed, minilm()) == 4
    assert engine.request("POST", f"/{alias}/_count", missing)["count"] == 0
    assert reembed(engine, installed, minilm()) == 0  # idempotent
    store = MemoryStore(engine, installed, embedder=minilm(), clock=lambda: NOW)
    assert store.recall("pet cat", "u", 1, touch=False, params=RecallParams(must_not_miss=False)).items[0].memory.content \
        == PETS[0].content


def test_quantize_keeps_the_cosine_and_refuses_a_zero_vector() -> None:
    v = [0.3, -0.05, 0.0004, -0.9]
    assert quantize(v) == [42, -7, 0, -127]
    assert quantize([2 * x for x in v]) == quantize(v) == quantize(quantize(v))  # scale-free, idempotent
    for bad in ([0.0, 0.0], [float("nan"), 1.0], [1.0, float("nan")], []):
        with pytest.raises(InvalidInput):
            quantize(bad)


@pytest.mark.fresh_prefix("builds an index of float vectors, then migrates it")
def test_migrate_from_float_vectors_keeps_them_as_bytes(engine, prefix) -> None:
    """An index whose vectors were stored as floats (before vectors became bytes) migrates with its
    vectors quantized in the reindex: no re-embedding, and the kNN leg finds the same memory."""
    from esmem.index.install import Names, index_body

    names = Names(prefix)
    install(engine, prefix, embedding=spec(minilm()))
    live = next(iter(engine.request("GET", f"/{names.alias}/_alias/{names.alias}")))
    engine.request("DELETE", f"/{live}")
    body = index_body(engine, prefix, embedding=spec(minilm()))["template"]
    del body["mappings"]["properties"]["embedding"]["data_type"]  # the float mapping of before
    old = f"{live}-floats"
    engine.request("PUT", f"/{old}", {**body, "aliases": {names.alias: {"is_write_index": True}}})
    vectors = minilm().embed([p.content for p in PETS])
    for i, (p, v) in enumerate(zip(PETS, vectors)):
        engine.request("PUT", f"/{old}/_doc/m{i}", {"namespace": "u", "content": p.content, "kind": p.kind,
                                                    "importance": 1.0, "status": "active",
                                                    "valid_from": p.valid_from, "embedding": v},
                       {"routing": "u", "refresh": "true"})
    report = install(engine, prefix, migrate=True)
    assert not any("vectors dropped" in n for n in report.notes)
    store = MemoryStore(engine, prefix, embedder=minilm(), clock=lambda: NOW)
    for i, v in enumerate(vectors):
        got = store.catalog.get("u", f"m{i}")["_source"]["embedding"]
        assert got == quantize(v)
    res = store.recall("pet cat", "u", 1, touch=False, fusion=Fusion(weight=1.0))
    assert res.items[0].memory.content == PETS[0].content


def test_cli_install_embedder_explain_shows_both_legs(engine, prefix) -> None:
    minilm()
    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", prefix]
    r = runner.invoke(cli, [*base, "install", "--embedder", "minilm"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, [*base, "remember", PETS[0].content, "-n", "u"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, [*base, "recall", "pet cat", "-n", "u", "--json", "--no-touch"])
    assert r.exit_code == 0, r.output
    item = json.loads(r.output)["items"][0]
    assert item["content"] == PETS[0].content and set(item["legs"]) >= {"knn"}
    r = runner.invoke(cli, [*base, "install", "--embedder", "word2vec"])
    assert r.exit_code == 2 and "unknown embedder" in r.output


def test_cli_index_of_the_chinese_model_recalls_a_paraphrase_sharing_no_word(engine, prefix) -> None:
    """The CLI reloads the model an index was installed with by its recorded name; the Chinese model's
    kNN leg finds a paraphrase that BM25 cannot (no word in common)."""
    embedder("bge-small-zh-q")
    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", prefix]
    r = runner.invoke(cli, [*base, "install", "--embedder", "bge-small-zh-q"])
    assert r.exit_code == 0, r.output
    assert installed_embedding(engine, prefix) == {"name": "bge-small-zh-v1.5-q", "dimensions": 512}
    for text in ("数据库连不上，检查了防火墙", "我喜欢喝咖啡", "周五下午开项目评审会"):
        r = runner.invoke(cli, [*base, "remember", text, "-n", "u"])
        assert r.exit_code == 0, r.output
    r = runner.invoke(cli, [*base, "recall", "无法连接到 MySQL", "-n", "u", "--json", "--no-touch"])
    assert r.exit_code == 0, r.output
    top = json.loads(r.output)["items"][0]
    assert top["content"] == "数据库连不上，检查了防火墙" and set(top["legs"]) == {"knn"}


def test_a_pinned_memory_reaches_the_ranking_through_the_lexical_gate_only(semantic: MemoryStore) -> None:
    """A pinned memory (importance >= floor) the kNN leg finds close to an unrelated query stays
    in the pinned section, as it does without an embedder; with pinned=0 the kNN leg may rank it."""
    allergy = semantic.remember("allergic to penicillin and every other antibiotic", "pin", kind="fact",
                                importance=10)
    semantic.remember_many([MemoryInput(t, "pin", kind="fact") for t in (
        "the clinic on Main Street opens at eight", "the pharmacy closes at nine on weekdays",
        "annual check-up is booked with Dr. Lee in March")])
    query = "which medicine did the doctor prescribe"
    res = semantic.recall(query, "pin", 3, now=NOW, touch=False)
    assert allergy.id not in [r.memory.id for r in res.items]
    assert allergy.id in [m.id for m in res.pinned]
    open_ = semantic.recall(query, "pin", 4, now=NOW, touch=False, params=RecallParams(pinned=0))
    assert allergy.id in [r.memory.id for r in open_.items]  # the kNN leg does find it: the gate is what holds it


def test_only_an_index_with_vectors_leaves_them_out_of_lookup_and_pinned_hits(engine, semantic, prefix) -> None:
    # a source filter costs the engine a parse per hit: rendered only where there is a vector to drop
    semantic.remember_many(PETS)
    install(engine, f"{prefix}lex")
    try:
        lexical = MemoryStore(engine, f"{prefix}lex", merge=MergePolicy(enabled=False), clock=lambda: NOW)
        lexical.remember_many(PETS)
        _lookup_and_pinned_hits(engine, [(semantic, True), (lexical, False)])
    finally:
        uninstall(engine, f"{prefix}lex")


def _lookup_and_pinned_hits(engine, stores) -> None:
    for store, vectors in stores:
        store.catalog.refresh()
        for template, params in (("lookup", {"namespace": "u", "query": "kitten Miso"}),
                                 ("pinned", {"namespace": "u", "query": "wifi password", "importance_floor": 1})):
            body = engine.request("POST", "/_render/template", {"id": f"{store.catalog.names.prefix}-{template}",
                                                                 "params": params})["template_output"]
            assert ("_source" in body) is vectors, template
            hits = engine.request("POST", f"/{store.alias}/_search/template",
                                  {"id": f"{store.catalog.names.prefix}-{template}", "params": params},
                                  params={"routing": "u"})["hits"]["hits"]
            assert hits and all(h["_source"]["content"] for h in hits), template
            assert not any("embedding" in h["_source"] for h in hits), template


def test_bench_hybrid_reports_embedding_wall_and_cpu_time(engine, prefix) -> None:
    from esmem.apps.bench_hybrid import run_hybrid, summary

    report = run_hybrid(engine, prefix, minilm(), size=60, namespaces=3, queries=4)
    e = report["embedding"]
    assert e["seconds"] > 0 and e["cpu_seconds"] > 0
    assert e["memories_per_second"] == pytest.approx(60 / e["seconds"])
    assert report["ingest"]["vectors"]["bytes_per_memory"] > report["ingest"]["lexical"]["bytes_per_memory"]
    rows = dict(summary(report))
    assert "CPU-s for 60" in rows["embedding, memories"] and "p50" in rows["embedding, one query"]
    assert "[" not in rows["(H) / (c): hybrid vs lexical recall"]  # one pass: no spread


def test_bench_hybrid_repeats_the_latency_comparison_and_gives_the_hybrid_ratios_spread(engine, prefix) -> None:
    from esmem.apps.bench_hybrid import run_hybrid, summary

    report = run_hybrid(engine, prefix, minilm(), size=60, namespaces=3, queries=4, repeat=3)
    lat, ratio = report["latency"], report["hybrid_vs_lexical"]
    assert all(row["passes"] == 3 and row["n"] == 12 for row in lat.values())
    for p in ("p50", "p95"):
        lo, hi = ratio[f"{p}_spread"]
        assert 0 < lo <= ratio[p] <= hi
    row = dict(summary(report))["(H) / (c): hybrid vs lexical recall"]
    low, high = ratio["p50_spread"]
    assert f"p50 x{ratio['p50']:.2f} [{low:.2f}-{high:.2f}]" in row



def test_recall_hits_carry_vectors_only_where_the_engine_stores_them_or_mmr_compares_them(engine, semantic, prefix) -> None:
    # stored in _source (OpenSearch 2): cutting a vector costs a parse per hit, the hits keep it; rebuilt on
    # read (derived source, OpenSearch 3): rebuilding costs more, the hits leave it out unless asked
    semantic.remember_many(PETS)
    semantic.catalog.refresh()
    derived = derives_vectors(engine)
    settings = engine.request("GET", f"/{semantic.alias}/_settings")
    assert (next(iter(settings.values()))["settings"]["index"].get("knn.derived_source", {}).get("enabled") == "true") is derived
    params = {"namespace": "u", "query": "kitten Miso", "now": str(epoch_ms(NOW)), "vector": quantize(minilm().embed(["kitten"])[0])}
    for template in ("recall", KNN_TEMPLATE):
        for with_vectors in (False, True):
            hits = engine.request("POST", f"/{semantic.alias}/_search/template",
                                  {"id": f"{prefix}-{template}", "params": {**params, **({"with_vectors": True} if with_vectors else {})}},
                                  params={"routing": "u"})["hits"]["hits"]
            assert hits and all(h["_source"]["content"] for h in hits), template
            assert all(("embedding" in h["_source"]) is (with_vectors or not derived) for h in hits), (template, with_vectors)
    # MMR by cosine reads the stored vectors wherever they are kept: two look-alikes share a vector, a third is apart
    one, other = [1.0] + [0.0] * 383, [0.0, 1.0] + [0.0] * 382
    semantic.remember_many([MemoryInput("espresso machine descaling every month", "vec", kind="note", embedding=one),
                            MemoryInput("espresso beans from the corner roaster", "vec", kind="note", embedding=one),
                            MemoryInput("espresso tastes sour when the grind is coarse", "vec", kind="note", embedding=other)])
    diverse = semantic.recall("espresso machine beans", "vec", 2, fusion=LEXICAL, touch=False,
                              params=RecallParams(mmr_lambda=0.5, mmr_similarity="cosine"))
    assert diverse.items[1].memory.content == "espresso tastes sour when the grind is coarse"
    words = semantic.recall("espresso machine beans", "vec", 2, fusion=LEXICAL, touch=False,
                            params=RecallParams(mmr_lambda=0.5))
    assert {r.memory.content for r in words.items} == {"espresso machine descaling every month",
                                                       "espresso beans from the corner roaster"}

def test_the_one_different_memory_keeps_its_place_among_look_alikes(engine, installed_semantic) -> None:
    # the diversity set's English clusters: three look-alikes and one different memory each, one namespace.
    # The words match a cluster; the kNN leg brings every memory of the namespace. The different memory is
    # the BM25 leg's last hit: it must still outweigh the other clusters' memories the words never matched,
    # so that MMR can put it before a second look-alike
    rows = [json.loads(line) for line in (ROOT / "datasets" / "diversity.jsonl").read_text().splitlines()]
    queries = [r for r in rows if r["type"] == "query" and r["namespace"] == "div-en"]
    semantic = MemoryStore(engine, installed_semantic, embedder=minilm(), merge=MergePolicy(enabled=False),
                           clock=lambda: parse_time(queries[0]["now"]))
    semantic.remember_many([MemoryInput(r["content"], "div", kind=r["kind"], valid_from=r["valid_from"])
                            for r in rows if r["type"] == "memory" and r["namespace"] == "div-en"])
    by_id = {r["id"]: r["content"] for r in rows if r["type"] == "memory"}
    for q in queries[:4]:
        got = semantic.recall(q["text"], "div", 3, touch=False)
        assert by_id[q["gold"][0]] in [r.memory.content for r in got.items], q["text"]


def test_each_model_says_whether_the_bm25_legs_best_hit_stays_first() -> None:
    from esmem.domain.embedding import CallableEmbedder
    from esmem.domain.hybrid import default_fusion

    assert default_fusion(embedder("e5-small-q")) == Fusion(keep_top=False)
    assert default_fusion(minilm()) == Fusion(keep_top=True) == Fusion()
    assert default_fusion(CallableEmbedder(lambda texts: [[1.0, 0.0] for _ in texts], "mine", 2)) == Fusion()


@pytest.mark.fresh_prefix("installs an index for the e5 model")
def test_with_e5_the_turn_that_answers_leads_the_turn_that_echoes_the_question(engine, prefix) -> None:
    """A turn that asks back shares the question's words and, under a mild question penalty (0.3; the
    default 0.6 already puts one of these answers first), wins the BM25 leg; e5's kNN leg puts the answer
    ahead, and without keep_top (e5's default) the fused first hit leads: here at a kNN weight of 0.3 (at
    the default 0.15 the leg tips closer calls than these two-memory namespaces)."""
    e5 = embedder("e5-small-q")
    install(engine, prefix, embedding=spec(e5))
    store = MemoryStore(engine, prefix, embedder=e5, merge=MergePolicy(enabled=False), clock=lambda: NOW,
                        params=RecallParams(question_penalty=0.3))
    cases = [("What breed is Sam's new dog?", "Nice! What breed is the new dog?",
              "Sam adopted a beagle puppy last week, he is the sweetest dog."),
             ("What instrument does Omar play?", "Do you play an instrument, Omar?",
              "Omar has played the cello in a string quartet since school.")]
    for n, (query, echo, answer) in enumerate(cases):
        store.remember_many([MemoryInput(echo, f"t{n}", kind="note"), MemoryInput(answer, f"t{n}", kind="note")])
        top = lambda fusion: store.recall(query, f"t{n}", 2, touch=False, fusion=fusion).items[0].memory.content  # noqa: E731
        assert top(LEXICAL) == top(Fusion(keep_top=True, weight=0.3)) == echo
        assert top(Fusion(keep_top=False, weight=0.3)) == answer
        assert store.semantic is not None and not store.semantic.fusion.keep_top  # e5's default
