"""`esmem ui` (registered by esmem.cli.main): the memory inspector in the browser, on this machine.

FastAPI and uvicorn are the `esmem[serve]` extra: imported only when the command runs.
"""
from __future__ import annotations

import sys

import click


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (the inspector has no sign-in of its own: keep it local).")
@click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True, help="Port.")
@click.option("--allow-writes", is_flag=True, help="Show restore, forget and the review verdicts (default: read-only).")
@click.option("-n", "--namespace", "namespaces", multiple=True,
              help="Show only this namespace (repeatable; default: every one the credentials see).")
@click.pass_context
def ui_cmd(ctx: click.Context, host: str, port: int, allow_writes: bool, namespaces: tuple[str, ...]) -> None:
    """The memory inspector: namespaces, memories, recall playground with each score's factors, version
    chains, merge review and stats, with the CLI's connection settings and credentials."""
    from esmem.cli.common import _engine, fail

    try:
        import uvicorn

        from esmem.apps.inspector import create_ui
    except ImportError as e:
        if (e.name or "").partition(".")[0] not in ("fastapi", "uvicorn", "starlette", "pydantic"):
            raise
        fail("esmem ui needs FastAPI and uvicorn: pip install 'esmem[serve]'")
    from esmem.apps.http_api import AccessLog, log_access_to
    from esmem.domain.hybrid import embedder_for
    from esmem.domain.store import MemoryStore

    engine, prefix = _engine(ctx), ctx.obj["prefix"]
    embedder = embedder_for(engine, prefix)  # checks the installation before listening
    app = create_ui(lambda: MemoryStore(engine, prefix, embedder=embedder), allow_writes=allow_writes,
                    namespaces=list(namespaces) or None)
    app.add_middleware(AccessLog)
    log_access_to(sys.stderr)
    click.echo(f"esmem inspector on http://{host}:{port}/ ({'writes allowed' if allow_writes else 'read-only'})",
               err=True)
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="warning")
