"""The memory inspector (`esmem ui`, or mounted by `esmem serve --ui`): server-rendered pages over a MemoryStore.

Pages: namespaces, a namespace's memories (filters, search_after paging), the recall playground (the
same explanation `esmem explain --json` prints, drawn as a stacked bar per hit), a memory with its
version chain, merge review and stats. Read-only unless `allow_writes`: then restore, forget and the
review verdicts, each a POST form carrying the process's CSRF token and checked to come from the
inspector's own origin.

Safe by construction: Jinja2 escapes every value (autoescape), the Content-Security-Policy allows no
script at all, the namespace of every request is checked on the server against the namespaces the
credentials see (and the `namespaces` or API key it was started with): another one is a 404 page,
whether it exists or not. Pages and logs carry no credential.
"""
from __future__ import annotations

import base64
import hmac
import json
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import parse_qs, urlencode

import jinja2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException

from esmem.apps.api_keys import ApiKey, Keyring
from esmem.apps.explained import memory_json, result_json
from esmem.apps.plots import AGES_DAYS, decay_curves
from esmem.apps.stats import AGE_LABELS, collect
from esmem.domain import pairs
from esmem.domain.ranking import params_from_strings
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory
from esmem.errors import EngineUnavailable, EsmemError, InvalidInput, NotFound, NotInstalled
from esmem.index.catalog import Search
from esmem.values import KINDS, check_namespace, epoch_ms, iso

PAGE_SIZE = 50
STATUSES = ("active", "superseded", "retired")
SESSION_COOKIE = "esmem_ui"
# No script at all; styles inline (the pages' own <style> and the bars' widths); forms post to the inspector only.
HEADERS = {"content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                                      "frame-ancestors 'none'; base-uri 'none'",
           "x-content-type-options": "nosniff", "referrer-policy": "same-origin", "x-frame-options": "DENY",
           "cache-control": "no-store"}
FACTORS = (("rel", "relevance"), ("answer", "answer"), ("recency", "recency"), ("importance_part", "importance"),
           ("reheat", "reheat"), ("mmr_penalty", "MMR penalty"))
_AGE_BOUNDS = (None, timedelta(hours=1), timedelta(days=1), timedelta(days=7), timedelta(days=30),
               timedelta(days=90), timedelta(days=365))  # AGE_LABELS' lower ends: the ages `esmem stats` uses


@dataclass(frozen=True)
class NamespaceRow:
    """One namespace of the first page: counts per status and kind, characters of content, last write."""

    name: str
    by_status: Mapping[str, int]
    kinds: Mapping[str, int]
    chars: int
    last_write: str | None


@dataclass(frozen=True)
class Page:
    """One page of a namespace's memories: the matches counted, and the cursor of the next page."""

    memories: list[Memory]
    total: int
    after: str | None


def overview(store: MemoryStore) -> list[NamespaceRow]:
    """Every namespace the store's credentials see, in one aggregation (stored `overview`)."""
    store.flush()
    store.catalog.refresh()
    buckets = store.catalog.search(Search("overview", {}))["aggregations"]["ns"]["buckets"]
    return [NamespaceRow(b["key"], {s["key"]: s["doc_count"] for s in b["status"]["buckets"]},
                         {k["key"]: k["doc_count"] for k in b["kinds"]["buckets"]}, int(b["chars"]["value"] or 0),
                         _newest(b["last_write"]["hits"]["hits"])) for b in buckets]


def _newest(hits: Sequence[Mapping[str, Any]]) -> str | None:
    return hits[0]["_source"].get("recorded_at") if hits else None


def _cursor(sort: Sequence[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(sort)).encode()).decode().rstrip("=")


def _uncursor(text: str) -> list[Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        raise InvalidInput("after: not a cursor of this list") from None
    if not isinstance(value, list) or not 1 <= len(value) <= 3 or \
            not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        raise InvalidInput("after: not a cursor of this list")
    return value


def browse(store: MemoryStore, namespace: str, *, kind: str = "", status: str = "", min_importance: float = 0,
           text: str = "", after: str = "", size: int = PAGE_SIZE) -> Page:
    """A page of memories, newest first, filtered; `after`: the cursor the previous page gave (search_after)."""
    if kind and kind not in KINDS:
        raise InvalidInput(f"unknown kind {kind!r}")
    if status and status not in STATUSES:
        raise InvalidInput(f"unknown status {status!r}")
    if not 0 <= min_importance <= 10:
        raise InvalidInput("min importance must be in 0..10")
    params: dict[str, Any] = {"namespace": namespace, "size": size + 1}  # one more: is there a next page?
    params.update({k: v for k, v in (("kind", kind), ("status", status), ("text", text.strip()),
                                     ("min_importance", min_importance)) if v})
    if after:
        params.update(paged=True, after=_uncursor(after))
    store.flush()
    resp = store.catalog.search(Search("browse", params, routing=namespace))["hits"]
    hits = resp["hits"][:size]
    return Page([Memory.from_hit(h["_id"], h["_source"]) for h in hits], int(resp["total"]["value"]),
                _cursor(hits[-1]["sort"]) if len(resp["hits"]) > size else None)


def ages(store: MemoryStore, namespace: str, now: datetime,
         months: int = 12) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Active memories per kind and age bucket (the labels of `esmem stats`), and the memories superseded
    in each of the last `months` calendar months (by invalid_at)."""
    age_ranges = []
    for label, young, old in zip(AGE_LABELS, _AGE_BOUNDS, (*_AGE_BOUNDS[1:], None)):
        r: dict[str, Any] = {"key": label}
        if young is not None:
            r["to"] = epoch_ms(now - young)
        if old is not None:
            r["from"] = epoch_ms(now - old)
        age_ranges.append(r)
    starts = [datetime(now.year, now.month, 1, tzinfo=timezone.utc)]
    for _ in range(months - 1):
        before = starts[-1] - timedelta(days=1)
        starts.append(datetime(before.year, before.month, 1, tzinfo=timezone.utc))
    starts.reverse()
    months_of = [(f"{a:%Y-%m}", a, b) for a, b in zip(starts, [*starts[1:], None])]
    month_ranges = [{"key": key, "from": epoch_ms(a), **({"to": epoch_ms(b)} if b else {})} for key, a, b in months_of]
    store.flush()
    store.catalog.refresh()
    aggs = store.catalog.search(Search("ages", {"namespace": namespace, "ages": age_ranges, "months": month_ranges},
                                       routing=namespace))["aggregations"]
    by_kind = {k["key"]: {label: k["age"]["buckets"][label]["doc_count"] for label in AGE_LABELS}
               for k in aggs["active"]["kinds"]["buckets"]}
    per_month = aggs["superseded"]["month"]["buckets"]
    return by_kind, {key: per_month[key]["doc_count"] for key, _, _ in months_of}


def chain_links(versions: Sequence[Memory]) -> dict[str, dict[str, Any]]:
    """For each version superseded by another of the chain: the pair reading of the two texts (the
    merge decision's lexical scores, read again now), keyed by the older version's id."""
    by_id = {m.id: m for m in versions}
    out = {}
    for m in versions:
        newer = by_id.get(m.superseded_by or "")
        if newer is not None:
            r = pairs.read(m.content, newer.content, newer.kind)
            out[m.id] = {"newer": newer.id, "verdict": r.verdict, "why": r.why, "overlap": r.overlap,
                         "jaccard": r.jaccard}
    return out


def segments(item: Mapping[str, Any], width: float = 320) -> list[dict[str, Any]]:
    """The stacked bar of one explained hit: each factor a segment as wide as its share of the factors' sum."""
    values = [(key, label, float(item[key])) for key, label in FACTORS]
    total = sum(abs(v) for _, _, v in values) or 1.0
    x, out = 0.0, []
    for key, label, v in values:
        w = abs(v) / total * width
        out.append({"key": key, "label": label, "value": v, "x": x, "width": w})
        x += w
    return out


def decay_paths(store: MemoryStore, width: int = 600, height: int = 200) -> list[dict[str, Any]]:
    """The decay curve of each kind under the policy that ranks, as SVG polyline points (a year of age)."""
    params = store.ranking_params()
    out = []
    for kind, ys in decay_curves(params).items():
        hl = params.half_life_of(kind)
        pts = " ".join(f"{age / AGES_DAYS[-1] * width:.1f},{(1 - y) * height:.1f}"
                       for age, y in zip(AGES_DAYS[::4], ys[::4]))
        out.append({"kind": kind, "points": pts, "half_life": "no decay" if hl is None else f"{hl.days}d"})
    return out


def _field(value: Any) -> str:
    """A stored field as a person reads it: lists comma-separated, mappings as JSON."""
    if isinstance(value, (list, tuple)):
        return ", ".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)


class Gate:
    """Who may see which namespace: the namespaces the store's credentials see, narrowed to `namespaces`
    (None: all of them) and, with a keyring (mounted by `esmem serve`), to the signed-in API key's."""

    def __init__(self, namespaces: Sequence[str] | None, keys: Keyring | None):
        self.namespaces = frozenset(check_namespace(n) for n in namespaces) if namespaces else None
        self.keys = keys
        self._sessions: dict[str, ApiKey] = {}
        self._lock = threading.Lock()

    def sign_in(self, token: str) -> str | None:
        """A session id for a valid API key (the key itself never goes back to the browser)."""
        key = self.keys.find(token) if self.keys else None
        if key is None:
            return None
        session = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[session] = key
        return session

    def key(self, request: Request) -> ApiKey | None:
        return self._sessions.get(request.cookies.get(SESSION_COOKIE, ""))

    def allows(self, request: Request, namespace: str) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        if self.keys is not None:
            key = self.key(request)
            return key is not None and key.allows(namespace)
        return True


def create_ui(make_store: Callable[[], MemoryStore], *, allow_writes: bool = False,
              namespaces: Sequence[str] | None = None, keys: Keyring | None = None) -> FastAPI:
    """The inspector over the stores `make_store` builds (one per worker thread). `keys`: sign in with an
    API key of `esmem serve` (its namespaces only); `namespaces`: show only these."""
    app = FastAPI(title="esmem inspector", docs_url=None, redoc_url=None, openapi_url=None)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "ui"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["iso"] = lambda t: iso(t)[:19].replace("T", " ") if t else ""
    env.filters["field"] = _field
    csrf = secrets.token_urlsafe(32)
    gate = Gate(namespaces, keys)
    local = threading.local()

    def store() -> MemoryStore:
        if not hasattr(local, "store"):
            local.store = make_store()
        mine: MemoryStore = local.store  # this thread's
        return mine

    def page(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = env.get_template(template).render(base=request.scope.get("root_path", ""), csrf=csrf,
                                                 writes=allow_writes, **values)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def checked(request: Request, name: str) -> str:
        """The namespace of a request, checked on the server: valid, allowed, and one the credentials see."""
        if keys is not None and gate.key(request) is None:
            raise HTTPException(401, "sign in with an API key of this server")
        check_namespace(name)
        if not gate.allows(request, name) or name not in store().recaller.namespaces():
            raise HTTPException(404, f"no namespace {name!r} here")
        return name

    async def form(request: Request, *, writes: bool = True) -> dict[str, str]:
        """The fields of a POST form, once it is known to come from an inspector page of this process."""
        if writes and not allow_writes:
            raise HTTPException(403, "the inspector is read-only (start it with --allow-writes)")
        origin = f"{request.url.scheme}://{request.headers.get('host', '')}"
        sent = request.headers.get("origin") or request.headers.get("referer") or ""
        if request.headers.get("sec-fetch-site", "same-origin") != "same-origin" or \
                not (sent == origin or sent.startswith(origin + "/")):
            raise HTTPException(403, "a form from another site")
        fields = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        if not hmac.compare_digest(fields.get("csrf", ""), csrf):
            raise HTTPException(403, "the form's token does not match (reload the page)")
        return fields

    @app.exception_handler(HTTPException)
    async def refused(request: Request, e: HTTPException) -> Response:
        if e.status_code == 401:
            return RedirectResponse(f"{request.scope.get('root_path', '')}/login", 303, headers=HEADERS)
        return page(request, "error.html", e.status_code, message=str(e.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> Response:
        first = (e.errors() or [{}])[0]
        return page(request, "error.html", 400, message=f"{'.'.join(map(str, first.get('loc', ())[1:]))}: "
                                                        f"{first.get('msg', 'invalid value')}")

    @app.exception_handler(EsmemError)
    async def failed(request: Request, e: EsmemError) -> Response:
        """The caller's mistakes are told as they are; the engine's failures only by kind (no URL or detail)."""
        if isinstance(e, (InvalidInput, NotFound)):
            return page(request, "error.html", 400 if isinstance(e, InvalidInput) else 404,
                        message=(str(e).splitlines() or [type(e).__name__])[0])
        unavailable = isinstance(e, (NotInstalled, EngineUnavailable))
        return page(request, "error.html", 503 if unavailable else 502,
                    message="the engine is unreachable or esmem is not installed under this prefix" if unavailable
                    else "the engine refused the request (see the engine's log)")

    @app.get("/", response_class=HTMLResponse)
    def namespaces_page(request: Request) -> Response:
        if keys is not None and gate.key(request) is None:
            raise HTTPException(401, "sign in")
        rows = [r for r in overview(store()) if gate.allows(request, r.name)]
        return page(request, "namespaces.html", rows=rows)

    @app.get("/ns/{namespace}", response_class=HTMLResponse)
    def memories_page(request: Request, namespace: str, kind: str = "", status: str = "", min_importance: float = 0,
                      text: str = "", after: str = "") -> Response:
        ns = checked(request, namespace)
        filters = {"kind": kind, "status": status, "min_importance": min_importance or "", "text": text}
        found = browse(store(), ns, kind=kind, status=status, min_importance=min_importance, text=text, after=after)
        more = urlencode({**{k: v for k, v in filters.items() if v}, "after": found.after}) if found.after else None
        return page(request, "memories.html", ns=ns, page=found, filters=filters, kinds=KINDS, statuses=STATUSES,
                    more=more)

    @app.get("/ns/{namespace}/recall", response_class=HTMLResponse)
    def recall_page(request: Request, namespace: str, q: str = "", now: str = "", as_of: str = "", k: int = 5,
                    knobs: str = "") -> Response:
        ns = checked(request, namespace)
        s = store()
        result = None
        base_params = s.installed_params()
        if q.strip():
            sets = dict(line.split("=", 1) for line in knobs.splitlines() if line.strip() and "=" in line)
            if any(line.strip() and "=" not in line for line in knobs.splitlines()):
                raise InvalidInput("each knob is one key=value line")
            params = params_from_strings(base_params, {a.strip(): b.strip() for a, b in sets.items()}) if sets else None
            res = s.recall(q, ns, k, params=params, now=now or None, as_of=as_of or None, touch=False, explain=True)
            result = result_json(res)
            for item in result["items"]:
                item["segments"] = segments(item)
            result["mode"] = res.params.mode
        return page(request, "recall.html", ns=ns, form={"q": q, "now": now, "as_of": as_of, "k": k, "knobs": knobs},
                    result=result, factors=FACTORS, policy=base_params.as_dict())

    @app.get("/ns/{namespace}/m/{memory_id}", response_class=HTMLResponse)
    def memory_page(request: Request, namespace: str, memory_id: str) -> Response:
        ns = checked(request, namespace)
        s = store()
        memory = s.get(ns, memory_id)
        versions = s.history(ns, memory_id)
        return page(request, "memory.html", ns=ns, memory=memory, fields=memory_json(memory), versions=versions,
                    links=chain_links(versions))

    @app.post("/ns/{namespace}/m/{memory_id}/{action}")
    async def memory_write(request: Request, namespace: str, memory_id: str, action: str) -> Response:
        fields = await form(request)
        ns = checked(request, namespace)
        if action == "restore":
            store().restore(ns, memory_id)
        elif action == "forget":
            store().forget(ns, memory_id, reason=fields.get("reason") or None)
        else:
            raise HTTPException(404, "no such action")
        return RedirectResponse(f"{request.scope.get('root_path', '')}/ns/{ns}/m/{memory_id}", 303, headers=HEADERS)

    @app.get("/ns/{namespace}/review", response_class=HTMLResponse)
    def review_page(request: Request, namespace: str) -> Response:
        ns = checked(request, namespace)
        return page(request, "review.html", ns=ns, pending=store().review(ns))

    @app.post("/ns/{namespace}/review")
    async def review_write(request: Request, namespace: str) -> Response:
        fields = await form(request)
        ns = checked(request, namespace)
        store().settle(ns, fields.get("older", ""), fields.get("newer", ""), fields.get("verdict", ""))
        return RedirectResponse(f"{request.scope.get('root_path', '')}/ns/{ns}/review", 303, headers=HEADERS)

    @app.get("/ns/{namespace}/stats", response_class=HTMLResponse)
    def stats_page(request: Request, namespace: str) -> Response:
        ns = checked(request, namespace)
        s = store()
        by_kind, months = ages(s, ns, s.clock())
        peak = max([v for counts in by_kind.values() for v in counts.values()] + [1])
        return page(request, "stats.html", ns=ns, stats=collect(s, ns), ages=by_kind, labels=AGE_LABELS, peak=peak,
                    months=months, month_peak=max([*months.values(), 1]), curves=decay_paths(s))

    if keys is not None:
        @app.get("/login", response_class=HTMLResponse)
        def login_page(request: Request) -> Response:
            return page(request, "login.html", failed=False)

        @app.post("/login")
        async def login(request: Request) -> Response:
            session = gate.sign_in((await form(request, writes=False)).get("key", ""))
            if session is None:
                return page(request, "login.html", 401, failed=True)
            back = RedirectResponse(f"{request.scope.get('root_path', '')}/", 303, headers=HEADERS)
            back.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path=request.scope.get("root_path", "") or "/")
            return back

    return app
