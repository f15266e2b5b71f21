"""The validate step of the write path: one input -> (deterministic id, index document).

Every field has one check with a typed error (`InvalidInput`); nothing reaches the engine unchecked.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

from esmem.domain.embedding import quantize
from esmem.domain.pinned import check_applies_to
from esmem.domain.derived import derived
from esmem.domain.threads import thread_fields
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.values import check_kind, check_namespace, epoch_ms, iso, parse_time

SOURCES = ("user", "agent", "tool")
MAX_KEY_CHARS = 512  # ids and idempotency keys (a keyword; the engine refuses terms over 32 KB)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # Unicode's controls (Cc) but \t \n \r


@dataclass(frozen=True)
class Limits:
    """What a store accepts: content size, how far in the future `valid_from` may lie, and how deep
    `metadata` may nest (objects and lists; deeper data overflowed the JSON encoder's recursion)."""

    max_content_bytes: int = 64 * 1024
    max_future: timedelta = timedelta(days=1)
    max_metadata_depth: int = 32


def _check_text(name: str, text: str) -> str:
    """Text the engine can store and a terminal or a prompt shows as it is: UTF-8 (which a lone surrogate,
    e.g. from the JSON escape "\\ud800", is not) without control characters other than tab, newline and
    carriage return. NUL, escape sequences and the like are refused, not stripped: stripping would store
    something the caller did not write."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid UTF-8 (a lone surrogate)") from None
    control = _CONTROL.search(text)
    if control:
        raise InvalidInput(f"{name} contains the control character U+{ord(control.group()):04X} at position "
                           f"{control.start()} (only tab, newline and carriage return are allowed)")
    return text


def _check_content(content: Any, max_bytes: int) -> str:
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidInput(f"content is not valid UTF-8 (byte {e.start})") from None
    if not isinstance(content, str):
        raise InvalidInput(f"content must be text, got {type(content).__name__}")
    size = len(_check_text("content", content).encode("utf-8"))
    if not content.strip():
        raise InvalidInput("content is empty")
    if size > max_bytes:
        raise InvalidInput(f"content is {size} bytes, over the {max_bytes}-byte cap")
    return content.strip()


def _check_choice(name: str, value: Any, known: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in known:
        raise InvalidInput(f"unknown {name} {value!r} (known: {', '.join(known)})")
    return value


def _check_entities(entities: Any) -> list[str]:
    """A list (or tuple) of non-empty strings: a bare string is not split into characters."""
    if isinstance(entities, (str, bytes)) or not isinstance(entities, (list, tuple)):
        raise InvalidInput(f"entities must be a list of strings, got {type(entities).__name__}")
    if len(entities) > 64 or any(not isinstance(e, str) or not e.strip() or len(e) > 256 for e in entities):
        raise InvalidInput("entities: at most 64 non-empty strings of at most 256 characters")
    return [_check_text("entities", e) for e in entities]


def _check_key(name: str, value: Any) -> str:
    """An id from the caller (`id` of a line, external_id, idempotency_key): a short non-empty string.
    A number is refused, not turned into its text: 5 and "5" would be one memory, 5.0 another."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_KEY_CHARS:
        kind = "" if isinstance(value, str) else f"{type(value).__name__} "
        raise InvalidInput(f"{name} must be a non-empty string of at most {MAX_KEY_CHARS} characters, "
                           f"got {kind}{value!r}")
    return _check_text(name, value)


def _nests_deeper(value: Any, levels: int) -> bool:
    """Whether objects and lists nest more than `levels` deep in `value` (looks no deeper than that)."""
    if isinstance(value, Mapping):
        inner: Any = value.values()
    elif isinstance(value, (list, tuple)):
        inner = value
    else:
        return False
    return levels <= 0 or any(_nests_deeper(v, levels - 1) for v in inner)


def _check_json(name: str, value: Any, max_depth: int) -> Any:
    """Strict JSON (no NaN/Infinity, no lone surrogate anywhere, at most `max_depth` levels of objects
    and lists): the engine rejects the rest mid-batch otherwise. It is the application's own data,
    returned as given, so control characters in it are kept."""
    if _nests_deeper(value, max_depth):
        raise InvalidInput(f"{name} nests objects/lists more than {max_depth} levels deep")
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid UTF-8 (a lone surrogate)") from None
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{name} must be JSON-serialisable without NaN/Infinity ({e})") from None
    return value


def _check_embedding(embedding: Any) -> list[int]:
    if isinstance(embedding, (str, bytes)) or not isinstance(embedding, Sequence) or not embedding or any(
            isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in embedding):
        raise InvalidInput("embedding must be a non-empty list of finite numbers")
    return quantize(embedding)  # stored as the index's vector field holds it


def _check_time(name: str, value: Any) -> datetime:
    """ISO 8601 text or a datetime. A number is refused rather than read as epoch milliseconds, the
    reading of `parse_time`: epoch seconds (1700000000) would land silently in January 1970."""
    if isinstance(value, (int, float)):  # bool included
        raise InvalidInput(f"{name} must be ISO 8601 text (e.g. 2026-10-08T12:00:00Z) or a datetime, got the "
                           f"number {value!r} (epoch seconds and milliseconds cannot be told apart)")
    if not isinstance(value, (str, datetime)):
        raise InvalidInput(f"{name} must be ISO 8601 text (e.g. 2026-10-08T12:00:00Z) or a datetime, "
                           f"got {type(value).__name__}")
    try:
        return parse_time(value)
    except InvalidInput as e:
        raise InvalidInput(f"{name}: {e}") from None


def memory_id(namespace: str, key: str) -> str:
    """The deterministic document id of a memory: the same input always lands on the same document,
    so a replayed import or a retried write finds its earlier self instead of adding a twin."""
    return hashlib.sha256(f"{namespace}\0{key}".encode("utf-8")).hexdigest()[:32]



# What a retry of the same input stores again. A stored document at a memory's id that differs in one of
# them was not written by that input: an id pre-created by another writer, or a key reused. (Importance,
# valid_from and recorded_at are left out: a retry runs later, and restating raises the importance.)
IDENTITY = ("namespace", "content", "kind", "source", "evergreen", "entities", "metadata", "external_id",
            "thread", "seq", "neighbours", "applies_to", "importance_rule")


def differences(stored: Mapping[str, Any], doc: Mapping[str, Any]) -> list[str]:
    """The IDENTITY fields in which a stored document differs from the one a write would store."""
    return [f for f in IDENTITY if stored.get(f) != doc.get(f)]


def document(item: MemoryInput, now: datetime, limits: Limits) -> tuple[str, dict[str, Any]]:
    """Validate one input into (deterministic id, index document); one check per field, each
    with a typed error. Importance is filled in later if missing."""
    if not isinstance(item, MemoryInput):
        raise InvalidInput(f"expected a MemoryInput, got {type(item).__name__}")
    content = _check_content(item.content, limits.max_content_bytes)
    check_namespace(item.namespace)
    check_kind(item.kind)
    _check_choice("source", item.source, SOURCES)
    if item.importance is not None and (isinstance(item.importance, bool)
                                        or not isinstance(item.importance, (int, float))
                                        or not 1 <= item.importance <= 10):
        raise InvalidInput(f"importance must be a number in 1..10, got {item.importance!r}")
    valid_from = _check_time("valid_from", item.valid_from) if item.valid_from is not None else now
    if valid_from > now + limits.max_future:
        raise InvalidInput(f"valid_from {iso(valid_from)} is in the future (more than {limits.max_future} ahead)")
    entities = _check_entities(item.entities)
    if not isinstance(item.evergreen, bool):
        raise InvalidInput(f"evergreen must be true or false, got {item.evergreen!r}")
    doc: dict[str, Any] = {
        "namespace": item.namespace, "content": content, "kind": item.kind,
        "importance": None if item.importance is None else float(item.importance),
        "importance_rule": None if item.importance is None else "given",
        "valid_from": iso(valid_from), "recorded_at": iso(now), "anchor_at": epoch_ms(valid_from),
        "status": "active", "access_count": 0, "restated_count": 0, "entities": entities,
        "source": item.source, "evergreen": item.evergreen, **derived(content),
    }
    if item.metadata is not None:
        if not isinstance(item.metadata, Mapping):
            raise InvalidInput(f"metadata must be an object, got {type(item.metadata).__name__}")
        doc["metadata"] = _check_json("metadata", dict(item.metadata), limits.max_metadata_depth)
    if item.external_id is not None:
        doc["external_id"] = _check_key("id", item.external_id)
    if item.embedding is not None:
        doc["embedding"] = _check_embedding(item.embedding)
    doc.update(thread_fields(item.thread, item.seq, item.neighbours))
    if item.applies_to is not None:
        doc["applies_to"] = check_applies_to(item.applies_to)
    for name in ("thread", "neighbours", "applies_to"):
        if name in doc:
            _check_text(name, doc[name])
    if item.supersedes is not None:
        doc["supersedes"] = [_check_key("supersedes", item.supersedes)]
    if item.idempotency_key is not None:
        key = "key\0" + _check_key("idempotency_key", item.idempotency_key)
    elif item.external_id is not None:
        key = "id\0" + doc["external_id"]
    else:
        key = "\0".join(("h", item.kind, content, doc["valid_from"]))
    return memory_id(item.namespace, key), doc
