"""`esmem grant` / `esmem revoke`: per-agent credentials confined to namespaces (registered by esmem.cli.main).

The secret goes to a 0600 file, never to the terminal: the output names the file.
"""
from __future__ import annotations

from pathlib import Path

import click

from esmem.cli.common import _engine


@click.command("grant")
@click.argument("user")
@click.option("-n", "--namespace", "namespaces", multiple=True, required=True,
              help="A namespace the agent may read and write (repeat for more).")
@click.option("--secret-file", type=click.Path(path_type=Path), required=True,
              help="Password file: read if it exists, else a generated password is written there (0600). "
                   "On Elasticsearch the new API key is written there.")
@click.option("--shared-index", is_flag=True,
              help="Allow other tenants' namespaces in this prefix's index: the agent is then confined by "
                   "document-level security alone (docs/security.md).")
@click.pass_context
def grant_cmd(ctx: click.Context, user: str, namespaces: tuple[str, ...], secret_file: Path,
              shared_index: bool) -> None:
    """Create or update USER with index privileges on this prefix only, its document-level security
    confining it to the namespaces. One prefix per tenant: refused when the prefix holds another's."""
    from esmem.index.grant import grant

    g = grant(_engine(ctx), ctx.obj["prefix"], user, namespaces, secret_file, shared_index=shared_index)
    click.echo(f"user {g.user} (role {g.role}) confined to {', '.join(g.namespaces)}; secret in {g.secret_file}")


@click.command("revoke")
@click.argument("user")
@click.pass_context
def revoke_cmd(ctx: click.Context, user: str) -> None:
    """Delete the agent user USER and its esmem role (OpenSearch security plugin)."""
    from esmem.index.grant import revoke

    click.echo("revoked" if revoke(_engine(ctx), ctx.obj["prefix"], user) else "nothing to revoke")
