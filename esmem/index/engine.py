"""The engine adapter: the only module that knows which official client talks to the cluster.

Elasticsearch 8/9 go through `elasticsearch` (which refuses OpenSearch by design), OpenSearch 2/3
through `opensearch-py`. Everything else in esmem speaks REST paths and JSON bodies through
`Engine.request`, so one code path serves both families. Connection options (auth, TLS, Cloud ID, SigV4)
come from a `ConnectionConfig`; detection (`GET /`) goes through the same configured client as every
other call, and every error message is redacted with that config before it leaves this module.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import orjson

from esmem.index.admission import Admission
from esmem.index.connection import ConnectionConfig, redact_text
from esmem.tracing import span
from esmem.errors import (AsyncOnly, AuthenticationFailed, EngineError, EngineUnavailable, InvalidParameter, NotFound,
                          TLSFailure, UnsupportedEngine, VersionConflict)

# The clients log every 404 as a warning; esmem maps errors itself (NotFound is often expected).
for _name in ("opensearch", "elastic_transport.transport"):
    logging.getLogger(_name).setLevel(logging.ERROR)

Recorder = Callable[[str, str, Any, dict[str, Any] | None], None]


def ndjson(lines: Iterable[Any]) -> bytes:
    """An NDJSON body (`_bulk`, `_msearch`) as UTF-8 bytes. orjson: a bulk of plain writes spent
    about a tenth of its time in json.dumps."""
    return b"".join(orjson.dumps(line, option=orjson.OPT_NON_STR_KEYS) + b"\n" for line in lines)


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
        Elasticsearch 8) keeps. esmem's saturation (and any absolute score a caller compares) is calibrated
        on the Lucene 9 scale, so the templates boost the lexical clauses by k1 + 1 on Lucene 10."""
        major = self.lucene.split(".")[0]
        return round(self.K1 + 1, 6) if major.isdigit() and int(major) >= 10 else 1.0

    def __str__(self) -> str:
        return f"{self.family} {self.version}"


def detect(target: "str | ConnectionConfig", timeout: float = 5.0) -> EngineInfo:
    """Ask `GET /` which engine answers at `target` (a URL or a config); refuse the unsupported ones."""
    config = target if isinstance(target, ConnectionConfig) else ConnectionConfig(url=target)
    engine = Engine(replace(config, timeout=timeout))
    try:
        return engine.info
    finally:
        engine.close()


def _info_from_root(root: Any, where: str) -> EngineInfo:
    version = (root.get("version") if isinstance(root, dict) else None) or {}
    number = str(version.get("number", ""))
    family = "opensearch" if version.get("distribution") == "opensearch" else "elasticsearch"
    if not number or not number.split(".")[0].isdigit():
        raise UnsupportedEngine(f"{where} does not look like Elasticsearch or OpenSearch (GET / gave no version)")
    info = EngineInfo(family, number, str(version.get("lucene_version", "")))
    supported = {"opensearch": (2, 3), "elasticsearch": (8, 9)}[family]
    if info.major not in supported:
        raise UnsupportedEngine(
            f"{info} is not supported (esmem needs OpenSearch 2.x/3.x or Elasticsearch 8.x/9.x)")
    return info


class Engine:
    """A connected cluster: `request()` plus the few typed calls esmem needs."""

    def __init__(self, target: "str | ConnectionConfig", *, timeout: float | None = None,
                 recorder: Recorder | None = None, asynchronous: bool = False):
        """`target`: a URL (userinfo allowed) or a ConnectionConfig (e.g. `ConnectionConfig.from_env()`).
        `asynchronous`: over the family's async client, for `AsyncMemoryStore` (esmem/index/bridge.py).
        The config's `recalls_in_flight` limits this engine's recalls in flight (`admission`)."""
        config = target if isinstance(target, ConnectionConfig) else ConnectionConfig(url=target)
        if timeout is not None:
            config = replace(config, timeout=timeout)
        self.config: ConnectionConfig | None = config
        self.url = config.display
        self.recorder = recorder
        # Elastic Cloud IDs only mean Elasticsearch; otherwise opensearch-py asks first (it does not refuse
        # Elasticsearch the way elasticsearch-py refuses OpenSearch), then the family's own client takes over.
        self._attach(config.elasticsearch_client(asynchronous) if config.cloud_id
                     else config.opensearch_client(asynchronous))
        self.admission = Admission(config.recalls_in_flight, asynchronous=self.asynchronous)
        self._info: EngineInfo | None = None

    @classmethod
    def from_client(cls, client: Any, *, recorder: Recorder | None = None,
                    recalls_in_flight: int | None = None) -> "Engine":
        """Use a caller's configured client as is (auth, TLS, retries): `OpenSearch` or `Elasticsearch`,
        or for `AsyncMemoryStore` `AsyncOpenSearch` or `AsyncElasticsearch`."""
        self = cls.__new__(cls)
        self.config = None
        self.recorder = recorder
        self._attach(client)
        self.admission = Admission(recalls_in_flight, asynchronous=self.asynchronous)
        self.url = redact_text(_client_url(client))
        self._info = None
        return self

    @property
    def info(self) -> EngineInfo:
        """What answers (`GET /` on first use, not in the constructor): family, version, Lucene.
        Auth, TLS and support are checked here, before any other call is sent."""
        if self._info is None:
            info = self._detect()
            if info.family == "elasticsearch" and self._send == self._send_opensearch and self.config:
                self.close()
                self._attach(self.config.elasticsearch_client(self.asynchronous))
            self._info = info
        return self._info

    def _attach(self, client: Any) -> None:
        from opensearchpy import OpenSearch

        self._client = client
        self.asynchronous = _is_async(client)
        if self.asynchronous:
            from esmem.index.bridge import wait

            self._wait = wait
        if isinstance(client, OpenSearch) or self.asynchronous and type(client).__module__.startswith("opensearchpy"):
            self._send = self._send_opensearch
            return
        from elasticsearch import AsyncElasticsearch, Elasticsearch

        if not isinstance(client, (Elasticsearch, AsyncElasticsearch)):
            raise TypeError(f"expected an opensearchpy.OpenSearch or elasticsearch.Elasticsearch client (or its "
                            f"async one), got {type(client)}")
        self._send = self._send_elasticsearch

    def _detect(self) -> EngineInfo:
        try:
            root = self._call("GET", "/")  # not recorded: recorders see what esmem does, not the handshake
        except (TLSFailure, AuthenticationFailed):
            raise
        except EngineUnavailable as e:
            raise EngineUnavailable(f"no engine answers at {self.url} ({e.reason})") from None
        except EngineError as e:
            if e.status is None:
                raise
            raise EngineUnavailable(f"{self.url} answered HTTP {e.status} to GET / ({e})",
                                    status=e.status) from None
        return _info_from_root(root, self.url)

    def redact(self, text: str) -> str:
        """`text` without this connection's secrets, URL userinfo or auth header values."""
        return self.config.redact(text) if self.config else redact_text(text)

    # -- transport ---------------------------------------------------------------------------
    def _send_opensearch(self, method: str, path: str, body: Any, params: dict[str, Any] | None,
                         headers: dict[str, str]) -> Any:
        # opensearch-py: `params` are URL parameters; request bodies (template params too) go in `body`.
        out = self._client.transport.perform_request(method, path, params=params or None, body=body, headers=headers)
        return self._wait(out) if self.asynchronous else out

    def _send_elasticsearch(self, method: str, path: str, body: Any, params: dict[str, Any] | None,
                            headers: dict[str, str]) -> Any:
        if params:
            from urllib.parse import urlencode

            path = f"{path}?{urlencode({k: _param(v) for k, v in params.items()})}"
        resp = self._client.perform_request(method, path, body=body, headers=headers)
        return (self._wait(resp) if self.asynchronous else resp).body

    def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        """Send one REST call; map client errors onto esmem's error types."""
        self.info  # noqa: B018 - detect first: the family decides the client, and errors name the engine
        if self.recorder:
            self.recorder(method, path, body, params)
        if self._send != self._send_opensearch:  # the Elasticsearch client traces its requests itself
            return self._call(method, path, body, params)
        with span("esmem.engine", {"db.system.name": "opensearch", "http.request.method": method, "url.path": path},
                  client=True):
            return self._call(method, path, body, params)

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        headers = {"accept": "application/json"}
        if isinstance(body, (str, bytes)):
            headers["content-type"] = "application/x-ndjson"
        elif body is not None:
            headers["content-type"] = "application/json"
        try:
            return self._send(method, path, body, params, headers)
        except AsyncOnly:
            raise
        except Exception as e:  # both clients: map by status code / connection failure
            mapped = _map_error(e, method, path, self)
            mapped.cause = self.redact(f"{type(e).__name__}: {e}")
            raise mapped from None

    # -- typed helpers -----------------------------------------------------------------------
    def bulk(self, lines: Iterable[dict[str, Any]], *, refresh: str | None = None) -> dict[str, Any]:
        """`_bulk` with NDJSON built from action/source dicts; callers read the per-item results. Every
        action names the memories alias: `require_alias` keeps a write that outlived an uninstall (a
        reheat write-back) from auto-creating an index under the alias's name, which would block the
        next install of that prefix."""
        params = {"require_alias": "true", **({"refresh": refresh} if refresh else {})}
        resp: dict[str, Any] = self.request("POST", "/_bulk", ndjson(lines), params)
        return resp

    def cluster_health(self) -> dict[str, Any]:
        health: dict[str, Any] = self.request("GET", "/_cluster/health")
        return health

    def close(self) -> None:
        closing = self._client.close()
        if self.asynchronous:
            self._wait(closing)


def _is_async(client: Any) -> bool:
    """Whether a client is one of the async ones (`AsyncOpenSearch`, `AsyncElasticsearch`)."""
    from elasticsearch import AsyncElasticsearch

    if isinstance(client, AsyncElasticsearch):
        return True
    try:
        from opensearchpy import AsyncOpenSearch
    except ImportError:  # its async client needs aiohttp (esmem[async]): no client of the caller's is one
        return False
    return isinstance(client, AsyncOpenSearch)


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _client_url(client: Any) -> str:
    try:  # opensearch-py keeps host dicts, elasticsearch-py a node pool
        hosts = getattr(client.transport, "hosts", None)
        if hosts:
            h = hosts[0]
            return f"{'https' if h.get('use_ssl') or h.get('scheme') == 'https' else 'http'}://{h.get('host')}:{h.get('port')}"
        return str(client.transport.node_pool.all()[0].base_url)
    except (AttributeError, IndexError, KeyError, TypeError):
        return "<caller's client>"


_ERRNO = re.compile(r"\[Errno -?\d+\] [^)'\"\\]+")
_TLS_REASON = re.compile(r"(certificate verify failed[^()'\"\\]*|[Ff]ingerprints did not match|"
                         r"wrong version number|sslv3 alert [a-z ]+|tlsv1 alert [a-z ]+|unknown ca|bad certificate)")


def _connection_reason(e: Exception) -> str:
    text = str(e)
    m = _TLS_REASON.search(text) or _ERRNO.search(text)
    if m:
        return m.group(0).strip(" .")
    if "timed out" in text.lower() or "Timeout" in type(e).__name__:
        return "timed out"
    if "RemoteDisconnected" in text or "Connection aborted" in text or "reset by peer" in text:
        return "connection closed by the server (plain HTTP to a TLS port?)"
    return type(e).__name__


def _map_error(e: Exception, method: str, path: str, engine: "Engine") -> EngineError:
    status = getattr(e, "status_code", None) or getattr(getattr(e, "meta", None), "status", None)
    body = getattr(e, "info", None) or getattr(e, "body", None)
    where = engine.url
    if status is None or not isinstance(status, int):
        name = type(e).__name__
        reason = engine.redact(_connection_reason(e))
        if "SSL" in name or "Tls" in name or _TLS_REASON.search(str(e)):
            return TLSFailure(f"TLS with {where} failed ({reason}): trust its CA with ESMEM_CA_CERTS "
                              "or pin ESMEM_SSL_FINGERPRINT", reason=reason)
        if "Connection" in name or "Timeout" in name or isinstance(e, OSError):
            return EngineUnavailable(f"engine unreachable during {method} {path} at {where} ({reason})", reason=reason)
        if "UnsupportedProduct" in name:
            return UnsupportedEngine(f"{where}: the Elasticsearch client refused the server ({reason})")
        return EngineError(engine.redact(f"{method} {path} failed: {e}"))
    if status == 401:
        cfg = engine.config
        if cfg is not None and not (cfg.username or cfg.api_key or cfg.bearer_token or cfg.aws_region):
            msg = f"{where} needs credentials (HTTP 401): set ESMEM_USERNAME and ESMEM_PASSWORD, or ESMEM_API_KEY"
        elif cfg is not None and cfg.username:
            msg = f"{where} rejected the password of user '{cfg.username}' (HTTP 401)"
        else:
            msg = f"{where} rejected the credentials (HTTP 401)"
        return AuthenticationFailed(msg, status, None)
    reason = engine.redact(_reason(body) or str(e))
    if method == "GET" and path == "/":  # detection words its own message around the reason
        return EngineError(reason, status, body)
    if status == 404:
        return NotFound(f"{method} {path}: not found ({reason})", status, body)
    if status == 409:
        return VersionConflict(f"{method} {path}: version conflict ({reason})", status, body)
    return parameter_error(f"{method} {path}", status, body) or EngineError(f"{method} {path}: HTTP {status}: {reason}",
                                                                             status, body)


# How the stored templates and scripts name a refused parameter: a Painless check's message
# (painless/params/number.painless, fuse), or the bare word a template renders first when a value has
# the wrong shape (the engine's JSON parser quotes it: "Unrecognized token 'vector_must_be_a_list_of_numbers'").
_PARAM_REASON = re.compile(r"^param (\w+) (must .*)", re.S)
_PARAM_TOKEN = re.compile(r"Unrecognized token '(\w+?)_(must_be_\w+)'")


def parameter_error(what: str, status: int | None, body: Any) -> InvalidParameter | None:
    """An InvalidParameter when an HTTP 400's error (a response's, or one `_msearch` item's) names a
    refused parameter, else None."""
    if status != 400:
        return None
    for reason in _reasons(body):
        m = _PARAM_REASON.match(reason)
        if m:
            param, why = m.group(1), m.group(2)
        else:
            t = _PARAM_TOKEN.search(reason)
            if not t:
                continue
            param, why = t.group(1), t.group(2).replace("_", " ")
        return InvalidParameter(f"{what}: parameter {param} {why}", status, body, param=param,
                                reason=f"param {param} {why}")
    return None


def _reasons(node: Any) -> Iterable[str]:
    """Every `reason` of an error body: its caused_by chain, root causes and failed shards."""
    if isinstance(node, dict):
        if isinstance(node.get("reason"), str):
            yield node["reason"]
        for key in ("error", "caused_by", "reason"):
            if isinstance(node.get(key), dict):
                yield from _reasons(node[key])
        for key in ("root_cause", "failed_shards"):
            for child in node.get(key) or ():
                yield from _reasons(child)


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
