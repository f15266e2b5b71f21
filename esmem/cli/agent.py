"""The agent-facing commands `esmem config`, `esmem stats` and `esmem context` (registered by esmem.cli.main).

Like esmem.cli.main they only parse, call the library and print. esmem.cli.main's helpers are imported inside
each command because esmem.cli.main imports this module to register the commands.
"""
from __future__ import annotations

import json
from pathlib import Path

import click

from esmem.apps import plots
from esmem.apps.context import ORDERS, build_context
from esmem.apps.growth import Growth
from esmem.apps.growth import growth as compute_growth
from esmem.apps.stats import collect
from esmem.domain.policy import DecayPolicy, load_policy
from esmem.domain.ranking import default_values, params_from_strings


def _policy(path: str | None) -> DecayPolicy:
    return load_policy(path) if path else DecayPolicy()


@click.command("config")
@click.option("--policy", "path", default=None, help="Decay policy file (.toml or .json) to show.")
@click.option("--file", "file_alias", default=None, hidden=True,
              help="The former spelling of --policy, kept for scripts that use it.")
@click.option("--set", "sets", multiple=True, help="Override a recall parameter: key=value.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def config_cmd(ctx: click.Context, path: str | None, file_alias: str | None, sets: tuple[str, ...],
               as_json: bool) -> None:
    """Show the ranking defaults: installed in the cluster (with --url/ESMEM_URL), or of a policy
    file (--policy), or esmem's built-in ones; and the recall parameters they produce."""
    from esmem.cli.common import _engine, _pairs
    from esmem.domain.installation import installed_policy

    path = path or file_alias

    if path is None and ctx.obj.get("url"):
        installed = installed_policy(_engine(ctx), ctx.obj["prefix"])
        source, base, evergreen = f"installed under prefix {ctx.obj['prefix']}", installed.params, \
            installed.evergreen_kinds
        policy_dict = None
    else:
        policy = _policy(path)
        source, base, evergreen = path or "(built-in defaults)", policy.params(), tuple(policy.evergreen_kinds)
        policy_dict = policy.as_dict()
    params = params_from_strings(base, _pairs(sets))
    if as_json:
        click.echo(json.dumps({"source": source, "policy": policy_dict, "params": params.as_dict(),
                               "defaults": default_values(params, evergreen)}, ensure_ascii=False))
        return
    click.echo(f"policy: {source}")
    click.echo(f"  {'evergreen_kinds':<20} {', '.join(evergreen) or '-'}")
    for name, value in params.as_dict().items():
        if name == "kind_half_lives":
            for kind, hl in value.items():
                click.echo(f"  {'hl.' + kind:<20} {hl}")
        else:
            click.echo(f"  {name:<20} {value}")


@click.command("stats")
@click.option("-n", "--namespace", default=None, help="One namespace (default: all of the prefix).")
@click.option("--top", type=click.IntRange(1, 100), default=5, show_default=True, help="Length of the hit lists.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a PNG dashboard here (needs matplotlib).")
@click.option("--growth", is_flag=True,
              help="Show growth instead: versions and bytes per namespace, from the index's own statistics.")
@click.option("--project", type=click.IntRange(1), default=None,
              help="With --growth: the index size at this many active memories, at today's bytes per memory.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --growth: the index size after --days days of this many writes a day.")
@click.option("--days", type=click.IntRange(1), default=365, show_default=True,
              help="With --growth --rate: how many days to project.")
@click.pass_context
def stats_cmd(ctx: click.Context, namespace: str | None, top: int, as_json: bool, plot_path: Path | None,
              growth: bool, project: int | None, rate: float | None, days: int) -> None:
    """Monitoring: memories by kind/status, hit analysis, age of recalled memories, merges; or, with
    --growth, what the memories cost on disk and how that grows."""
    from esmem.cli.common import _store

    if (project is not None or rate is not None) and not growth:
        raise click.UsageError("--project and --rate need --growth")
    if growth:
        _print_growth(compute_growth(_store(ctx), namespace, project=project, rate=rate, days=days), as_json)
        return
    st = collect(_store(ctx), namespace, top=top)
    if plot_path:
        plots.require()
        plots.stats_dashboard(st, plot_path)
    if as_json:
        click.echo(json.dumps(st.as_dict(), ensure_ascii=False))
        return
    where = f"namespace {st.namespace}" if st.namespace else \
        f"{st.namespaces} namespace{'' if st.namespaces == 1 else 's'}"
    click.echo(f"{st.total} memories ({st.active} active) in {where} under prefix {st.prefix}")
    click.echo("by status: " + ", ".join(f"{k}={v}" for k, v in sorted(st.by_status.items())))
    for kind, counts in sorted(st.by_kind.items()):
        click.echo(f"  {kind:<11} " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    click.echo("importance rules: " + ", ".join(f"{k}={v}" for k, v in sorted(st.by_importance_rule.items())))
    click.echo(f"recalled {st.recalled}, never recalled {st.never_recalled}")
    for m in st.most_recalled:
        click.echo(f"  {m.access_count:>5}x  {m.id}  {m.content[:60]}")
    click.echo("age when last recalled: " + ", ".join(f"{k}={v}" for k, v in st.recall_age.items()))
    click.echo(f"superseded {st.superseded}, superseding {st.superseding}, restated {st.restated}")
    if plot_path:
        click.echo(f"plot written to {plot_path}")


def _print_growth(g: Growth, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(g.as_dict(), ensure_ascii=False))
        return
    click.echo(f"index: {g.index_documents} documents ({g.deleted_documents} deleted, not merged yet), "
               f"{g.store_bytes} bytes, {g.bytes_per_document:.0f} bytes/document (primaries)")
    click.echo(f"{'namespace':<24} {'active':>8} {'superseded':>10} {'outdated':>8} {'forgotten':>9} "
               f"{'other':>6} {'versions/active':>15} {'bytes/memory':>12}")
    for n in g.namespaces:
        click.echo(f"{n.namespace:<24} {n.active:>8} {n.superseded:>10} {n.outdated:>8} {n.forgotten:>9} "
                   f"{n.other:>6} {n.versions_per_active:>15.2f} {n.bytes_per_memory:>12.0f}")
    click.echo(f"all: {g.active} active, {g.versions} versions, {g.versions_per_active:.2f} versions/active, "
               f"{g.bytes_per_memory:.0f} bytes per active memory")
    if g.projected_memories is not None and g.projected_bytes is not None:
        click.echo(f"projected: {g.projected_memories} active memories -> {g.projected_bytes / 2**20:.1f} MiB "
                   f"({g.projected_bytes:.0f} bytes, primaries, without replicas)")
    if g.rate is not None and g.projected_rate_bytes is not None:
        click.echo(f"projected: {g.rate:g} writes a day for {g.days} days -> {g.projected_rate_bytes / 2**20:.1f} MiB "
                   f"({g.projected_rate_bytes:.0f} bytes, primaries, without replicas)")


@click.command("context")
@click.argument("query", required=False)
@click.option("-n", "--namespace", required=True, help="The namespace (whose memories).")
@click.option("-k", "--k", "k", type=int, default=5, show_default=True,
              help="How many recalled memories the block may hold.")
@click.option("--budget", type=click.IntRange(1), default=800, show_default=True,
              help="Character budget of the block.")
@click.option("--tokens", "budget_tokens", type=click.IntRange(1), default=None, help="Also cap the estimated tokens.")
@click.option("--recent", type=click.IntRange(0, 100), default=3, show_default=True,
              help="Recent memories in the 'Recent conversation' section.")
@click.option("--order", type=click.Choice(ORDERS), default="relevance", show_default=True,
              help="Order of the relevant memories in the block.")
@click.option("--from-messages", "messages_path", default=None,
              help="Build the query from a conversation (JSON list of {role, content}).")
@click.option("--policy", "policy_path", default=None, help="Decay policy file (.toml or .json).")
@click.option("--now", default=None, help="Reference time (ISO-8601; default now).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the block.")
@click.pass_context
def context_cmd(ctx: click.Context, query: str | None, namespace: str, k: int, budget: int,
                budget_tokens: int | None, recent: int, order: str, messages_path: str | None,
                policy_path: str | None, now: str | None, as_json: bool) -> None:
    """Recall QUERY (or the query built --from-messages) and print the prompt block an agent pastes
    before its question."""
    from esmem.cli.common import _store, resolve_query

    query = resolve_query(query, messages_path)
    store = _store(ctx)  # without --policy the policy installed in the cluster ranks
    params = (_policy(policy_path).params() if policy_path else store.installed_params()).with_(recent_n=recent)
    result = store.recall(query, namespace, k, params=params, now=now)
    block = build_context(store, result, budget_chars=budget, budget_tokens=budget_tokens, order=order)
    if as_json:
        click.echo(json.dumps({"query": query, **block.as_dict()}, ensure_ascii=False))
        return
    click.echo(block.text)
    click.echo(f"{block.chars} of {budget} chars (~{block.tokens} tokens); all active memories of {namespace}: "
               f"{block.namespace_chars} chars", err=True)
