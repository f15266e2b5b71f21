"""Reading memories from JSONL: one set of rules for `esmem import` and the evaluation datasets."""
from __future__ import annotations

import codecs
import hashlib
import json
from typing import Any, Mapping

from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput

MEMORY_FIELDS = {f for f in MemoryInput.__dataclass_fields__} | {"type", "id"}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_line(raw: bytes | str, where: str) -> Any:
    """One JSON line, strictly (no NaN/Infinity, valid UTF-8); errors name `where`."""
    try:
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise InvalidInput(f"{where}: invalid UTF-8") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{where}: invalid JSON ({e.msg})") from None
    except RecursionError:  # the decoder's own bound on nesting
        raise InvalidInput(f"{where}: invalid JSON (nested too deeply)") from None
    except ValueError as e:
        raise InvalidInput(f"{where}: invalid JSON ({e})") from None


def memory_input(obj: Mapping[str, Any], where: str, default_namespace: str = "default") -> MemoryInput:
    """A memory object (content, namespace, kind, importance, valid_from, entities, evergreen, source,
    metadata, embedding, supersedes, idempotency_key, id -> external_id) as a MemoryInput. A line's
    `id` (or, without one, the line itself) is its identity: importing a file again is a replay.
    `id` is stored as the memory's external_id, so a line that also gives `external_id` is refused."""
    unknown = sorted(set(obj) - MEMORY_FIELDS)
    if unknown or "content" not in obj:
        raise InvalidInput(f"{where}: " + (f"unknown field(s) {unknown}" if unknown else "missing \"content\""))
    if "id" in obj and "external_id" in obj:
        raise InvalidInput(f"{where}: give \"id\" or \"external_id\", not both (\"id\" is the line's identity "
                           "and is stored as its external_id)")
    fields = {k: v for k, v in obj.items() if k not in ("type", "id")}
    fields.setdefault("namespace", default_namespace)
    if "id" in obj:
        fields["external_id"] = obj["id"]
    elif "idempotency_key" not in fields:  # no id: the line itself is the identity (a re-import is a replay)
        # surrogatepass: a lone surrogate ("\ud800" in the file) is hashed too, and refused by validation
        # with the field that holds it
        fields["idempotency_key"] = "line:" + hashlib.sha256(
            json.dumps(dict(obj), sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
    return MemoryInput(**fields)


def read_jsonl(path: str, default_namespace: str = "default") -> tuple[list[MemoryInput], list[int]]:
    """Memories from a JSONL file and the line number of each. Every line is checked before anything
    is written; an error names the line."""
    items: list[MemoryInput] = []
    lines: list[int] = []
    try:
        with open(path, "rb") as fh:  # a leading byte order mark (editors on Windows write one) is not a line's text
            raw_lines = fh.read().removeprefix(codecs.BOM_UTF8).split(b"\n")
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None
    for n, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        obj = parse_line(raw, where)
        if not isinstance(obj, dict) or obj.get("type", "memory") != "memory":
            raise InvalidInput(f"{where}: expected a memory object")
        items.append(memory_input(obj, where, default_namespace))
        lines.append(n)
    return items, lines
