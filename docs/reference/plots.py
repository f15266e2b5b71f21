"""The ranking figures of docs/concepts/ranking.md, drawn from the code's own formula and a policy.

    python docs/reference/plots.py [--policy FILE] [OUTDIR]     (default OUTDIR: docs/concepts/img)

decay.png: recency against age for every memory kind (esmem/domain/ranking.py:recency, the half-lives
of the policy: the built-in one without --policy). fusion.png: the score of each fusion mode against
BM25 relevance for a fresh, a half-decayed and a nearly forgotten memory (ranking.fuse). The curves
are computed by `decay_curves` and `fusion_curves`, which the tests compare with the formula.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from esmem.apps.plots import AGES_DAYS, decay_curves
from esmem.domain.fusion import MODES
from esmem.domain.policy import DecayPolicy, load_policy
from esmem.domain.ranking import RecallParams, fuse

RELS = [r / 10 for r in range(0, 301)]           # BM25 relevance 0..30
RECENCIES = (1.0, 0.5, 0.1)
IMPORTANCE = 5.0


def fusion_curves(params: RecallParams) -> dict[str, dict[float, list[float]]]:
    """Score against RELS for each fusion mode and each recency of RECENCIES (importance 5)."""
    return {mode: {rec: [fuse(rel, rec, IMPORTANCE, replace(params, mode=mode)) for rel in RELS]
                   for rec in RECENCIES} for mode in MODES}


def draw(params: RecallParams, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, ys in decay_curves(params).items():
        hl = params.half_life_of(kind)
        ax.plot(AGES_DAYS, ys, label=f"{kind} ({'no decay' if hl is None else f'half-life {hl.days}d'})")
    ax.set(xlabel="age since valid_from (or the reheated anchor), days", ylabel="recency", ylim=(0, 1.05),
           title="Recency per kind")
    ax.legend(fontsize=8)
    fig.tight_layout()
    decay = out / "decay.png"
    fig.savefig(decay, dpi=100, metadata={"Software": None})
    plt.close(fig)

    curves = fusion_curves(params)
    fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3.6), sharex=True)
    for ax, (mode, by_rec) in zip(axes, curves.items()):
        for rec, ys in by_rec.items():
            ax.plot(RELS, ys, label=f"recency {rec}")
        ax.set(title=mode, xlabel="BM25 relevance")
    axes[0].set_ylabel(f"score (importance {IMPORTANCE:g})")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fusion = out / "fusion.png"
    fig.savefig(fusion, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return [decay, fusion]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", type=Path, help="a policy file (default: the built-in policy)")
    ap.add_argument("outdir", nargs="?", type=Path, default=Path(__file__).resolve().parents[1] / "concepts" / "img")
    args = ap.parse_args(argv)
    policy = load_policy(args.policy) if args.policy else DecayPolicy()
    for path in draw(policy.params(), args.outdir):
        print(path)


if __name__ == "__main__":
    main()
