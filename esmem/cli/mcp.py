"""`esmem mcp` (registered by esmem.cli.main): serve one namespace to MCP clients over stdio or HTTP.

The `mcp` SDK is an optional extra: this module imports it only when the command runs, so without
it `esmem mcp` prints which extra to install and exits 2.
"""
from __future__ import annotations

import click


@click.command("mcp")
@click.option("-n", "--namespace", envvar="ESMEM_NAMESPACE", required=True,
              help="The one namespace this server reads and writes (env ESMEM_NAMESPACE). Tools cannot change it.")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio for desktop clients that launch the server; http for streamable HTTP.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: interface to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="HTTP: port.")
@click.option("--path", "http_path", default="/mcp", show_default=True, help="HTTP: endpoint path.")
@click.option("--policy", "policy_path", default=None, help="Decay policy file (.toml or .json) for recall.")
@click.option("--no-touch", is_flag=True,
              help="Recalls do not reheat: recall and context write nothing and are annotated read-only.")
@click.option("--token-file", default=None, type=click.Path(dir_okay=False),
              help="HTTP: file holding the bearer token clients must send (or env ESMEM_MCP_TOKEN).")
@click.pass_context
def mcp_cmd(ctx: click.Context, namespace: str, transport: str, host: str, port: int, http_path: str,
            policy_path: str | None, no_touch: bool, token_file: str | None) -> None:
    """Model Context Protocol server for one namespace: remember, remember_many, edit, recall, context,
    list, get, history, restore, forget. The HTTP transport needs a bearer token."""
    from esmem.cli.common import _store, fail
    from esmem.domain.policy import load_policy
    from esmem.values import check_namespace

    try:
        from esmem.apps.mcp_server import serve
    except ImportError as e:
        if (e.name or "").partition(".")[0] not in ("mcp", "mcp_types", "pydantic"):
            raise
        fail("esmem mcp needs the MCP SDK: pip install 'esmem[mcp]'")

    check_namespace(namespace)
    token = None
    if transport == "http":
        token = _token(token_file)
        if not token:
            fail("the HTTP transport needs a bearer token: --token-file FILE or ESMEM_MCP_TOKEN")
    params = load_policy(policy_path).params() if policy_path else None
    serve(_store(ctx, params), namespace, transport=transport, host=host, port=port, path=http_path,
          touch=not no_touch, token=token)


def _token(path: str | None) -> str | None:
    """The bearer token from --token-file, else ESMEM_MCP_TOKEN (surrounding whitespace dropped)."""
    import os

    from esmem.cli.common import fail

    if path is None:
        return (os.environ.get("ESMEM_MCP_TOKEN") or "").strip() or None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError as e:
        fail(f"--token-file {path}: {e.strerror}")
