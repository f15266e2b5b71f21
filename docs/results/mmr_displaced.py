"""Which gold turns MMR pushes out of LoCoMo's top 5, and how similar each was to the picks.

Ingests the LoCoMo conversations once (as `esmem eval --locomo` does), recalls every question with
MMR counting every similarity (`mmr_threshold` 0) and with MMR off, and for each gold turn in the top 5
without MMR but not with it prints the question, the turn and its highest similarity to a memory MMR
picked; then how many there were and those similarities, sorted.

    python docs/results/mmr_displaced.py $ESMEM_URL DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

from esmem.apps.evaluate import Evaluation, locomo_dataset
from esmem.domain.hybrid import LEXICAL
from esmem.domain.merge import MergePolicy
from esmem.domain.mmr import jaccard, similarity_set
from esmem.domain.ranking import RecallParams
from esmem.domain.types import Recalled, RecallResult
from esmem.index.engine import Engine


def main(url: str, directory: str, shown: int = 12) -> None:
    dataset = locomo_dataset(Path(directory))
    evaluation = Evaluation(Engine(url), dataset)
    try:
        store, by_doc, _ = evaluation._store(MergePolicy())
        counted, off = RecallParams(mmr_threshold=0.0), RecallParams(mmr=False)
        highest: list[float] = []
        for q in dataset.queries:
            def gold_top5(params: RecallParams) -> tuple[list[Recalled], RecallResult]:
                res = store.recall(q.text, q.namespace, 10, params=params, now=q.now, touch=False, fusion=LEXICAL)
                return [r for r in res.items[:5] if by_doc.get(r.memory.id, frozenset()) & set(q.gold)], res
            kept, with_mmr = gold_top5(counted)
            plain, _ = gold_top5(off)
            kept_ids = {r.memory.id for r in kept}
            for r in plain:
                if r.memory.id in kept_ids:
                    continue
                tokens = similarity_set(r.memory.content, counted.mmr_similarity)
                sim, pick = max((jaccard(tokens, similarity_set(x.memory.content, counted.mmr_similarity)), x.memory.content)
                                for x in with_mmr.items[:5])
                highest.append(sim)
                if len(highest) <= shown:
                    print(f"Q: {q.text}\n  gold pushed out: {r.memory.content[:110]}\n  most similar pick ({sim:.2f}): {pick[:110]}")
        print(f"gold turns pushed out of the top 5: {len(highest)}; highest similarity to a pick, sorted:")
        print(", ".join(f"{s:.2f}" for s in sorted(highest)))
    finally:
        evaluation.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
