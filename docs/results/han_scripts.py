"""Chinese in the other script: each Chinese data set as written, with its queries converted to
traditional Chinese (OpenCC s2t: characters; s2twp: Taiwan's characters and words, 软件 -> 軟體), and
with its memories converted instead; the merge pairs with the newer text of each Chinese pair
converted. Prints P@1 / R@3 / stale@1 of `esmem eval` and the Chinese pairs' merge precision / recall
of `esmem merge-pairs`. Needs OpenCC's converter (pip install opencc). Run it on two checkouts to compare.

    python docs/results/han_scripts.py
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

import opencc

ROOT = Path(__file__).resolve().parents[2]
SETS = ("rules", "updates", "diversity", "pinned")
PAIRS = ("merge_pairs", "merge_pairs_holdout")


def esmem(*args: str) -> Any:
    return json.loads(subprocess.run(["esmem", *args, "--json"], check=True, capture_output=True, text=True).stdout)


def converted(source: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        change(row)
    target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return target


def main() -> None:
    s2t, s2twp = opencc.OpenCC("s2t"), opencc.OpenCC("s2twp")
    with tempfile.TemporaryDirectory() as tmp:
        for name in SETS:
            source = ROOT / "datasets" / f"{name}.jsonl"

            def queries(cc: opencc.OpenCC) -> Callable[[dict[str, Any]], None]:
                return lambda r: r.update(text=cc.convert(r["text"])) if r["type"] == "query" else None

            def memories(r: dict[str, Any]) -> None:
                if r["type"] == "memory":
                    r["content"] = s2twp.convert(r["content"])
            variants = {"as written": source,
                        "queries s2t": converted(source, Path(tmp) / f"{name}-q-s2t.jsonl", queries(s2t)),
                        "queries s2twp": converted(source, Path(tmp) / f"{name}-q-s2twp.jsonl", queries(s2twp)),
                        "memories s2twp": converted(source, Path(tmp) / f"{name}-m-s2twp.jsonl", memories)}
            for variant, path in variants.items():
                o = esmem("eval", str(path), "--no-misses")["overall"]
                print(f"{name:10s} {variant:15s} P@1 {o['p@1']:6.1%}  R@3 {o['r@3']:6.1%}  stale@1 {o['stale@1']:5.1%}")
        for name in PAIRS:
            source = ROOT / "datasets" / f"{name}.jsonl"
            for variant, cc in (("as written", None), ("newer s2t", s2t), ("newer s2twp", s2twp)):
                path = source if cc is None else converted(
                    source, Path(tmp) / f"{name}-{variant}.jsonl",
                    lambda r, cc=cc: r.update(new=cc.convert(r["new"])) if r.get("lang") == "zh" else None)
                zh = esmem("merge-pairs", str(path))["groups"]["lang=zh"][0]
                print(f"{name:20s} {variant:12s} Chinese pairs: precision {zh['precision']:.2f}, recall {zh['recall']:.2f}, "
                      f"uncertain {zh['uncertain']:.0f}")


if __name__ == "__main__":
    main()
