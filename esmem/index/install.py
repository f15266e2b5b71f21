"""Install what esmem needs into a cluster, idempotently, and detect drift from the repo.

Artifacts: the index template (templates/index_template.json.j2), every stored Painless script
(painless/*.painless) and every search template (templates/search/*.mustache.j2), all named under a
prefix so several installations (and parallel tests) share one cluster. The concrete index is named
after the mapping's digest and sits behind an alias: a mapping change is `install --migrate`
(new index, reindex, atomic alias swap), never an in-place edit.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Mapping

from esmem.errors import EngineError, NotFound, NotInstalled
from esmem.index.engine import Engine
from esmem.index.refresh import moved
from esmem.index.templates import assets_root, han_folding, render, render_json, stopwords

MUSTACHE_OPTIONS = {"content_type": "application/json; charset=UTF-8"}


@dataclass(frozen=True)
class Names:
    """Every cluster-side name derived from the installation prefix."""

    prefix: str

    @property
    def alias(self) -> str:
        return f"{self.prefix}-memories"

    @property
    def index_template(self) -> str:
        return f"{self.prefix}-memories"

    def index(self, digest: str) -> str:
        return f"{self.prefix}-memories-{digest[:12]}"

    def script(self, stem: str) -> str:
        return f"{self.prefix}-{stem}"

    @property
    def audit(self) -> str:
        """The erase audit index: outside the memories pattern, so no recall, count or erase reads it."""
        return f"{self.prefix}-audit"


@dataclass(frozen=True)
class Artifact:
    kind: str  # "index_template" | "script"
    name: str
    body: dict[str, Any]
    digest: str


@dataclass
class InstallReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated)

    def summary(self) -> str:
        if not self.changed:
            return "nothing to do"
        return f"{len(self.created)} created, {len(self.updated)} updated"


def _digest(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


KEEP: Final = "keep"  # install's `embedding` default: whatever embedder the live index has (none on a fresh install)
Keep = Literal["keep"]


def derives_vectors(engine: Engine) -> bool:
    """Whether an index with vectors keeps them out of its stored _source and rebuilds them when a
    document is read (the k-NN plugin's derived source, which esmem's index template turns on from
    OpenSearch 3): there a hit is cheaper to fetch without its vector (docs/results/fetch-cost.txt)."""
    return engine.info.family == "opensearch" and engine.info.major >= 3


def index_body(engine: Engine, prefix: str, shards: int = 1, replicas: int = 0,
               embedding: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`embedding`: {"name", "dimensions"} of the embedder (esmem.hybrid.spec), or None (lexical only)."""
    body: dict[str, Any] = render_json("templates/index_template.json.j2", {
        "prefix": prefix, "family": engine.info.family, "major": engine.info.major, "k1": engine.info.K1,
        "shards": shards, "replicas": replicas, "stopwords": json.dumps(sorted(stopwords())),
        "han_folding": json.dumps([f"{k}=>{v}" for k, v in han_folding().items()], ensure_ascii=False),
        "embedding": dict(embedding) if embedding else None,
        "derived_vectors": bool(embedding) and derives_vectors(engine)})
    return body


def installed_embedding(engine: Engine, prefix: str) -> dict[str, Any] | None:
    """The embedder the live index was built for (its mapping's _meta), or None."""
    live = current_index(engine, prefix)
    if live is None:
        return None
    mappings = engine.request("GET", f"/{live}/_mapping")[live]["mappings"]
    found = (mappings.get("_meta") or {}).get("esmem_embedder")
    return {"name": found["name"], "dimensions": int(found["dimensions"])} if found else None


def _embedding(engine: Engine, prefix: str, embedding: Mapping[str, Any] | None | Keep) -> dict[str, Any] | None:
    return installed_embedding(engine, prefix) if embedding == KEEP else (dict(embedding) if embedding else None)


RECENT_SIZE = 10  # the `recent` template's default size


@dataclass(frozen=True)
class TemplateDefaults:
    """What the ranking policy gives install: the variables its defaults render into the search
    templates, and the fusion modes the stored `fuse` script dispatches on."""

    variables: Mapping[str, Any]
    fusions: tuple[str, ...]


def search_variables(prefix: str, defaults: TemplateDefaults) -> dict[str, Any]:
    """What the search templates are rendered with: the prefix and the ranking policy's defaults."""
    return {"prefix": prefix, "recent_size": RECENT_SIZE, **defaults.variables}


def artifacts(engine: Engine, prefix: str, defaults: TemplateDefaults, shards: int = 1, replicas: int = 0, *,
              embedding: Mapping[str, Any] | None = None) -> list[Artifact]:
    """Everything `install` puts, rendered from the repo's files and the ranking policy's defaults."""
    names = Names(prefix)
    root = assets_root()
    # the engine's BM25 scale (EngineInfo.bm25_boost) goes with the policy into the lexical clauses
    variables = {**search_variables(prefix, defaults), "bm25_boost": engine.info.bm25_boost,
                 "family": engine.info.family, "leg": "bm25", "vectors": embedding is not None,
                 "derived_vectors": embedding is not None and derives_vectors(engine)}
    body = index_body(engine, prefix, shards, replicas, embedding)
    out = [Artifact("index_template", names.index_template, body, _digest(body["template"]))]
    for path in sorted((root / "painless").glob("*.painless")):
        source = render(f"painless/{path.name}", {"fusions": defaults.fusions}, shared=frozenset({"fusions"}))
        out.append(Artifact("script", names.script(path.stem),
                            {"script": {"lang": "painless", "source": source}}, _digest(source)))
    for path in sorted((root / "templates" / "search").glob("*.mustache.j2")):
        stem = path.name.removesuffix(".mustache.j2")
        if stem in SEMANTIC_ONLY and not embedding:
            continue
        source = render(f"templates/search/{path.name}", variables, shared=frozenset(variables))
        out.append(Artifact("script", names.script(stem),
                            {"script": {"lang": "mustache", "source": source, "options": MUSTACHE_OPTIONS}},
                            _digest(source)))
        if stem == "recall" and embedding:  # the kNN leg: the same filters and fusion, kNN similarity as relevance
            source = render(f"templates/search/{path.name}", {**variables, "leg": "knn"}, shared=frozenset(variables))
            out.append(Artifact("script", names.script(KNN_TEMPLATE),
                                {"script": {"lang": "mustache", "source": source, "options": MUSTACHE_OPTIONS}},
                                _digest(source)))
    return out


KNN_TEMPLATE = "recall_knn"
SEMANTIC_ONLY = ("unembedded", "lookup_knn")  # search templates only an index with vectors needs


def _flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    """Settings as dotted keys with string values: how the engine echoes them back."""
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
    elif isinstance(obj, list):
        out[prefix] = json.dumps([_flatten(v) if isinstance(v, dict) else str(v) for v in obj], sort_keys=True)
    else:
        out[prefix] = str(obj).lower() if isinstance(obj, bool) else str(obj)
    return out


def _installed_template(engine: Engine, name: str) -> dict[str, Any] | None:
    try:
        resp = engine.request("GET", f"/_index_template/{name}")
    except NotFound:
        return None
    found = resp.get("index_templates") or []
    return found[0]["index_template"] if found else None


def _same_template(installed: dict[str, Any], wanted: dict[str, Any]) -> bool:
    got, want = installed.get("template", {}), wanted["template"]
    return (_flatten(got.get("settings", {})) == _flatten(want["settings"])
            and _digest(got.get("mappings", {})) == _digest(want["mappings"])
            and installed.get("index_patterns") == wanted["index_patterns"])


def installed_script(engine: Engine, name: str) -> str | None:
    """The source of a stored script or search template, or None when it is not there."""
    try:
        resp = engine.request("GET", f"/_scripts/{name}")
    except NotFound:
        return None
    if not resp.get("found", True) or "script" not in resp:
        return None
    source: str = resp["script"]["source"]
    return source


def current_index(engine: Engine, prefix: str) -> str | None:
    """The concrete index behind the alias, or None before install."""
    try:
        alias = Names(prefix).alias  # index in the path: a confined agent may only ask about its alias
        resp = engine.request("GET", f"/{alias}/_alias/{alias}")
    except NotFound:
        return None
    return sorted(resp)[-1] if resp else None


REINDEX_BATCH = 1000  # documents per scroll batch of a migration's reindex


def _reindex(engine: Engine, body: Mapping[str, Any]) -> None:
    """Run a reindex as a task and wait for its result, refusing one that failed anywhere (the alias
    then stays on the old index). Not in one call: OpenSearch answers a synchronous reindex with one
    TASK_RESOURCE_USAGE header per batch, and an HTTP client refuses more than 100 headers (Python's
    http.client does; the client then sends the reindex again)."""
    task = engine.request("POST", "/_reindex", dict(body), {"wait_for_completion": "false", "refresh": "true"})["task"]
    while not (status := engine.request("GET", f"/_tasks/{task}")).get("completed"):
        time.sleep(0.2)
    failures = status.get("error") or status.get("response", {}).get("failures")
    if failures:
        raise EngineError(f"the migration's reindex failed, the alias stays on the old index: {failures!r:.500}")


def install(engine: Engine, prefix: str, defaults: TemplateDefaults, *, migrate: bool = False, shards: int = 1,
            replicas: int = 0, embedding: Mapping[str, Any] | None | Keep = KEEP) -> InstallReport:
    """PUT what is missing or different; create the versioned index + alias if missing. `defaults`
    (rendered from a ranking policy) become the defaults of the stored templates.
    `embedding` ({"name", "dimensions"}; None = lexical only; default: keep the live index's) sizes
    the vector field; changing it is a mapping change (`migrate`), which drops the old vectors:
    re-embed them with `esmem embed` (esmem.hybrid.reembed)."""
    report = InstallReport()
    names = Names(prefix)
    index_digest = ""
    old_embedding = installed_embedding(engine, prefix)
    embedding = old_embedding if embedding == KEEP else (dict(embedding) if embedding else None)
    for art in artifacts(engine, prefix, defaults, shards, replicas, embedding=embedding):
        if art.kind == "index_template":
            index_digest = art.digest
            installed = _installed_template(engine, art.name)
            if installed is not None and _same_template(installed, art.body):
                report.unchanged.append(f"index template {art.name}")
                continue
            engine.request("PUT", f"/_index_template/{art.name}", art.body)
            (report.updated if installed is not None else report.created).append(f"index template {art.name}")
        else:
            installed_source = installed_script(engine, art.name)
            if installed_source == art.body["script"]["source"]:
                report.unchanged.append(f"script {art.name}")
                continue
            engine.request("PUT", f"/_scripts/{art.name}", art.body)
            (report.updated if installed_source is not None else report.created).append(f"script {art.name}")

    wanted_index = names.index(index_digest)
    live = current_index(engine, prefix)
    if live is None:
        engine.request("PUT", f"/{wanted_index}", {"aliases": {names.alias: {"is_write_index": True}}})
        moved(engine, names.alias)
        report.created.append(f"index {wanted_index} (alias {names.alias})")
    elif live == wanted_index:
        report.unchanged.append(f"index {live}")
    elif migrate:
        engine.request("PUT", f"/{wanted_index}", {})
        reindex: dict[str, Any] = {"source": {"index": live, "size": REINDEX_BATCH}, "dest": {"index": wanted_index}}
        if embedding != old_embedding:  # vectors of another model (or size) cannot be kept
            reindex["script"] = {"lang": "painless", "source": "ctx._source.remove('embedding')"}
            if embedding:
                report.notes.append(f"vectors dropped (new embedder {embedding['name']}): run `esmem embed`")
        elif embedding:  # the same model's vectors are kept, as the new mapping stores them (bytes)
            reindex["script"] = {"lang": "painless",
                                 "source": (assets_root() / "painless/migrate/quantize_embedding.painless").read_text()}
        _reindex(engine, reindex)
        engine.request("POST", "/_aliases", {"actions": [
            {"remove": {"index": live, "alias": names.alias}},
            {"add": {"index": wanted_index, "alias": names.alias, "is_write_index": True}}]})
        moved(engine, names.alias)
        report.created.append(f"index {wanted_index} (migrated from {live}, alias swapped)")
    else:
        report.notes.append(f"index {live} was built from another mapping than the repo's; "
                            f"run `esmem install --migrate` to reindex into {wanted_index}")
    return report


def check(engine: Engine, prefix: str, defaults: TemplateDefaults, *,
          embedding: Mapping[str, Any] | None | Keep = KEEP) -> list[str]:
    """What differs between the cluster and the repo rendered with the policy's `defaults`, one line
    per artifact ([] = no drift).

    Shards and replicas are the installer's choice (`install --shards/--replicas`), not drift: the
    repo's template is rendered with the installed ones."""
    drift: list[str] = []
    names = Names(prefix)
    index_digest = ""
    wanted_mappings: dict[str, Any] = {}
    topology = (_installed_template(engine, names.index_template) or {}).get("template", {}).get("settings", {})
    topology = _flatten(topology)
    shards = int(topology.get("index.number_of_shards", 1))
    replicas = int(topology.get("index.number_of_replicas", 0))
    for art in artifacts(engine, prefix, defaults, shards, replicas, embedding=_embedding(engine, prefix, embedding)):
        if art.kind == "index_template":
            index_digest, wanted_mappings = art.digest, art.body["template"]["mappings"]
            installed = _installed_template(engine, art.name)
            if installed is None:
                drift.append(f"index template {art.name}: missing")
            elif not _same_template(installed, art.body):
                drift.append(f"index template {art.name}: differs from templates/index_template.json.j2")
            continue
        source = installed_script(engine, art.name)
        if source is None:
            drift.append(f"script {art.name}: missing")
        elif _digest(source) != art.digest:
            drift.append(f"script {art.name}: content hash {_digest(source)[:12]} != repo {art.digest[:12]}")
    live = current_index(engine, prefix)
    if live is None:
        drift.append(f"index {names.alias}: missing")
    else:
        if live != names.index(index_digest):
            drift.append(f"index {live}: built from another mapping (repo wants {names.index(index_digest)})")
        mappings = engine.request("GET", f"/{live}/_mapping")[live]["mappings"]
        if _digest(mappings) != _digest(wanted_mappings):
            drift.append(f"index {live}: live mapping differs from the repo's")
    return drift


def require_installed(engine: Engine, prefix: str) -> str:
    """The alias to use; raise NotInstalled when `esmem install` has not run."""
    if current_index(engine, prefix) is None:
        raise NotInstalled(f"no esmem index under prefix '{prefix}' at {engine.url}: run `esmem install`")
    return Names(prefix).alias


def uninstall(engine: Engine, prefix: str, *, delete_data: bool = True) -> list[str]:
    """Delete what `install` puts under `prefix` (never another prefix's): stored scripts, search
    templates, the index template and, only with `delete_data`, the data index, its alias and the
    erase audit index.
    Names come from the asset file names, not from rendering them, so removal works even for a
    broken template. Idempotent; returns what it removed."""
    names = Names(prefix)
    removed: list[str] = []
    if delete_data:
        for row in engine.request("GET", f"/_cat/indices/{names.alias}-*", params={"format": "json", "h": "index"}):
            engine.request("DELETE", f"/{row['index']}")
            moved(engine, names.alias)
            removed.append(f"index {row['index']} (alias {names.alias})")
        try:
            engine.request("DELETE", f"/{names.audit}")
            removed.append(f"index {names.audit}")
        except NotFound:
            pass
    root = assets_root()
    stems = [p.stem for p in (root / "painless").glob("*.painless")] + \
        [p.name.removesuffix(".mustache.j2") for p in (root / "templates" / "search").glob("*.mustache.j2")] + \
        [KNN_TEMPLATE]
    targets = [(f"/_index_template/{names.index_template}", f"index template {names.index_template}")] + \
        [(f"/_scripts/{names.script(s)}", f"script {names.script(s)}") for s in sorted(stems)]
    for path, label in targets:
        try:
            engine.request("DELETE", path)
            removed.append(label)
        except NotFound:
            pass
    return removed
