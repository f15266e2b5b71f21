"""Semantic commands: `esmem embed` gives the memories vectors of the installed embedder (after
`install --embedder`); `esmem merge-pairs` measures merge decisions on a labelled pair set."""
from __future__ import annotations

from pathlib import Path

import click

from esmem.cli.common import _engine, err, fail


@click.command("embed")
@click.option("--all", "every", is_flag=True, help="Re-embed every memory, not only those without a vector.")
@click.pass_context
def embed_cmd(ctx: click.Context, every: bool) -> None:
    """Embed memories with the embedder the index was installed for (idempotent; progress bar)."""
    from rich.progress import Progress

    from esmem.domain.hybrid import embedder_for, reembed

    eng = _engine(ctx)
    embedder = embedder_for(eng, ctx.obj["prefix"])
    if embedder is None:
        fail(f"the index under prefix {ctx.obj['prefix']!r} has no vectors: run `esmem install --embedder minilm --migrate`")
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"embedding with {embedder.name}", total=None)
        n = reembed(eng, ctx.obj["prefix"], embedder, every=every,
                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    click.echo(f"embedded {n} memories with {embedder.name}")


@click.command("merge-pairs")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--embedder", default="minilm", show_default=True)
@click.option("--thresholds", default="0.5,0.6,0.7,0.75,0.8,0.85,0.9", show_default=True,
              help="Cosine thresholds of the semantic criterion to report.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.pass_context
def merge_pairs_cmd(ctx: click.Context, path: Path, embedder: str, thresholds: str, as_json: bool) -> None:
    """Precision/recall of merge decisions on labelled pairs: lexical vs semantic vs both."""
    import json

    from rich.table import Table

    from esmem.cli.common import out
    from esmem.domain.embedding import load_embedder
    from esmem.apps.merge_pairs import load_pairs, report, score_pairs

    try:
        ts = [float(t) for t in thresholds.split(",") if t.strip()]
    except ValueError:
        fail(f"--thresholds takes numbers, got {thresholds!r}")
    model = load_embedder(embedder)
    if model is None:
        fail("merge-pairs needs an embedder")
    pairs = load_pairs(path)
    scored = score_pairs(_engine(ctx), pairs, model)
    groups = {"all": scored, **{lang: [s for s in scored if s.pair.lang == lang]
                                for lang in sorted({s.pair.lang for s in scored if s.pair.lang})}}
    result = {name: report(group, ts) for name, group in groups.items()}
    if as_json:
        click.echo(json.dumps({"pairs": len(pairs), "groups": result,
                               "cosines": [{"old": s.pair.old, "new": s.pair.new, "label": s.pair.label,
                                            "lexical": s.lexical, "cosine": round(s.cosine, 4)} for s in scored]},
                              ensure_ascii=False))
        return
    table = Table(title=f"merge decisions on {path} ({len(pairs)} pairs, {model.name})")
    for col in ("group", "criterion", "precision", "recall", "merges"):
        table.add_column(col, justify="right")
    for name, rows in result.items():
        for row in rows:
            table.add_row(name, row["criterion"], f"{row['precision']:.2f}", f"{row['recall']:.2f}", f"{row['merges']:.0f}")
    out.print(table)


def bench_hybrid(ctx: click.Context, embedder: str, size: int, namespaces: int, queries: int, k: int, seed: int,
                 as_json: bool) -> None:
    """`esmem bench --embedder`: esmem.bench_hybrid on one corpus size."""
    import json

    from rich.table import Table

    from esmem.apps.bench_hybrid import run_hybrid, summary
    from esmem.cli.common import out
    from esmem.domain.embedding import load_embedder

    model = load_embedder(embedder)
    if model is None:
        fail("--embedder none: nothing hybrid to measure")
    with err.status("bench") as status:
        report = run_hybrid(_engine(ctx), ctx.obj["prefix"], model, size=size, namespaces=namespaces,
                            queries=queries, k=k, seed=seed, advance=lambda stage: status.update(stage))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"hybrid recall ({model.name}, {size} memories, {namespaces} namespaces, {queries} queries, k={k})")
    table.add_column("what")
    table.add_column("measured")
    for row in summary(report):
        table.add_row(*row)
    out.print(table)
