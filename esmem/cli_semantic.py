"""`esmem embed`: give the memories vectors of the installed embedder (after `install --embedder`)."""
from __future__ import annotations

import click

from .cli_common import _engine, err, fail


@click.command("embed")
@click.option("--all", "every", is_flag=True, help="Re-embed every memory, not only those without a vector.")
@click.pass_context
def embed_cmd(ctx: click.Context, every: bool) -> None:
    """Embed memories with the embedder the index was installed for (idempotent; progress bar)."""
    from rich.progress import Progress

    from .hybrid import embedder_for, reembed

    eng = _engine(ctx)
    embedder = embedder_for(eng, ctx.obj["prefix"])
    if embedder is None:
        fail(f"the index under prefix {ctx.obj['prefix']!r} has no vectors: run `esmem install --embedder minilm --migrate`")
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"embedding with {embedder.name}", total=None)
        n = reembed(eng, ctx.obj["prefix"], embedder, every=every,
                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    click.echo(f"embedded {n} memories with {embedder.name}")
