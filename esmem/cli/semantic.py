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
        fail(f"the index under prefix {ctx.obj['prefix']!r} has no vectors: run `esmem install --embedder NAME --migrate`")
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"embedding with {embedder.name}", total=None)
        n = reembed(eng, ctx.obj["prefix"], embedder, every=every,
                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    click.echo(f"embedded {n} memories with {embedder.name}")


@click.command("merge-pairs")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--embedder", default="none", show_default=True,
              help="Write with this embedder (kNN candidates) and report each pair's cosine; none: lexical only.")
@click.option("--thresholds", default="0.6,0.7,0.8,0.9", show_default=True,
              help="Cosine thresholds of the semantic criterion to report (with an embedder).")
@click.option("--by", default="lang,kind,type", show_default=True,
              help="Groups to report besides all: any of lang, kind, type, label.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.pass_context
def merge_pairs_cmd(ctx: click.Context, path: Path, embedder: str, thresholds: str, by: str, as_json: bool) -> None:
    """Precision/recall of the write path's merge decisions on the labelled pairs of the JSONL file PATH,
    with every wrong one listed."""
    import json

    from rich.table import Table

    from esmem.apps.merge_pairs import groups, load_pairs, report, score_pairs, wrong
    from esmem.cli.common import out
    from esmem.domain.embedding import load_embedder

    try:
        ts = [float(t) for t in thresholds.split(",") if t.strip()]
    except ValueError:
        fail(f"--thresholds takes numbers, got {thresholds!r}")
    keys = [k.strip() for k in by.split(",") if k.strip()]
    if set(keys) - {"lang", "kind", "type", "label"}:
        fail(f"--by takes lang, kind, type, label; got {by!r}")
    model = load_embedder(embedder)
    pairs = load_pairs(path)
    scored = score_pairs(_engine(ctx), pairs, model)
    result = {name: report(group, ts) for name, group in groups(scored).items()
              if name == "all" or name.split("=")[0] in keys}
    errors = wrong(scored)
    if as_json:
        click.echo(json.dumps({"pairs": len(pairs), "groups": result, "wrong": [
            {"old": s.pair.old, "new": s.pair.new, "kind": s.pair.kind, "lang": s.pair.lang, "type": s.pair.type,
             "label": s.pair.label, "action": s.action, "why": s.why,
             **({"cosine": round(s.cosine, 4)} if s.cosine is not None else {})} for s in errors]}, ensure_ascii=False))
        return
    title = f"merge decisions on {path} ({len(pairs)} pairs{', ' + model.name if model else ', no embedder'})"
    table = Table(title=title)
    for col in ("group", "criterion", "pairs", "precision", "recall", "merges", "uncertain"):
        table.add_column(col, justify="right")
    for name, rows in result.items():
        for row in rows:
            table.add_row(name, row["criterion"], f"{row['pairs']:.0f}", f"{row['precision']:.2f}",
                          f"{row['recall']:.2f}", f"{row['merges']:.0f}", f"{row['uncertain']:.0f}")
    out.print(table)
    listing = Table(title=f"{len(errors)} wrong decisions (label vs what the write did)")
    for col in ("label", "did", "lang", "kind", "type", "old", "new", "why"):
        listing.add_column(col)
    for s in errors:
        listing.add_row(s.pair.label, s.action, s.pair.lang, s.pair.kind, s.pair.type, s.pair.old, s.pair.new, s.why)
    out.print(listing)


def bench_hybrid(ctx: click.Context, embedder: str, size: int, namespaces: int, queries: int, k: int, seed: int,
                 repeat: int, as_json: bool) -> None:
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
                            queries=queries, k=k, seed=seed, repeat=repeat, advance=lambda stage: status.update(stage))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    passes = f", median of {repeat} passes" if repeat > 1 else ""
    table = Table(title=f"hybrid recall ({model.name}, {size} memories, {namespaces} namespaces, {queries} queries, "
                        f"k={k}{passes})")
    table.add_column("what")
    table.add_column("measured")
    for row in summary(report):
        table.add_row(*row)
    out.print(table)
