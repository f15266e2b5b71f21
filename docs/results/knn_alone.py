"""LoCoMo, the kNN leg alone and offline: the cosine of each question to every turn of its conversation
(the byte vectors the index would hold), nothing else - no decay, no fusion, no engine. P@1, R@5, R@10
against the gold turns, per model and per query text its model card suggests.

    python docs/results/knn_alone.py DIR minilm,minilm-q,e5-small-q,bge-small-en-q
"""
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from esmem.apps.evaluate import locomo_records
from esmem.domain.embedding import MODELS, OnnxEmbedder, quantize

BGE_INSTRUCTION = "Represent this sentence for searching relevant passages: "
VARIANTS = {  # label, query prefix, passage prefix
    "minilm": [("minilm", "", "")],
    "minilm-q": [("minilm-q", "", "")],
    "e5-small-q": [("e5-small-q, query:/passage:", "query: ", "passage: "), ("e5-small-q, no prefixes", "", "")],
    "bge-small-en-q": [("bge-small-en-q", "", ""), ("bge-small-en-q, query instruction", BGE_INSTRUCTION, "")],
}


def main(directory: str, names: str) -> None:
    records = locomo_records(Path(directory))
    memories = [r for r in records if r["type"] == "memory"]
    queries = [r for r in records if r["type"] == "query"]
    ids = [m["id"] for m in memories]
    namespaces = np.array([m["namespace"] for m in memories])
    for name in names.split(","):
        passages: dict[str, np.ndarray] = {}
        for label, query_prefix, passage_prefix in VARIANTS[name]:
            model = OnnxEmbedder(replace(MODELS[name], query_prefix=query_prefix, passage_prefix=passage_prefix))
            if passage_prefix not in passages:
                stored = np.array([quantize(v) for v in model.embed([m["content"] for m in memories])], dtype=np.float32)
                passages[passage_prefix] = stored / np.linalg.norm(stored, axis=1, keepdims=True)
            vectors = np.array(model.embed_queries([q["text"] for q in queries]), dtype=np.float32)
            p1 = r5 = r10 = 0.0
            for q, v in zip(queries, vectors):
                sims = passages[passage_prefix] @ v
                sims[namespaces != q["namespace"]] = -9.0
                top = [ids[i] for i in np.argsort(-sims)[:10]]
                gold = set(q["gold"])
                p1 += top[0] in gold
                r5 += len(gold & set(top[:5])) / len(gold)
                r10 += len(gold & set(top)) / len(gold)
            n = len(queries)
            print(f"{label:36s} P@1 {p1 / n:.3f}  R@5 {r5 / n:.3f}  R@10 {r10 / n:.3f}  ({n} questions)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
