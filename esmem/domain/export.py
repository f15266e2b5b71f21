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

Memory lines are in id order (on OpenSearch), so an interrupted export resumes into the same file: its
last complete line names the id to continue after, a truncated last line is dropped, and the header is
kept (`resume_point`). A memory whose id sorts before that point and that changed between the two runs
is in the file as the first run read it.
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
class Resume:
    """Where an interrupted export file continues: after memory `after_id` (None: no memory line yet),
    with `count` memory lines kept, at byte `offset` (a truncated last line lies beyond it); `ended`:
    the file is complete already."""

    after_id: str | None
    count: int
    offset: int
    ended: bool


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


def _names(namespaces: Sequence[str]) -> list[str]:
    if not namespaces:
        raise InvalidInput("export: name at least one namespace")
    return sorted({check_namespace(ns) for ns in namespaces})


def export(catalog: Catalog, out: IO[str], namespaces: Sequence[str], *, now: datetime,
           all_versions: bool = False, vectors: bool = True,
           progress: Callable[[int], None] | None = None, resume: Resume | None = None) -> int:
    """Write the export of `namespaces` to `out`, one line at a time; how many memories it holds.
    With `resume` (of the file `out` appends to, cut at its offset), the header and the memory lines
    up to `resume.after_id` are in the file already: only the rest and the end line are written."""
    names = _names(namespaces)
    query = selection(names, all_versions)
    count = 0
    if resume is None or not resume.offset:
        header = {"format": FORMAT, "version": VERSION, "exported_at": iso(now), "engine": str(catalog.engine.info),
                  "namespaces": names, "all_versions": all_versions, "vectors": vectors}
        out.write(_line(header))
    else:
        count = resume.count
    if resume is not None and resume.ended:
        return count
    catalog.refresh()  # what was written before the export started is in it
    source: Mapping[str, Any] | bool = True if vectors else {"excludes": ["embedding"]}
    for hit in catalog.stream(query, source=source, after_id=resume.after_id if resume else None):
        out.write(_line({"id": hit["_id"], "memory": hit["_source"]}))
        count += 1
        if progress:
            progress(1)
    out.write(_line({"end": True, "memories": count}))
    return count


def _line(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def resume_point(path: str, namespaces: Sequence[str], *, all_versions: bool, vectors: bool) -> Resume:
    """Where the export file at `path` continues, read in one pass (constant memory). A missing or
    empty file, or one whose header line is incomplete, starts from the beginning; a header of other
    namespaces or options is refused; the last line is dropped when it is incomplete (no newline, or
    not JSON), and a bad line anywhere else is an error."""
    names = _names(namespaces)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return Resume(None, 0, 0, False)
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None
    after_id, count, offset, ended = None, 0, 0, False
    with fh:
        lines = iter(fh)
        for n, raw in enumerate(lines, 1):
            where = f"{path}:{n}"
            try:
                obj = json.loads(raw) if raw.endswith(b"\n") else None
            except ValueError:
                obj = None
            if obj is None:
                if next(lines, None) is not None:
                    raise InvalidInput(f"{where}: not a JSON line (only the last line may be incomplete)")
                break
            if n == 1:
                _check_header(obj, where)
                asked = {"namespaces": names, "all_versions": all_versions, "vectors": vectors}
                if {k: obj.get(k) for k in asked} != asked:
                    raise InvalidInput(f"{where}: this export was of {obj.get('namespaces')} (all_versions "
                                       f"{obj.get('all_versions')}, vectors {obj.get('vectors')}): resume it with "
                                       "the same namespaces and options")
            elif isinstance(obj, dict) and obj.get("end") is True:
                ended = True
            else:
                after_id = _check_memory(obj, where)[0]
                count += 1
            offset += len(raw)
    return Resume(after_id, count, offset, ended)


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
