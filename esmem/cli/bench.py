"""`esmem bench`: runs esmem.apps.bench on the cluster of the `esmem` group and prints what it measured.

The bench works under its own prefixes (`<prefix>-bench-<size>`, `...-merge`) and deletes them
afterwards, so it never reads or writes the user's memories.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import click
from rich.table import Table

from esmem.apps import plots
from esmem.apps.bench import PATHS, run
from esmem.cli.common import _engine, fail, out
from esmem.domain.embedding import MODELS
from esmem.errors import EsmemError


def _sizes(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    try:
        sizes = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("sizes must be positive integers")
    return sizes


def _ratio(p: Mapping[str, Any], q: str) -> str:
    """The ratio to (a); with --repeat, the median and its [min-max] over the passes."""
    spread = p.get(f"ratio_{q}_spread")
    if not spread or p.get("passes", 1) == 1:
        return f"{p[f'ratio_{q}']:.2f}"
    return f"{p[f'ratio_{q}']:.2f} [{spread[0]:.2f}-{spread[1]:.2f}]"


def latency_table(report: Mapping[str, Any]) -> Table:
    repeat = report["config"].get("repeat", 1)
    table = Table(title=f"recall latency, client wall ms ({report['engine']}, k={report['config']['k']}, "
                        f"window={report['config']['window']}, {report['config']['queries']} queries"
                        + (f", median of {repeat} interleaved passes [min-max of the ratio]" if repeat > 1 else "")
                        + "; took = engine ms, 1 ms resolution)")
    for col in ("size", "scope", "ns size", "path", "p50", "p95", "p99", "×(a) p50", "×(a) p95", "×(a) p99",
                "took p50/mean"):
        table.add_column(col, justify="left" if col in ("scope", "path") else "right")
    for r in report["runs"]:
        for scope in r["latency"]:
            for key, p in scope["paths"].items():
                table.add_row(str(r["size"]), scope["scope"], str(scope["namespace_size"]), f"({key}) {PATHS[key]}",
                              f"{p['p50']:.2f}", f"{p['p95']:.2f}", f"{p['p99']:.2f}", _ratio(p, "p50"),
                              _ratio(p, "p95"), _ratio(p, "p99"),
                              f"{p['took']['p50']:.0f}/{p['took']['mean']:.2f}")
            table.add_section()
    return table


def ingest_table(report: Mapping[str, Any]) -> Table:
    table = Table(title="ingest (MemoryStore.remember_many) and index size")
    for col in ("size", "policy", "memories", "seconds", "memories/s", "actions", "bytes/memory"):
        table.add_column(col, justify="left" if col in ("policy", "actions") else "right")
    for r in report["runs"]:
        for row in r["ingest"]:
            size = ""
            if row["policy"] == "no merge":
                idx = r["index"]
                size = f"{idx['live']['bytes_per_memory']:.0f} ({idx['force_merged']['bytes_per_memory']:.0f} merged)"
            actions = ", ".join(f"{k} {v}" for k, v in sorted(row["actions"].items()))
            rate = f"{row['per_second']:.0f}"
            if len(row.get("passes_per_second", ())) > 1:  # the median pass [slowest-fastest]
                rate += f" [{min(row['passes_per_second']):.0f}-{max(row['passes_per_second']):.0f}]"
            table.add_row(str(r["size"]), row["policy"], str(row["memories"]), f"{row['seconds']:.1f}",
                          rate, actions, size)
    return table


def targets_table(report: Mapping[str, Any]) -> Table:
    table = Table(title="targets (reported, not asserted)")
    for col in ("size", "target", "scope", "value", "met"):
        table.add_column(col, justify="right" if col in ("size", "value") else "left")
    for r in report["runs"]:
        for t in r["targets"]:
            met = "n/a" if t["met"] is None else "yes" if t["met"] else "NO"
            value = "-" if t["value"] is None else f"{t['value']:.2f}"
            table.add_row(str(r["size"]), t["target"], t["scope"], value, met)
    return table


@click.option("--sizes", default="10000,100000", show_default=True, callback=_sizes,
              help="Corpus sizes in memories, comma-separated; one run each.")
@click.option("--namespaces", type=click.IntRange(1), default=100, show_default=True,
              help="Namespaces per corpus (Zipf-distributed sizes).")
@click.option("--queries", type=click.IntRange(2), default=200, show_default=True,
              help="Measured queries over all namespaces; each of the two largest namespaces gets a quarter.")
@click.option("-k", "--k", "k", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Memories each measured recall returns.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the synthetic corpus and queries.")
@click.option("--merge-sample", type=click.IntRange(1), default=10_000, show_default=True,
              help="How many memories (the oldest) the with-merge ingest measurement writes.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Run the whole latency comparison N times back to back and the with-merge ingest N times; "
                   "report medians and the spread of each ratio (and of the ingest rate). With --embedder: "
                   "the hybrid latency comparison, and the spread of hybrid over lexical recall.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--plot", "plot_to", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also save a latency/throughput chart (PNG; needs matplotlib).")
@click.option("--skip-naive", is_flag=True, help="Leave out path (d): at 1M memories it needs seconds per query.")
@click.option("--embedder", default=None, help=f"A model ({', '.join(MODELS)}): instead, the hybrid path vs the BM25 floor on the "
              "first size (embedding time apart, ingest with vectors, bytes per memory).")
@click.option("--inspector", is_flag=True, help="Instead, the inspector's memories page and recall playground over "
              "HTTP (p50/p95) with the first size's memories in one namespace (needs esmem[serve]).")
@click.option("--history", "dead", type=click.IntRange(1, 20), default=None,
              help="Instead, on the first size: recall (b) and (c) with 0 vs N superseded versions per active memory "
                   "(interleaved, one run; the ratio), then retention dry run and apply timed on the index with history.")
@click.option("--mixed", is_flag=True, help="Instead, recall and remember clients at once on the first size's memories in "
              "one namespace, through the library (with and without reheat: touch=False) and through `esmem serve` "
              "(needs esmem[serve]).")
@click.option("--recall-clients", type=click.IntRange(1, 256), default=16, show_default=True,
              help="With --mixed: client threads that recall.")
@click.option("--remember-clients", type=click.IntRange(1, 256), default=4, show_default=True,
              help="With --mixed: client threads that remember.")
@click.option("--seconds", type=click.FloatRange(1, 3600), default=30.0, show_default=True,
              help="With --mixed: how long each phase runs (remember alone, recall alone, both).")
@click.option("--library-only", is_flag=True, help="With --mixed: leave out the `esmem serve` path.")
@click.option("--recalls-in-flight", type=click.IntRange(1, 1024), default=2, show_default=True,
              help="With --mixed: the library and serve paths once more with at most this many recalls of the "
                   "process in the engine at once (ESMEM_RECALLS_IN_FLIGHT).")
@click.pass_context
def _bench(ctx: click.Context, sizes: list[int], namespaces: int, queries: int, k: int, seed: int,
           merge_sample: int, repeat: int, as_json: bool, plot_to: Path | None, skip_naive: bool,
           embedder: str | None, inspector: bool, dead: int | None, mixed: bool, recall_clients: int,
           remember_clients: int, seconds: float, library_only: bool, recalls_in_flight: int) -> None:
    """Benchmark recall paths (a) BM25 floor, (b) recall template, (c) MemoryStore.recall, (d) naive
    fetch-all, and ingest, on a synthetic corpus under a throwaway prefix."""
    if inspector:
        return bench_inspector(ctx, sizes[0], queries, seed, as_json)
    if mixed:
        return bench_mixed(ctx, sizes[0], recall_clients, remember_clients, seconds, k, seed, not library_only,
                           recalls_in_flight, as_json)
    if dead is not None:
        if namespaces > sizes[0]:
            raise click.BadParameter(f"{namespaces} namespaces do not fit {sizes[0]} memories",
                                     param_hint="--namespaces")
        return bench_history(ctx, sizes[0], namespaces, queries, k, seed, dead, repeat, as_json)
    if namespaces > min(sizes):
        raise click.BadParameter(f"{namespaces} namespaces do not fit {min(sizes)} memories", param_hint="--namespaces")
    if embedder:
        from esmem.cli.semantic import bench_hybrid

        return bench_hybrid(ctx, embedder, sizes[0], namespaces, queries, k, seed, repeat, as_json)
    if plot_to is not None:
        plots.require()  # before the run, not after it
    try:
        report = run(_engine(ctx), ctx.obj["prefix"], sizes, namespaces=namespaces, queries=queries, k=k, seed=seed,
                     merge_sample=merge_sample, repeat=repeat, naive=not skip_naive)
    except EsmemError as e:
        fail(str(e))
    if plot_to is not None:
        plots.bench(report, {k: v for k, v in PATHS.items() if k != "d" or not skip_naive}, plot_to)
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    for table in (latency_table(report), ingest_table(report), targets_table(report)):
        out.print(table)


def bench_inspector(ctx: click.Context, size: int, queries: int, seed: int, as_json: bool) -> None:
    """`esmem bench --inspector`: esmem.apps.bench_inspector on one namespace of `size` memories."""
    from esmem.apps.bench_inspector import run_inspector
    from esmem.cli.common import err

    with err.status("bench") as status:
        report = run_inspector(_engine(ctx), ctx.obj["prefix"], size=size, queries=queries, seed=seed,
                               advance=lambda stage: status.update(stage))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"inspector pages over HTTP, client wall ms ({report['engine']}, {size} memories in "
                        f"{report['namespace']}, ingest {report['ingest_seconds']:.0f} s)")
    for col in ("page", "n", "p50", "p95", "p99"):
        table.add_column(col, justify="left" if col == "page" else "right")
    for name, p in report["pages"].items():
        table.add_row(name, str(p["n"]), f"{p['p50']:.1f}", f"{p['p95']:.1f}", f"{p['p99']:.1f}")
    out.print(table)
    out.print(f"target: list and playground p50 < 300 ms: {'met' if report['target']['met'] else 'NOT met'}")


def bench_history(ctx: click.Context, size: int, namespaces: int, queries: int, k: int, seed: int, dead: int,
                  repeat: int, as_json: bool) -> None:
    """`esmem bench --history N`: esmem.apps.bench_history on `size` active memories."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from esmem.apps.bench_history import run_history, totals
    from esmem.cli.common import err

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err)
    tasks: dict[str, Any] = {}

    def advance(stage: str, n: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=totals(size, dead, queries, repeat)[stage])
        progress.advance(tasks[stage], n)

    try:
        with progress:
            report = run_history(_engine(ctx), ctx.obj["prefix"], size=size, namespaces=namespaces, queries=queries,
                                 k=k, seed=seed, dead=dead, repeat=repeat, advance=advance)
    except EsmemError as e:
        fail(str(e))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    docs = report["history"]["documents"]
    table = Table(title=f"recall with 0 vs {dead} superseded versions per active memory, client wall ms "
                        f"({report['engine']}, {size} active memories in {namespaces} namespaces, k={k}, "
                        f"{queries} queries interleaved" + (f", median of {repeat} passes" if repeat > 1 else "")
                        + f"; documents {' vs '.join(str(v) for v in docs.values())})")
    for col in ("path", "history", "p50", "p95", "p99", "took p50/mean", "with/without p50", "p95", "p99"):
        table.add_column(col, justify="left" if col in ("path", "history") else "right")
    for path in ("b", "c"):
        for versions in (0, dead):
            p = report["latency"]["paths"][f"{path}{versions}"]
            ratio = report["latency"]["ratio"][path] if versions else {}
            table.add_row(f"({path}) {PATHS[path]}", f"{versions} dead", f"{p['p50']:.2f}", f"{p['p95']:.2f}",
                          f"{p['p99']:.2f}", f"{p['took']['p50']:.0f}/{p['took']['mean']:.2f}",
                          *(f"{ratio[q]:.2f}" if ratio else "" for q in ("p50", "p95", "p99")))
        table.add_section()
    out.print(table)
    r = report["retention"]
    out.print(f"history: {report['history']['written']} dead versions written in {report['history']['seconds']:.1f} s")
    rules = report["config"]["retention"]
    out.print(f"retention (retired {rules['retired']}, ttl " + ", ".join(f"{k} {v}" for k, v in rules["ttl"].items())
              + f") on {r['documents']} documents: dry run lists {r['due']} in "
              f"{r['dry_run_seconds']:.2f} s; apply erases {r['deleted']} in {r['apply_seconds']:.2f} s "
              f"(still due after: {r['remaining']})")
    out.print(f"active before/after: {r['before']['active']}/{r['after']['active']} (events {r['before']['active_event']}"
              f"/{r['after']['active_event']}: their TTL), pinned {r['before']['pinned']}/{r['after']['pinned']}")


def _connection_env(ctx: click.Context) -> dict[str, str]:
    """The connection options of this command as the environment of a child `esmem` process (never
    argv, where other users of the machine could read a URL's password)."""
    env = {"ESMEM_URL": ctx.obj["url"]} if ctx.obj["url"] else {}
    for name, value in (ctx.obj.get("connection") or {}).items():
        if name == "verify_certs" and value is False:
            env["ESMEM_VERIFY_CERTS"] = "false"
        elif value is not None and name != "verify_certs":
            env[f"ESMEM_{name.upper()}"] = str(value)
    return env


def bench_mixed(ctx: click.Context, size: int, recalls: int, remembers: int, seconds: float, k: int, seed: int,
                serve: bool, recalls_in_flight: int, as_json: bool) -> None:
    """`esmem bench --mixed`: esmem.apps.bench_mixed on one namespace of `size` memories."""
    from esmem.apps.bench_mixed import POOLS, run_mixed
    from esmem.cli.common import err

    if serve:
        try:
            import fastapi, uvicorn  # noqa: F401, E401 - checked before the run, not after the library path
        except ImportError:
            fail("the serve path of --mixed needs esmem[serve] (or pass --library-only)")
    try:
        with err.status("bench") as status:
            report = run_mixed(_engine(ctx), ctx.obj["prefix"], size=size, recalls=recalls, remembers=remembers,
                               seconds=seconds, k=k, seed=seed, serve=serve, serve_env=_connection_env(ctx),
                               recalls_in_flight=recalls_in_flight,
                               advance=lambda stage: status.update(stage))
    except EsmemError as e:
        fail(str(e))
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    cfg = report["config"]
    table = Table(title=f"mixed load, client wall ms ({report['engine']}, {cfg['size']} memories in {cfg['namespace']}, "
                        f"{cfg['seconds']:.0f} s per phase, k={cfg['k']}; engine pools: mean active/queued)")
    for col in ("path", "phase", "op", "clients", "n", "per s", "p50", "p95", "p99", "errors", *POOLS):
        table.add_column(col, justify="left" if col in ("path", "phase", "op") else "right")
    for path, phases in report["paths"].items():
        for name, ph in phases.items():
            pools = [f"{ph['pools'][p]['active']:.1f}/{ph['pools'][p]['queue']:.1f}" if p in ph["pools"] else "-"
                     for p in POOLS]
            for n, (op, o) in enumerate(ph["ops"].items()):
                table.add_row(path, name, op, str(o["clients"]), str(o["n"]), f"{o['per_second']:.1f}",
                              f"{o['p50']:.1f}", f"{o['p95']:.1f}", f"{o['p99']:.1f}", str(o["errors"]),
                              *(pools if n == 0 else [""] * len(POOLS)))
        table.add_section()
    out.print(table)
    ratios = Table(title="ratios")
    for col in ("ratio", "op", "p50", "p99"):
        ratios.add_column(col, justify="left" if col in ("ratio", "op") else "right")
    for r in report["ratios"]:
        ratios.add_row(f"{r['path']}: {r['ratio']}" if r["ratio"].startswith("mixed") else r["ratio"], r["op"],
                       *("-" if r[q] is None else f"{r[q]:.2f}" for q in ("p50", "p99")))
    out.print(ratios)
    for path, phases in report["paths"].items():
        for name, ph in phases.items():
            for op, o in ph["ops"].items():
                if o["first_error"]:
                    out.print(f"{path}, {name}, {op}: {o['errors']} errors, the first: {o['first_error']}")
    out.print(targets_table({"runs": [{"size": cfg["size"], "targets": report["targets"]}]}))


bench_cmd = click.command("bench")(_bench)
