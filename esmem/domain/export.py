"""Export and restore: a namespace's stored memories, exactly, as a versioned JSONL file.

An export is what the index holds, document by document: every field (status, chain links,
access statistics, validity times, pinned/applies_to, review verdicts), under its own id, so a
restore into an empty index (another prefix, another cluster, OpenSearch 2 or 3) gives the same
history and, with the same installed policy, the same recall. The format:

    {"format": "esmem-export", "version": 1, "exported_at": ..., "engine": ..., "namespaces": [...],
     "all_versions": true, "vectors": true}
    {"id": "<document id>", "memory": {<the stored document>}}
    ...
    {"end": true, "memories": <how many memory lines>}

The end line makes a truncated file an error instead of a silent partial restore. A restore
bypasses the merge decision (the file already holds its outcome) and creates each document only
where its id is free: running it again resumes where an interrupted one stopped.
"""
from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, Callable, Iterator, Mapping, Sequence

from esmem.domain.jsonl import parse_line
from esmem.errors import EngineError, InvalidInput
from esmem.index.catalog import Catalog
from esmem.values import check_namespace, iso

FORMAT = "esmem-export"
VERSION = 1
# What a restored document must carry: the fields every write stores and recall reads.
_REQUIRED = ("namespace", "content", "kind", "importance", "valid_from", "status")


@dataclass(frozen=True)
class Restored:
    """What a restore did: documents created, and those whose id was already taken (a resumed run)."""

    restored: int
    existed: int


def selection(namespaces: Sequence[str], all_versions: bool) -> dict[str, Any]:
    """The query an export reads: the namespaces' memories, active only unless `all_versions`."""
    filters: list[Any] = [{"terms": {"namespace": list(namespaces)}}]
    if not all_versions:
        filters.append({"term": {"status": "active"}})
    return {"bool": {"filter": filters}}


def export(catalog: Catalog, out: IO[str], namespaces: Sequence[str], *, now: datetime,
           all_versions: bool = False, vectors: bool = True,
           progress: Callable[[int], None] | None = None) -> int:
    """Write the export of `namespaces` to `out`, one line at a time; how many memories it holds."""
    if not namespaces:
        raise InvalidInput("export: name at least one namespace")
    names = sorted({check_namespace(ns) for ns in namespaces})
    query = selection(names, all_versions)
    header = {"format": FORMAT, "version": VERSION, "exported_at": iso(now), "engine": str(catalog.engine.info),
              "namespaces": names, "all_versions": all_versions, "vectors": vectors}
    out.write(_line(header))
    catalog.refresh()  # what was written before the export started is in it
    count = 0
    source: Mapping[str, Any] | bool = True if vectors else {"excludes": ["embedding"]}
    for hit in catalog.stream(query, source=source):
        out.write(_line({"id": hit["_id"], "memory": hit["_source"]}))
        count += 1
        if progress:
            progress(1)
    out.write(_line({"end": True, "memories": count}))
    return count


def _line(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def read_header(path: str) -> dict[str, Any] | None:
    """The export header of a file, or None when its first line is not one (a plain import file)."""
    with _open(path) as fh:
        first = fh.readline()
    obj = parse_line(first.removeprefix(codecs.BOM_UTF8), f"{path}:1") if first.strip() else None
    return obj if isinstance(obj, dict) and "format" in obj else None


def records(path: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """The memory lines of an export file (line number, id, document), checked as they are read:
    the header's format and version, each line's shape, and the end line's count."""
    with _open(path) as fh:
        count, ended = 0, False
        for n, raw in enumerate(fh, 1):
            where = f"{path}:{n}"
            if n == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if not raw.strip():
                continue
            obj = parse_line(raw, where)
            if n == 1:
                _check_header(obj, where)
                continue
            if ended:
                raise InvalidInput(f"{where}: a line after the end line")
            if isinstance(obj, dict) and obj.get("end") is True:
                if obj.get("memories") != count:
                    raise InvalidInput(f"{where}: the end line counts {obj.get('memories')!r} memories, "
                                       f"the file holds {count}")
                ended = True
                continue
            doc_id, doc = _check_memory(obj, where)
            count += 1
            yield n, doc_id, doc
        if not ended:
            raise InvalidInput(f"{path}: no end line (the export is truncated)")


def _open(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None


def _check_header(obj: Any, where: str) -> None:
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise InvalidInput(f"{where}: not an esmem export (the first line must name format {FORMAT!r})")
    if obj.get("version") != VERSION:
        raise InvalidInput(f"{where}: export version {obj.get('version')!r} is not supported (this esmem "
                           f"reads version {VERSION})")


def _check_memory(obj: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(obj, dict) or set(obj) != {"id", "memory"}:
        raise InvalidInput(f"{where}: expected {{\"id\": ..., \"memory\": {{...}}}}")
    doc_id, doc = obj["id"], obj["memory"]
    if not isinstance(doc_id, str) or not doc_id or len(doc_id.encode()) > 512:
        raise InvalidInput(f"{where}: id must be a non-empty string of at most 512 bytes")
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: memory must be an object")
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise InvalidInput(f"{where}: memory lacks {', '.join(missing)}")
    try:
        check_namespace(doc["namespace"])
    except InvalidInput as e:
        raise InvalidInput(f"{where}: {e}") from None
    return doc_id, doc


def restore(catalog: Catalog, path: str, *, batch_size: int = 500, progress: Callable[[int], None] | None = None,
            total: Callable[[int], None] | None = None) -> Restored:
    """Create every document of an export file under its own id, as it was stored. The whole file is
    checked before the first write (`total(n)`: it holds n memories); an id already taken is left as
    it is (a resumed restore)."""
    n = sum(1 for _ in records(path))  # the check pass: a bad line fails before anything is written
    if total:
        total(n)
    restored = existed = 0
    batch: list[tuple[int, str, dict[str, Any]]] = []

    def flush() -> None:
        nonlocal restored, existed
        done = catalog.create([(doc_id, doc) for _, doc_id, doc in batch], refresh="true")
        for n, doc_id, _ in batch:
            if doc_id not in done.existed and doc_id not in done.created:
                reason = done.errors[0] if done.errors else "rejected"
                raise EngineError(f"{path}:{n}: the engine refused memory {doc_id} ({reason}); {restored} restored "
                                  "so far: fix the cause and run the same restore again to resume")
        restored += len(done.created)
        existed += len(done.existed)
        if progress:
            progress(len(batch))
        batch.clear()

    for rec in records(path):
        batch.append(rec)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return Restored(restored, existed)
