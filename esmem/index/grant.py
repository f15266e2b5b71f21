"""Per-agent credentials confined by the cluster itself: document-level security on `namespace`.

esmem's own namespace filter protects agents from mistakes; this protects them from each other. The
role's DLS query is applied by the engine to every read of the memories index (`_search`, templates,
`_msearch`, `_mget`, `GET _doc`, aggregations), so an agent's credentials cannot see another
namespace even when it calls the REST API directly.

OpenSearch: a role (security plugin REST API) and an internal user mapped to it. Elasticsearch: an API
key whose role descriptor carries the same DLS query (documented API; not run here, see docs/concepts/namespaces.md).
Secrets never go to the terminal: the password (or API key) is read from, or written to, a 0600 file.

A tenant (the namespaces one credential may use) gets an installed prefix of its own: the role's index
privileges name only that prefix's alias and index, so the cluster refuses every read and write of another
tenant's memories whatever the request (docs/security.md). DLS is only a read filter, so `grant` refuses
to add a second tenant to a prefix unless asked to (`shared_index`: confined by DLS alone, which needs
the secured embedded engine's guard for writes and some aggregations).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from esmem.errors import EngineError, InvalidInput, NotFound, VersionConflict
from esmem.index.engine import Engine
from esmem.index.install import Names
from esmem.values import check_namespace

USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")

# What an agent needs besides reading its documents: the multi-request and template actions are checked
# at cluster level by the security plugin, the rest on the memories index/alias.
CLUSTER_ACTIONS = [
    "cluster:monitor/main",  # GET /: engine detection
    "cluster:admin/script/get", "indices:data/read/search/template/render",  # the installed ranking policy,
    # read back from the stored recall template (MemoryStore.installed_params)
    "indices:data/read/search/template", "indices:data/read/msearch/template", "indices:data/read/msearch",
    "indices:data/read/mget", "indices:data/write/bulk", "indices:data/read/scroll", "indices:data/read/scroll/clear",
]
# Exactly the index actions esmem's calls need (not the `read` group: it grants _termvectors, whose
# term statistics cover the whole index, _explain and field capabilities, which esmem never calls).
INDEX_ACTIONS = ["indices:data/read/search", "indices:data/read/search/template", "indices:data/read/get",
                 "indices:data/read/mget*",
                 "indices:data/write/index", "indices:data/write/update", "indices:data/write/bulk*",
                 "indices:data/write/update/byquery",
                 "indices:admin/aliases/get", "indices:admin/refresh*", "indices:admin/mappings/get"]


@dataclass(frozen=True)
class Grant:
    """What `grant` made; the secret is only in `secret_file`."""

    user: str
    role: str
    namespaces: tuple[str, ...]
    secret_file: Path


def dls_query(namespaces: Sequence[str]) -> dict[str, Any]:
    return {"bool": {"filter": [{"terms": {"namespace": list(namespaces)}}]}}


def index_patterns(prefix: str) -> list[str]:
    """The prefix's alias and its memories indices, and nothing else: a regular expression, since a
    wildcard (`team-memories-*`) would also match the indices of a prefix such as `team-memories-x`."""
    names = Names(prefix)
    escaped = "".join(c if c.isalnum() else "\\" + c for c in names.index(""))
    return [names.alias, f"/{escaped}[0-9a-f]{{12}}/"]


def role_body(prefix: str, namespaces: Sequence[str]) -> dict[str, Any]:
    """The OpenSearch security role confining an agent to `namespaces` of `prefix`'s memories."""
    return {
        "description": f"esmem: memories of {', '.join(namespaces)} under prefix {prefix}",
        "cluster_permissions": CLUSTER_ACTIONS,
        "index_permissions": [{"index_patterns": index_patterns(prefix), "dls": json.dumps(dls_query(namespaces)),
                               "allowed_actions": INDEX_ACTIONS}],
    }


def elasticsearch_role_descriptor(prefix: str, namespaces: Sequence[str]) -> dict[str, Any]:
    """The same confinement as an Elasticsearch role descriptor (for an API key or a native role)."""
    return {
        "cluster": ["monitor"],
        "indices": [{"names": index_patterns(prefix), "privileges": ["read", "index", "view_index_metadata"],
                     "query": dls_query(namespaces)}],
    }


def other_tenants(engine: Engine, prefix: str, user: str, namespaces: Sequence[str]) -> list[str]:
    """Namespaces outside `namespaces` that `prefix`'s index holds, or that another user's esmem role
    there may use (OpenSearch): with any, a credential would share the index with another tenant."""
    alias = Names(prefix).alias
    try:
        resp = engine.request("POST", f"/{alias}/_search", {
            "size": 0, "query": {"bool": {"must_not": [{"terms": {"namespace": list(namespaces)}}]}},
            "aggs": {"ns": {"terms": {"field": "namespace", "size": 10}}}})
        found = [b["key"] for b in resp["aggregations"]["ns"]["buckets"]]
    except NotFound:  # not installed yet: no memories
        found = []
    if engine.info.family != "elasticsearch":
        roles = _security(engine, "GET", "/_plugins/_security/api/roles")
        for name, role in roles.items():
            for perm in role.get("index_permissions", []) if name != f"esmem-{prefix}-{user}" else []:
                if perm.get("index_patterns") == index_patterns(prefix) and perm.get("dls"):
                    found += json.loads(perm["dls"])["bool"]["filter"][0]["terms"]["namespace"]
    return sorted(set(found) - set(namespaces))


def _secret(path: Path) -> tuple[str, bool]:
    """The password in `path`, or a new one written there (0600). True when generated."""
    if path.exists():
        value = path.read_text().strip()
        if len(value) < 12:
            raise InvalidInput(f"{path}: the password in it is shorter than 12 characters")
        return value, False
    value = secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value, True


def _security(engine: Engine, method: str, path: str, body: Any = None, attempts: int = 8) -> Any:
    """One call of the security plugin's REST API. It keeps all roles (all users, all mappings) in one
    versioned document, so two admins granting at once conflict (409) though they touch different
    entries; the calls are idempotent, so a conflict is retried."""
    for attempt in range(attempts):
        try:
            return engine.request(method, path, body)
        except VersionConflict:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def grant(engine: Engine, prefix: str, user: str, namespaces: Sequence[str], secret_file: Path, *,
          shared_index: bool = False) -> Grant:
    """Create or update `user` (role `esmem-<prefix>-<user>`) confined to `namespaces`; idempotent.
    Refused (InvalidInput) when another tenant's namespaces are in the prefix, unless `shared_index`."""
    if not USER_RE.match(user or ""):
        raise InvalidInput(f"user name must match {USER_RE.pattern}, got {user!r}")
    if not namespaces:
        raise InvalidInput("give at least one namespace (-n)")
    ns = tuple(dict.fromkeys(check_namespace(n) for n in namespaces))
    role = f"esmem-{prefix}-{user}"
    if not shared_index and (others := other_tenants(engine, prefix, user, ns)):
        raise InvalidInput(
            f"prefix {prefix} holds namespaces of another tenant ({', '.join(others[:5])}): give this credential a "
            f"prefix of its own (esmem --prefix {prefix}-{user} install), or pass --shared-index to confine it by "
            "document-level security alone (see docs/security.md for what that leaves open)")
    if engine.info.family == "elasticsearch":
        return _grant_elasticsearch(engine, prefix, user, ns, secret_file, role)
    password, _ = _secret(secret_file)
    api = "/_plugins/_security/api"
    try:
        _security(engine, "PUT", f"{api}/roles/{role}", role_body(prefix, ns))
        _security(engine, "PUT", f"{api}/internalusers/{user}",
                  {"password": password, "backend_roles": [], "attributes": {"esmem_prefix": prefix}})
        _security(engine, "PUT", f"{api}/rolesmapping/{role}", {"users": [user]})
    except NotFound:
        raise EngineError("this OpenSearch has no security plugin: nothing can confine an agent") from None
    return Grant(user, role, ns, secret_file)


def _grant_elasticsearch(engine: Engine, prefix: str, user: str, ns: tuple[str, ...], secret_file: Path,
                         role: str) -> Grant:
    # Written against the documented API (POST /_security/api_key); Elasticsearch cannot run here.
    if secret_file.exists():
        raise InvalidInput(f"{secret_file} exists: an Elasticsearch API key is made new each time")
    resp = engine.request("POST", "/_security/api_key", {
        "name": role, "role_descriptors": {role: elasticsearch_role_descriptor(prefix, ns)},
        "metadata": {"esmem_prefix": prefix, "esmem_user": user}})
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(resp["encoded"] + "\n")
    return Grant(user, role, ns, secret_file)


def revoke(engine: Engine, prefix: str, user: str) -> bool:
    """Delete the user and its role (OpenSearch); True when something was removed."""
    role = f"esmem-{prefix}-{user}"
    api = "/_plugins/_security/api"
    removed = False
    for path in (f"{api}/rolesmapping/{role}", f"{api}/internalusers/{user}", f"{api}/roles/{role}"):
        try:
            _security(engine, "DELETE", path)
            removed = True
        except NotFound:
            pass
    return removed
