"""`esmem serve` and `esmem serve-key` (registered by esmem.cli.main): the HTTP API for any language.

FastAPI and uvicorn are an optional extra (`esmem[serve]`): imported only when `serve` runs, so
without them it names the extra and exits 2.
"""
from __future__ import annotations

import json
import sys

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from fastapi import FastAPI


@click.command("serve")
@click.option("--keys", "keys_path", envvar="ESMEM_SERVE_KEYS", default=None,
              help="The API keys file (env ESMEM_SERVE_KEYS); add keys with `esmem serve-key`.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Port.")
@click.option("--cert", default=None, help="TLS certificate (PEM); with --key the API speaks HTTPS only.")
@click.option("--key", "key_file", default=None, help="The TLS certificate's private key (PEM).")
@click.option("--max-body", type=click.IntRange(1024, 64 * 1024 * 1024), default=1024 * 1024, show_default=True,
              help="Largest request body in bytes (413 above).")
@click.option("--no-touch", is_flag=True, help="Recalls do not reheat (read-only recall).")
@click.option("--ui", "with_ui", is_flag=True,
              help="Also serve the memory inspector under /ui (sign in there with an API key: its namespaces only).")
@click.option("--ui-allow-writes", is_flag=True, help="The inspector under /ui may restore, forget and settle reviews.")
@click.option("--no-metrics", is_flag=True,
              help="Do not serve GET /metrics (the Prometheus exposition: requests per route and status, recalls, "
                   "writes by merge outcome; no namespace, no text).")
@click.option("--print-openapi", is_flag=True, help="Print the OpenAPI document and exit.")
@click.pass_context
def serve_cmd(ctx: click.Context, keys_path: str | None, host: str, port: int, cert: str | None, key_file: str | None,
              max_body: int, no_touch: bool, with_ui: bool, ui_allow_writes: bool, no_metrics: bool, print_openapi: bool) -> None:
    """HTTP API: remember, recall, context, list, get, history, restore, forget, erase, per API key and namespace."""
    from esmem.cli.common import _engine, fail

    try:
        import uvicorn

        from esmem.apps.http_api import create_app, log_access_to
    except ImportError as e:
        if (e.name or "").partition(".")[0] not in ("fastapi", "uvicorn", "starlette", "pydantic", "prometheus_client"):
            raise
        fail("esmem serve needs FastAPI, uvicorn and prometheus-client: pip install 'esmem[serve]'")
    from esmem.apps.api_keys import Keyring
    from esmem.domain.hybrid import embedder_for
    from esmem.domain.store import MemoryStore

    if print_openapi:
        click.echo(openapi_text(create_app(MemoryStore.connect, Keyring([]))))  # the routes only: nothing runs
        return
    if bool(cert) != bool(key_file):
        fail("TLS needs both --cert and --key")
    if not keys_path:
        fail("give the API keys file: --keys FILE (or ESMEM_SERVE_KEYS); add keys with `esmem serve-key`")
    keys = Keyring.load(keys_path)
    if not keys.keys:
        fail(f"{keys_path}: no API keys (add one with `esmem serve-key`)")
    engine, prefix = _engine(ctx), ctx.obj["prefix"]
    embedder = embedder_for(engine, prefix)  # checks the installation before listening
    app = create_app(lambda: MemoryStore(engine, prefix, embedder=embedder), keys, touch=not no_touch,
                     max_body=max_body, metrics=not no_metrics)
    if with_ui:
        from esmem.apps.inspector import create_ui

        app.mount("/ui", create_ui(lambda: MemoryStore(engine, prefix, embedder=embedder), keys=keys,
                                   allow_writes=ui_allow_writes))
    log_access_to(sys.stderr)
    from esmem.domain.collector import long_lived

    long_lived()  # the slowest recalls waited for full collections of everything the server holds
    uvicorn.run(app, host=host, port=port, ssl_certfile=cert, ssl_keyfile=key_file, access_log=False,
                log_level="warning")


def openapi_text(app: "FastAPI") -> str:
    """The OpenAPI document as committed in docs/openapi.json."""
    return json.dumps(app.openapi(), indent=2, ensure_ascii=False)


@click.command("serve-key")
@click.argument("name")
@click.option("-n", "--namespace", "namespaces", multiple=True, required=True,
              help="A namespace the key may use (repeatable; '*' for every namespace).")
@click.option("--keys", "keys_path", envvar="ESMEM_SERVE_KEYS", required=True, help="The API keys file (created 0600).")
def serve_key_cmd(name: str, namespaces: tuple[str, ...], keys_path: str) -> None:
    """Add an API key NAME for `esmem serve`; prints the key once (only its sha256 is stored)."""
    from esmem.apps.api_keys import add_key

    click.echo(add_key(keys_path, name, list(namespaces)))
