"""The cosine each embedding model gives two unrelated memories: the `unrelated` of esmem.domain.embedding.MODELS.

Embeds the distinct texts of `esmem bench`'s synthetic corpus (seed 7, 3,000 memories: agent memories of
mixed topics, English and Chinese apart) and prints, per model and language, the median, 90th and 99th
percentile cosine over every pair of different texts. The median in the model card's language is the
model's `unrelated`: where the merge's cosine scale starts for that model.

    python docs/results/unrelated_cosines.py minilm minilm-q e5-small-q bge-small-en-q bge-small-zh-q
"""
from __future__ import annotations

import sys

import numpy as np
import regex

from esmem.apps.bench import generate
from esmem.domain.embedding import embed_checked, load_embedder

CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
LETTERS = regex.compile(r"\p{L}+")


def language(text: str) -> str:
    """"zh" when a text has at least as many CJK characters as words in other scripts ("会议从 Helm 迁到
    pytest"), else "en" (an English sentence naming a "钉钉" thread)."""
    cjk = len(CJK.findall(text))
    return "zh" if cjk and cjk >= len(LETTERS.findall(CJK.sub(" ", text))) else "en"


def main(models: list[str]) -> None:
    texts = list(dict.fromkeys(i.text for i in generate(3000, 30, 7).inputs()))
    by_language = {lang: [t for t in texts if language(t) == lang][:600] for lang in ("en", "zh")}
    for name in models:
        embedder = load_embedder(name)
        assert embedder is not None
        row = []
        for lang, group in by_language.items():
            v = np.array(embed_checked(embedder, group), dtype=float)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            cosines = (v @ v.T)[np.triu_indices(len(group), 1)]
            row.append(f"{lang} ({len(group)} texts): median {np.median(cosines):.3f}, "
                       f"p90 {np.percentile(cosines, 90):.3f}, p99 {np.percentile(cosines, 99):.3f}")
        print(f"{name}: " + "; ".join(row))


if __name__ == "__main__":
    main(sys.argv[1:])
