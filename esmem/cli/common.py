"""What every esmem command shares: consoles, the one-line error exit, cluster and store access.

A module of its own so that command modules (cli_agent, cli_bench) and cli itself import it
without importing each other.
"""
from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import click
from rich.console import Console

from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine

out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 2, *, whole: bool = False) -> NoReturn:
    click.echo(f"error: {message if whole else message.splitlines()[0]}", err=True)
    sys.exit(code)


def _pairs(values: tuple[str, ...]) -> dict[str, str]:
    out_: dict[str, str] = {}
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"expected key=value, got {v!r}", param_hint="--set")
        k, _, val = v.partition("=")
        out_[k.strip()] = val.strip()
    return out_


def _engine(ctx: click.Context) -> Engine:
    """The engine from --url/--cloud-id and the connection options, else the ESMEM_* environment."""
    from esmem.index.connection import ConnectionConfig

    overrides = dict(ctx.obj.get("connection") or {})
    if not (ctx.obj["url"] or overrides.get("cloud_id") or os.environ.get("ESMEM_CLOUD_ID")):
        fail("no cluster URL: pass --url or set ESMEM_URL (or start one with `esmem engine up`)")
    return Engine(ConnectionConfig.from_env(url=ctx.obj["url"], **overrides))


def _store(ctx: click.Context, params: RecallParams | None = None, **options: Any) -> MemoryStore:
    # an index installed with an embedder gets its vectors and kNN leg from the CLI too (connect loads it)
    store = MemoryStore.connect(_engine(ctx), ctx.obj["prefix"], params=params, **options)
    ctx.call_on_close(store.close)  # after the command printed: the queued reheat write-backs
    return store


def resolve_query(query: str | None, messages_path: str | None) -> str:
    """QUERY, or the query built from a conversation file (fillers dropped), never both."""
    from esmem.apps.dialogue import build_query, read_messages
    from esmem.errors import InvalidInput

    if messages_path is None:
        if query is None:
            raise InvalidInput("give either QUERY or --from-messages FILE")
        return query
    if query is not None:
        raise InvalidInput("give either QUERY or --from-messages FILE, not both")
    built = build_query(read_messages(messages_path))
    if not built:
        raise InvalidInput(f"{messages_path}: no message has anything to search for (only fillers)")
    return built
