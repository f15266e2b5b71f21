"""MMR defaults: Jaccard over index tokens, lambda and threshold chosen on datasets/diversity.jsonl and LoCoMo."""
from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path

from esmem.apps.evaluate import Evaluation, RunConfig, load_dataset, report
from esmem.domain.mmr import jaccard, mmr, similarity_set
from esmem.domain.ranking import RecallParams

DATASETS = Path(__file__).resolve().parents[1] / "datasets"

NOTES = ["writing TypeScript backend with Express for REST API",
         "building TypeScript backend API using Express framework",
         "creating TypeScript REST API service with Express",
         "analyzing data with Python TypeScript integration pipeline"]


def test_words_drop_the_single_cjk_characters_unrelated_notes_share() -> None:
    a, b = "排查订单服务的 Redis 缓存淘汰问题", "规划明年的团队预算和服务采购"
    assert "的" in similarity_set(a, "tokens") and "的" not in similarity_set(a, "words")
    assert "缓存" in similarity_set(a, "words")
    assert jaccard(similarity_set(a, "words"), similarity_set(b, "words")) < \
        jaccard(similarity_set(a, "tokens"), similarity_set(b, "tokens"))
    assert similarity_set(NOTES[0], "words") == similarity_set(NOTES[0], "tokens")  # no CJK: the same


def test_seed_000_example_spreads_at_the_default_lambda() -> None:
    sets = [similarity_set(n, RecallParams().mmr_similarity) for n in NOTES]
    rel = [0.125, 0.143, 0.143, 0.143]  # Jaccard to the query, as in the seed's table
    order, _ = mmr(rel, lambda i, j: jaccard(sets[i], sets[j]), 3, RecallParams().mmr_lambda)
    assert 3 in order


def test_the_threshold_parts_restatements_from_notes_on_another_topic() -> None:
    """Each cluster of diversity.jsonl: three restatements of one thing, one note on another topic. At the
    default similarity every restatement pair reaches the threshold and no other pair does."""
    rows = [json.loads(line) for line in (DATASETS / "diversity.jsonl").read_text().splitlines() if line.strip()]
    clusters: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in rows:
        if r["type"] == "memory":
            clusters.setdefault((r["namespace"], r["id"].split("-")[0]), []).append(r)
    p = RecallParams()
    restated, apart = [], []
    for notes in clusters.values():
        for a, b in itertools.combinations(notes, 2):
            sim = jaccard(similarity_set(a["content"], p.mmr_similarity), similarity_set(b["content"], p.mmr_similarity))
            (apart if "diff" in a["id"] + b["id"] else restated).append(sim)
    assert len(clusters) == 20 and len(restated) == 60
    assert min(restated) >= p.mmr_threshold > max(apart)


def test_the_different_topic_note_reaches_the_top_3_on_the_class_set(engine) -> None:
    data = load_dataset(DATASETS / "diversity.jsonl")
    evaluation = Evaluation(engine, data, f"t{uuid.uuid4().hex[:10]}")
    try:
        now = report(evaluation.run(RunConfig(k=3)))["overall"]
        plain = report(evaluation.run(RunConfig(RecallParams(mmr=False), k=3)))["overall"]
        only_copies = report(evaluation.run(RunConfig(RecallParams(mmr_threshold=1.0), k=3)))["overall"]
    finally:
        evaluation.close()
    assert now["r@3"] == 1.0 and now["queries"] >= 20  # every different-topic note in the top 3
    assert plain["r@3"] < 0.5  # without MMR the near-duplicates fill the top 3
    assert only_copies["r@3"] < 0.5  # only exact copies redundant: the restatements fill it too
