"""Install esmem with a ranking policy, and read the installed policy back.

The index layer (esmem.index.install) puts the artifacts; the defaults it renders into the stored
templates come from here: a policy's RecallParams, the merge look-up size and the fusion modes.
The stored `recall` template is the record of what was installed: `installed_policy` renders it
and parses the defaults back.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Mapping

from esmem.domain import derived
from esmem.domain.fusion import MODES
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import CLIENT_KNOBS, RecallParams, default_values, template_variables
from esmem.errors import NotInstalled
from esmem.index import install as index
from esmem.index.catalog import Catalog
from esmem.index.engine import Engine
from esmem.index.install import KEEP, Artifact, InstallReport, Keep, Names, TemplateDefaults, installed_script
from esmem.values import KINDS


def template_defaults(params: RecallParams | None = None, evergreen_kinds: tuple[str, ...] = ()) -> TemplateDefaults:
    """The defaults a policy (`params`, default esmem's) renders into the stored templates."""
    return TemplateDefaults({"lookup_size": MergePolicy().candidates,
                             **template_variables(params or RecallParams(), evergreen_kinds)}, MODES)


def search_variables(prefix: str, params: RecallParams | None = None,
                     evergreen_kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the search templates are rendered with: the prefix and the ranking policy's defaults."""
    return index.search_variables(prefix, template_defaults(params, evergreen_kinds))


def artifacts(engine: Engine, prefix: str, shards: int = 1, replicas: int = 0, *,
              params: RecallParams | None = None, evergreen_kinds: tuple[str, ...] = (),
              embedding: Mapping[str, Any] | None = None) -> list[Artifact]:
    """Everything `install` puts, rendered from the repo's files and the ranking policy."""
    return index.artifacts(engine, prefix, template_defaults(params, evergreen_kinds), shards, replicas,
                           embedding=embedding)


def install(engine: Engine, prefix: str = "esmem", *, migrate: bool = False, shards: int = 1, replicas: int = 0,
            params: RecallParams | None = None, evergreen_kinds: tuple[str, ...] = (),
            embedding: Mapping[str, Any] | None | Keep = KEEP) -> InstallReport:
    """PUT what is missing or different; create the versioned index + alias if missing. `params`
    (a policy's RecallParams, default esmem's) become the defaults of the stored templates.
    `embedding` ({"name", "dimensions"}; None = lexical only; default: keep the live index's) sizes
    the vector field; changing it is a mapping change (`migrate`), which drops the old vectors:
    re-embed them with `esmem embed` (esmem.hybrid.reembed). With `migrate`, memories written before
    a field the writer derives from their content get it (esmem.domain.derived.fill)."""
    report = index.install(engine, prefix, template_defaults(params, evergreen_kinds), migrate=migrate,
                           shards=shards, replicas=replicas, embedding=embedding)
    if migrate:
        filled = derived.fill(Catalog(engine, prefix))
        if filled:
            report.notes.append(f"derived fields (asks, tells_time) written for {filled} memories written before them")
    return report


def check(engine: Engine, prefix: str = "esmem", *, params: RecallParams | None = None,
          evergreen_kinds: tuple[str, ...] = (), embedding: Mapping[str, Any] | None | Keep = KEEP) -> list[str]:
    """What differs between the cluster and the repo rendered with the policy (`params`, default
    esmem's), one line per installed default that differs and one per artifact ([] = no drift)."""
    drift: list[str] = []
    if installed_script(engine, Names(prefix).script("recall")) is not None:
        drift += [f"default {line}" for line in policy_drift(engine, prefix, params or RecallParams(), evergreen_kinds)]
    return drift + index.check(engine, prefix, template_defaults(params, evergreen_kinds), embedding=embedding)


_CLIENT = re.compile(r"\{\{! esmem-client-defaults (\{.*?\}) \}\}")


@dataclass(frozen=True)
class InstalledPolicy:
    """The defaults the stored templates hold, read back from the cluster."""

    params: RecallParams
    evergreen_kinds: tuple[str, ...]

    def values(self) -> dict[str, str]:
        return default_values(self.params, self.evergreen_kinds)


def installed_policy(engine: Engine, prefix: str) -> InstalledPolicy:
    """Read the installed defaults: the `recall` template rendered with only namespace and query
    (what any client gets), plus the client-side knobs kept in the template's comment."""
    name = Names(prefix).script("recall")
    source = installed_script(engine, name)
    if source is None:
        raise NotInstalled(f"no search template {name} at {engine.url}: run `esmem install`")
    found = _CLIENT.search(source)
    client = json.loads(found.group(1)) if found else {}
    def rendered(**params: Any) -> dict[str, Any]:
        output: dict[str, Any] = engine.request("POST", "/_render/template", {
            "id": name, "params": {"namespace": "n", "query": "q", **params}})["template_output"]
        return output

    try:
        out = rendered()
        # must-not-miss off by default: its clause (floor, boost) is rendered only for a call that turns it on
        return _parse_rendered(out, client, None if _mnm(out) else rendered(must_not_miss=True))
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise NotInstalled(f"search template {name} is not one this esmem renders (installed by another version, "
                           f"or edited by hand): run `esmem install` ({e!r})") from None


def _fused(out: dict[str, Any]) -> dict[str, Any]:
    rescore = out.get("rescore")  # the fusion as a rescore of the relevance top-N, or of every match
    fused: dict[str, Any] = (rescore["query"]["rescore_query"]["function_score"] if rescore
                             else out["query"]["function_score"])
    return fused


def _mnm(out: dict[str, Any]) -> dict[str, Any] | None:
    """The must-not-miss clause of a rendered recall, if rendered."""
    should = _fused(out)["query"]["bool"]["should"]
    return should[1]["function_score"] if len(should) > 1 else None


def _gate_on(gate: dict[str, Any]) -> bool:
    """A flag's gate as rendered without the flag: `exists` on the namespace field (every memory) when
    the default is on, on a field no memory has when it is off."""
    field: str = gate["exists"]["field"]
    return field == "namespace"


def _parse_rendered(out: dict[str, Any], client: dict[str, Any],
                    with_mnm: dict[str, Any] | None = None) -> InstalledPolicy:
    """The policy a rendered recall holds; `with_mnm`: the same rendered with must_not_miss on, when
    the default (off) leaves the clause out."""
    rescore = out.get("rescore")
    fs = _fused(out)
    should = fs["query"]["bool"]["should"]
    # the rescore re-scores hits the first phase filtered, so only that phase carries the filters
    flt = (out["query"] if rescore else fs["query"])["bool"]["filter"]
    kinds = tuple(c["term"]["kind"] for c in flt[2]["bool"]["should"] if "term" in c)
    lexical = should[0]["bool"]["should"]  # boosted by bm25_boost
    mnm = _mnm(out) or (_mnm(with_mnm) if with_mnm else None)
    if mnm is None:
        raise ValueError("no must-not-miss clause")
    mnm_bool = mnm["query"]["constant_score"]["filter"]["bool"]
    (function,) = fs["functions"]
    script = function["script_score"]["script"]["params"]
    installed = script["hl_ms_by_kind"]
    if not set(installed) <= set(KINDS) or not all(ms > 0 for ms in installed.values()):
        raise ValueError(f"installed half-lives {installed}, expected positive milliseconds of known kinds")
    hl: dict[str, timedelta | None] = {kind: timedelta(milliseconds=installed[kind]) if kind in installed else None
                                       for kind in KINDS}
    params = RecallParams(
        mode=script["mode"], half_life=None, kind_half_lives=hl,
        w=float(script["w"]), k=float(script["k"]), c=float(script["c"]), alpha=float(script["alpha"]),
        beta=float(script["beta"]), gamma=float(script["gamma"]), question_penalty=float(script["question_penalty"]),
        period_boost=float(script.get("period_boost", 1.0)),  # installed without them: no time factors
        when_boost=float(script.get("when_boost", 1.0)),
        must_not_miss=_mnm(out) is not None and _gate_on(mnm_bool["filter"][0]),
        importance_floor=float(mnm_bool["should"][1]["range"]["importance"]["gte"]),
        must_not_miss_boost=float(mnm["functions"][0]["script_score"]["script"]["params"]["must_not_miss_boost"]),
        entity_boost=float(lexical[1]["match"]["entities.text"]["boost"]),
        neighbour_boost=float(lexical[2]["match"]["neighbours"]["boost"]),
        compound_boost=float(lexical[3]["match"]["content.joined"]["boost"]),
        min_importance=next((float(f["range"]["importance"]["gte"]) for f in flt if "importance" in f.get("range", {})),
                            1.0),  # no range: the floor, every importance passes
        window=int(out["size"]), kinds=kinds or None, rescore_window=int(rescore["window_size"]) if rescore else 0,
        include_superseded=_gate_on(flt[1]["bool"]["should"][1]),
        **{k: client[k] for k in CLIENT_KNOBS if k in client})
    return InstalledPolicy(params, tuple(client.get("evergreen_kinds", ())))


def policy_drift(engine: Engine, prefix: str, params: RecallParams, evergreen_kinds: tuple[str, ...] = ()) -> list[str]:
    """One line per installed default that differs from `params`: `w: installed 0.3, policy 0.1`."""
    try:
        got = installed_policy(engine, prefix).values()
    except NotInstalled as e:
        return [str(e)]
    want = default_values(params, evergreen_kinds)
    return [f"{k}: installed {got.get(k)}, policy {v}" for k, v in want.items() if got.get(k) != v]
