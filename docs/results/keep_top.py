"""LoCoMo hybrid recall with and without `keep_top`, per conversation: does the fused ranking's first
hit beat the BM25 leg's? One index per model (the evaluation's ingest), every question run with lexical
esmem and with the hybrid at weight 0.3, keep_top on and off. Prints P@1 / R@5 / R@10 over all
questions and per conversation.

    python docs/results/keep_top.py $ESMEM_URL DIR minilm-q,e5-small-q,bge-small-en-q
"""
import sys
from collections import defaultdict
from pathlib import Path

from esmem.apps.evaluate import Evaluation, RunConfig, locomo_dataset, metrics
from esmem.domain.embedding import load_embedder
from esmem.domain.hybrid import Fusion
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.index.engine import Engine


def main(url: str, directory: str, names: str) -> None:
    data = locomo_dataset(Path(directory), [])
    for name in names.split(","):
        evaluation = Evaluation(Engine(url), data, "keep-top", embedder=load_embedder(name))
        runs = {"lexical": None, "keep_top on": Fusion(keep_top=True), "keep_top off": Fusion(keep_top=False)}
        try:
            print(f"== {name}  (P@1 / R@5 / R@10, %)")
            for label, fusion in runs.items():
                outcomes = evaluation.run(RunConfig(RecallParams(), MergePolicy(), 10, None, fusion))
                groups = defaultdict(list)
                for o in outcomes:
                    groups["all"].append(o)
                    groups[o.query.namespace].append(o)
                cells = []
                for group, members in sorted(groups.items(), key=lambda g: (g[0] != "all", g[0])):
                    m = metrics(members)
                    cells.append(f"{group}: {100 * m['p@1']:.1f} / {100 * m['r@5']:.1f} / {100 * m['r@10']:.1f}")
                print(f"{label:13s} " + "   ".join(cells), flush=True)
        finally:
            evaluation.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
