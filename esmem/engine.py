"""The engine adapter: the only module that knows which official client talks to the cluster.

Elasticsearch 8/9 go through `elasticsearch` (which refuses OpenSearch by design), OpenSearch 2/3
through `opensearch-py`. Everything else in esmem speaks REST paths and JSON bodies through
`Engine.request`, so one code path serves both families.
"""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .errors import EngineError, EngineUnavailable, NotFound, UnsupportedEngine, VersionConflict

# The clients log every 404 as a warning; esmem maps errors itself (NotFound is often expected).
for _name in ("opensearch", "elastic_transport.transport"):
    logging.getLogger(_name).setLevel(logging.ERROR)

Recorder = Callable[[str, str, Any, dict[str, Any] | None], None]


@dataclass(frozen=True)
class EngineInfo:
    """What `GET /` said: family ("opensearch" | "elasticsearch") and version."""

    family: str
    version: str
    lucene: str = ""

    #: BM25's k1, as the index template sets it (templates/index_template.json.j2 renders this value).
    K1 = 1.2

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def bm25_boost(self) -> float:
        """What makes BM25 scores equal across Lucene majors: Lucene 10 (OpenSearch 3, Elasticsearch 9)
        dropped the constant (k1 + 1) factor of every term's score, which Lucene 9 (OpenSearch 2,
        Elasticsearch 8) keeps. esmem's thresholds (merge min_bm25) and saturation are calibrated on the
        Lucene 9 scale, so the templates boost the lexical clauses by k1 + 1 on Lucene 10."""
        major = self.lucene.split(".")[0]
        return round(self.K1 + 1, 6) if major.isdigit() and int(major) >= 10 else 1.0

    def __str__(self) -> str:
        return f"{self.family} {self.version}"


def detect(url: str, timeout: float = 5.0) -> EngineInfo:
    """Ask `GET /` which engine answers at `url`; refuse the ones esmem does not support."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/", timeout=timeout) as resp:
            root = json.load(resp)
    except urllib.error.HTTPError as e:
        raise EngineUnavailable(f"{url} answered HTTP {e.code} to GET /", status=e.code) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise EngineUnavailable(f"no engine answers at {url} ({reason})") from None
    version = root.get("version") or {}
    number = str(version.get("number", ""))
    family = "opensearch" if version.get("distribution") == "opensearch" else "elasticsearch"
    if not number or not number.split(".")[0].isdigit():
        raise UnsupportedEngine(f"{url} does not look like Elasticsearch or OpenSearch (GET / gave no version)")
    info = EngineInfo(family, number, str(version.get("lucene_version", "")))
    supported = {"opensearch": (2, 3), "elasticsearch": (8, 9)}[family]
    if info.major not in supported:
        raise UnsupportedEngine(
            f"{info} is not supported (esmem needs OpenSearch 2.x/3.x or Elasticsearch 8.x/9.x)")
    return info


class Engine:
    """A connected cluster: `request()` plus the few typed calls esmem needs."""

    def __init__(self, url: str, *, timeout: float = 30.0, recorder: Recorder | None = None):
        self.url = url.rstrip("/")
        self.info = detect(self.url)
        self.recorder = recorder
        if self.info.family == "opensearch":
            from opensearchpy import OpenSearch

            self._client = OpenSearch(self.url, timeout=timeout, http_compress=False, pool_maxsize=32)
            self._send = self._send_opensearch
        else:
            from elasticsearch import Elasticsearch

            self._client = Elasticsearch(self.url, request_timeout=timeout, connections_per_node=32)
            self._send = self._send_elasticsearch

    # -- transport ---------------------------------------------------------------------------
    def _send_opensearch(self, method: str, path: str, body: Any, params: dict | None, headers: dict) -> Any:
        # opensearch-py: `params` are URL parameters; request bodies (template params too) go in `body`.
        return self._client.transport.perform_request(method, path, params=params or None, body=body,
                                                      headers=headers)

    def _send_elasticsearch(self, method: str, path: str, body: Any, params: dict | None, headers: dict) -> Any:
        if params:
            from urllib.parse import urlencode

            path = f"{path}?{urlencode({k: _param(v) for k, v in params.items()})}"
        resp = self._client.perform_request(method, path, body=body, headers=headers)
        return resp.body

    def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        """Send one REST call; map client errors onto esmem's error types."""
        if self.recorder:
            self.recorder(method, path, body, params)
        headers = {"accept": "application/json"}
        if isinstance(body, str):
            headers["content-type"] = "application/x-ndjson"
        elif body is not None:
            headers["content-type"] = "application/json"
        try:
            return self._send(method, path, body, params, headers)
        except Exception as e:  # both clients: map by status code / connection failure
            raise _map_error(e, method, path) from None

    # -- typed helpers -----------------------------------------------------------------------
    def bulk(self, lines: Iterable[dict[str, Any]], *, refresh: str | None = None) -> dict[str, Any]:
        """`_bulk` with NDJSON built from action/source dicts; callers read the per-item results."""
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        params = {"refresh": refresh} if refresh else None
        return self.request("POST", "/_bulk", payload, params)

    def close(self) -> None:
        self._client.close()


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _map_error(e: Exception, method: str, path: str) -> Exception:
    status = getattr(e, "status_code", None) or getattr(getattr(e, "meta", None), "status", None)
    body = getattr(e, "info", None) or getattr(e, "body", None)
    if status is None or not isinstance(status, int):
        name = type(e).__name__
        if "Connection" in name or "Timeout" in name or isinstance(e, OSError):
            return EngineUnavailable(f"engine unreachable during {method} {path}: {e}")
        return EngineError(f"{method} {path} failed: {e}")
    reason = _reason(body) or str(e)
    if status == 404:
        return NotFound(f"{method} {path}: not found ({reason})", status, body)
    if status == 409:
        return VersionConflict(f"{method} {path}: version conflict ({reason})", status, body)
    return EngineError(f"{method} {path}: HTTP {status}: {reason}", status, body)


def _reason(body: Any) -> str | None:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            root = (err.get("root_cause") or [{}])[0]
            caused = err.get("caused_by") or {}
            parts = [err.get("type"), err.get("reason"), caused.get("reason"),
                     root.get("reason") if root.get("reason") != err.get("reason") else None]
            return ": ".join(str(p) for p in parts if p)
        if isinstance(err, str):
            return err
    if isinstance(body, str):
        return body[:300]
    return None
