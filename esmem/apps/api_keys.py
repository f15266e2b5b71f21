"""API keys of `esmem serve`: each key names the namespaces its holder may use, and is stored only as
its sha256 (a random 256-bit token needs no salt or slow hash), compared in constant time.

The keys file is JSON: `{"keys": [{"name": "agent-a", "sha256": "<hex>", "namespaces": ["a", "b"]}]}`;
`"*"` as a namespace allows every namespace. `add_key` writes a new entry and returns the token,
which is shown once and never stored.
"""
from __future__ import annotations

import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from esmem.apps.http_guard import digest
from esmem.errors import ConfigError, InvalidInput
from esmem.values import check_namespace

ANY = "*"
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ApiKey:
    name: str
    sha256: str
    namespaces: frozenset[str]

    def allows(self, namespace: str) -> bool:
        return ANY in self.namespaces or namespace in self.namespaces


class Keyring:
    """The keys a server accepts."""

    def __init__(self, keys: list[ApiKey]):
        names = [k.name for k in keys]
        if len(set(names)) != len(names):
            raise ConfigError("two API keys share a name")
        self.keys = keys

    @classmethod
    def load(cls, path: str | Path) -> "Keyring":
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"API keys file {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"API keys file {path}: not JSON ({e.msg}, line {e.lineno})") from None
        entries = raw.get("keys") if isinstance(raw, dict) else None
        if not isinstance(entries, list):
            raise ConfigError(f'API keys file {path}: expected {{"keys": [...]}}')
        keys = []
        for n, entry in enumerate(entries, 1):
            if not isinstance(entry, dict) or set(entry) != {"name", "sha256", "namespaces"}:
                raise ConfigError(f"API keys file {path}: key #{n} needs exactly name, sha256 and namespaces")
            if not isinstance(entry["sha256"], str) or not _HEX.fullmatch(entry["sha256"]):
                raise ConfigError(f"API keys file {path}: key #{n}: sha256 must be 64 lowercase hex digits")
            spaces = entry["namespaces"]
            if not isinstance(spaces, list) or not spaces:
                raise ConfigError(f"API keys file {path}: key #{n}: namespaces must be a non-empty list")
            try:
                allowed = frozenset(s if s == ANY else check_namespace(s) for s in spaces)
            except InvalidInput as err:
                raise ConfigError(f"API keys file {path}: key #{n}: {err}") from None
            keys.append(ApiKey(str(entry["name"]), entry["sha256"], allowed))
        return cls(keys)

    def find(self, token: str) -> ApiKey | None:
        """The key whose hash matches `token` (every entry is compared, in constant time each)."""
        given = digest(token)
        found = None
        for k in self.keys:
            if hmac.compare_digest(given, k.sha256):
                found = k
        return found


def add_key(path: str | Path, name: str, namespaces: list[str]) -> str:
    """Append a new key for `namespaces` to the keys file (created 0600 if absent); returns the token."""
    if not name.strip():
        raise InvalidInput("a key needs a name")
    allowed = sorted({s if s == ANY else check_namespace(s) for s in namespaces})
    if not allowed:
        raise InvalidInput("a key needs at least one namespace (-n NS, or '*' for all)")
    p = Path(path)
    keys = Keyring.load(p).keys if p.exists() else []
    if any(k.name == name for k in keys):
        raise InvalidInput(f"a key named {name!r} exists already in {p}")
    token = "esmem_" + secrets.token_urlsafe(32)
    entries = [{"name": k.name, "sha256": k.sha256, "namespaces": sorted(k.namespaces)} for k in keys]
    entries.append({"name": name, "sha256": digest(token), "namespaces": allowed})
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"keys": entries}, f, indent=2)
        f.write("\n")
    return token
