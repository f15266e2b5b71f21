"""The `esmem` command: parses arguments, calls the library, prints. No logic of its own.

Errors esmem raises on purpose print one line to stderr and exit 2; `esmem check` exits 1 on drift.
"""
from __future__ import annotations

import json
import sys
import warnings
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import click
from rich.table import Table

from esmem.apps.classes import PREVIOUS_DEFAULTS, load_saved, print_class_checks
from esmem.apps.evaluate import BASELINES
from esmem.apps.explained import result_json
from esmem.cli.common import _engine, _pairs, _store, err, fail, out, resolve_query
from esmem.domain.embedding import MODELS
from esmem.domain.installation import check as check_drift
from esmem.domain.installation import install as install_artifacts
from esmem.domain.ranking import RecallParams, params_from_strings
from esmem.domain.types import RecallResult
from esmem.engines import embedded
from esmem.errors import EngineError, EsmemError, InvalidInput, InvalidItem, TemplateRenderError
from esmem.values import KINDS, iso, parse_time, utcnow



class Group(click.Group):
    """Maps esmem's errors to a one-line message and exit code 2 (no traceback); a template render
    error keeps the lines around the fault that `templates` shows."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TemplateRenderError as e:  # its excerpt of the asset file is the point: print it whole
            fail(str(e), whole=True)
        except EsmemError as e:
            fail(str(e))
        except click.UsageError as e:  # a bad option value: one line too, not click's usage block
            fail(e.format_message())


@click.group(cls=Group)
@click.option("--url", envvar="ESMEM_URL", default=None,
              help="Cluster URL, userinfo allowed: https://user:pass@host:9200 (env ESMEM_URL).")
@click.option("--prefix", envvar="ESMEM_PREFIX", default="esmem", show_default=True,
              help="Name prefix of the index, alias, scripts and templates (env ESMEM_PREFIX).")
@click.option("--cloud-id", default=None, help="Elastic Cloud ID instead of --url (env ESMEM_CLOUD_ID).")
@click.option("--username", default=None, help="Basic-auth user (env ESMEM_USERNAME; the password only from "
                                               "ESMEM_PASSWORD or ESMEM_PASSWORD_FILE, never argv).")
@click.option("--ca-certs", default=None, help="PEM CA bundle to trust (env ESMEM_CA_CERTS).")
@click.option("--ssl-fingerprint", default=None, help="Pin the server certificate's SHA-256 (env ESMEM_SSL_FINGERPRINT).")
@click.option("--client-cert", default=None, help="Client certificate PEM (env ESMEM_CLIENT_CERT).")
@click.option("--client-key", default=None, help="Client key PEM (env ESMEM_CLIENT_KEY).")
@click.option("--insecure", is_flag=True, default=False,
              help="Do not verify TLS certificates (loud warning; env ESMEM_VERIFY_CERTS=false).")
@click.option("--aws-region", default=None, help="Sign with SigV4 for Amazon OpenSearch Service (env ESMEM_AWS_REGION).")
@click.pass_context
def cli(ctx: click.Context, url: str | None, prefix: str, cloud_id: str | None, username: str | None,
        ca_certs: str | None, ssl_fingerprint: str | None, client_cert: str | None, client_key: str | None,
        insecure: bool, aws_region: str | None) -> None:
    """esmem: long-term memory for LLM agents, ranked inside Elasticsearch/OpenSearch."""
    ctx.obj = {"url": url, "prefix": prefix,
               "connection": {"cloud_id": cloud_id, "username": username, "ca_certs": ca_certs,
                              "ssl_fingerprint": ssl_fingerprint, "client_cert": client_cert,
                              "client_key": client_key, "verify_certs": False if insecure else None,
                              "aws_region": aws_region}}
    warnings.showwarning = _one_line_warning


def _one_line_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    click.echo(f"warning: {str(message).splitlines()[0]}", err=True)


NAMESPACE_HELP = "The namespace (whose memories): 1-128 of A-Z a-z 0-9 _ . : @ -."
K_HELP = "How many memories to return."
JSON_HELP = "Print JSON instead of a table."


# -- engine ------------------------------------------------------------------------------------
_ENGINE_OPTION = click.option("--engine", "flavour", type=click.Choice(list(embedded.FLAVOURS)),
                              default=embedded.DEFAULT_FLAVOUR, show_default=True,
                              help="Which embedded engine (OpenSearch 3 needs Java 21+).")


@cli.group()
def engine() -> None:
    """Run an embedded OpenSearch node (2.19 or 3.x, built from Maven Central artifacts)."""


@engine.command("up")
@_ENGINE_OPTION
@click.option("--port", type=int, default=None, help="HTTP port (default: a free one).")
@click.option("--data", type=click.Path(path_type=Path), default=None, help="Data directory.")
@click.option("--heap", default=None, help="JVM heap per node, e.g. 1g (env ESMEM_ENGINE_HEAP).")
@click.option("--nodes", type=click.IntRange(1, 5), default=1, show_default=True,
              help="Form a cluster of this many nodes on 127.0.0.1.")
@click.option("--secure", is_flag=True, help="One 2.19 node with the security plugin: TLS, users, document-level security.")
@click.option("--no-guard", "guard", flag_value=False, default=True,
              help="With --secure: leave out esmem's guard plugin (a stock security plugin, as managed clusters run).")
def engine_up(flavour: str, port: int | None, data: Path | None, heap: str | None, nodes: int, secure: bool,
              guard: bool) -> None:
    """Start the node(s) in the background; print the URL (of the first node) as the last line."""
    if not guard and not secure:
        raise InvalidInput("--no-guard goes with --secure")
    err.print(f"starting the embedded {flavour} (the first start fetches its jars, or builds it with Maven)...")
    running = embedded.up(engine=flavour, port=port, data=data, heap=heap, nodes=nodes, secure=secure, guard=guard)
    # the port is a free one picked at each start: say how to point esmem (and any client) at it
    err.print(f"{'secured (CA ' + str(running.ca) + '); ' if running.secure else ''}connect with: "
              f"eval \"$(esmem engine env)\"\n  {_env_line(running)}", highlight=False)
    click.echo(running.url)


def _env_line(running: embedded.Running) -> str:
    """The ESMEM_* exports for a running embedded engine: paths only, the password stays in its 0600 file."""
    line = f"export ESMEM_URL={running.url}"
    if running.secure:
        from esmem.engines.embedded_secure import ADMIN_USER, files

        line += (f" ESMEM_CA_CERTS={running.ca} ESMEM_USERNAME={ADMIN_USER}"
                 f" ESMEM_PASSWORD_FILE={files(running.home).password_file}")
    return line


@engine.command("env")
@_ENGINE_OPTION
def engine_env(flavour: str) -> None:
    """Print the export line that points esmem at the running embedded engine (for `eval`)."""
    running = embedded.read_state(embedded.state_dir(flavour))
    if not running or not embedded.running_health(running):
        fail("the embedded engine is not running", 1)
    click.echo(_env_line(running))


@engine.command("lock")
@_ENGINE_OPTION
def engine_lock(flavour: str) -> None:
    """Maintainers: build with Maven, then write engine/launcher/ENGINE (jars.lock + compiled launcher)."""
    click.echo(embedded.lock(flavour))


@engine.command("image")
@_ENGINE_OPTION
@click.option("--secure", is_flag=True, help="The secured 2.19 node (TLS, users); its CA and admin password stay on this machine.")
@click.option("--base", default=None, help="Base image with Java 21+ and useradd (default: a Debian minbase made with debootstrap).")
@click.option("--suite", default="trixie", show_default=True, help="Debian suite of the debootstrap base.")
@click.option("--mirror", default=None, help="Debian mirror of the debootstrap base (default: the one apt uses here).")
@click.option("--tag", default=None, help="Image name (default: esmem/ENGINE:VERSION[-secure]).")
@click.option("--runtime", "runtime", type=click.Choice(["docker", "podman"]), default=None,
              help="Container CLI (default: docker if it answers, else podman).")
def engine_image(flavour: str, secure: bool, base: str | None, suite: str, mirror: str | None, tag: str | None,
                 runtime: str | None) -> None:
    """Build an OCI image of the embedded engine from the locked jars (no registry); print its name last."""
    from esmem.engines import container

    err.print(f"building the {flavour} image (the first build makes the base image: a few minutes)...")
    image = container.build(flavour, secure=secure, base=base, tag=tag, suite=suite, mirror=mirror, cli=runtime)
    err.print(f"built with {image.runtime} on {image.base}; run: {Path(image.runtime).name} run -d -p 9200:9200 {image.name}",
              highlight=False)
    if image.secrets:
        err.print(f"secured: trust {image.secrets / 'ca.pem'}, user admin, password in {image.secrets / 'admin-password'}",
                  highlight=False)
    click.echo(image.name)


@engine.command("status")
@_ENGINE_OPTION
def engine_status(flavour: str) -> None:
    """Exit 0 when the embedded node answers."""
    running = embedded.read_state(embedded.state_dir(flavour))
    status = embedded.running_health(running) if running else None
    if running and status:
        click.echo(f"{running.url} {status} (pid {', '.join(map(str, running.pids))}{', secured' if running.secure else ''}{'' if running.guard else ', no guard'})")
        return
    fail(f"the embedded {flavour} is not running", 1)


@engine.command("down")
@_ENGINE_OPTION
def engine_down(flavour: str) -> None:
    """Stop the embedded node(s)."""
    click.echo("stopped" if embedded.down(embedded.state_dir(flavour)) else "not running")


# -- install / check ---------------------------------------------------------------------------
@cli.command()
@click.option("--migrate", is_flag=True, help="Reindex into a new index when the mapping changed.")
@click.option("--shards", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Primary shards of a new memory index (a namespace always lives on one shard).")
@click.option("--replicas", type=click.IntRange(0, 8), default=0, show_default=True,
              help="Replicas of each shard of a new memory index.")
@click.option("--policy", "policy_path", default=None,
              help="Ranking policy (.toml/.json) rendered into the stored templates (default: esmem's).")
@click.option("--embedder", default=None,
              help=f"A model ({', '.join(MODELS)}; NAME:<dir or jar> for its files from elsewhere) or a "
                   "language (en, zh: the best measured model for it): vectors + kNN leg (needs "
                   "esmem[semantic]); none: lexical only. Default: as installed.")
@click.pass_context
def install(ctx: click.Context, migrate: bool, shards: int, replicas: int, policy_path: str | None,
            embedder: str | None) -> None:
    """Put the index template, index + alias, stored scripts and search templates (idempotent);
    the policy's ranking defaults go into the stored templates, so every client gets them."""
    from esmem.domain.embedding import load_embedder
    from esmem.domain.hybrid import spec
    from esmem.index.install import KEEP

    eng = _engine(ctx)
    params, evergreen = _policy_defaults(policy_path)
    model = load_embedder(embedder) if embedder else None
    report = install_artifacts(eng, ctx.obj["prefix"], migrate=migrate, shards=shards, replicas=replicas,
                               params=params, evergreen_kinds=evergreen,
                               embedding=KEEP if embedder is None else (spec(model) if model else None))
    for name in report.created:
        click.echo(f"created  {name}")
    for name in report.updated:
        click.echo(f"updated  {name}")
    for note in report.notes:
        click.echo(f"note     {note}")
    click.echo(f"{report.summary()} ({eng.info}, prefix {ctx.obj['prefix']})")


def _policy_defaults(path: str | None) -> tuple[RecallParams, tuple[str, ...]]:
    from esmem.domain.policy import DecayPolicy, load_policy

    policy = load_policy(path) if path else DecayPolicy()
    return policy.params(), tuple(policy.evergreen_kinds)


@cli.command()
@click.option("--policy", "policy_path", default=None,
              help="Compare the installed ranking defaults with this policy (default: esmem's).")
@click.pass_context
def check(ctx: click.Context, policy_path: str | None) -> None:
    """Compare what is installed with the repo and the policy; exit 1 naming each drift."""
    params, evergreen = _policy_defaults(policy_path)
    drift = check_drift(_engine(ctx), ctx.obj["prefix"], params=params, evergreen_kinds=evergreen)
    for line in drift:
        click.echo(f"drift    {line}")
    if drift:
        sys.exit(1)
    click.echo("no drift")


@cli.command()
@click.option("--delete-data", is_flag=True, help="Also delete the memory index and its alias (all memories).")
@click.pass_context
def uninstall(ctx: click.Context, delete_data: bool) -> None:
    """Remove the stored scripts, search templates and index template (idempotent); the data
    index and alias only with --delete-data."""
    from esmem.index.install import uninstall as remove

    removed = remove(_engine(ctx), ctx.obj["prefix"], delete_data=delete_data)
    for name in removed:
        click.echo(f"removed  {name}")
    click.echo(f"{len(removed)} removed (prefix {ctx.obj['prefix']})"
               + ("" if delete_data else "; memories kept (--delete-data removes them)"))


# -- remember / recall / explain ---------------------------------------------------------------
@cli.command()
@click.argument("content")
@click.option("-n", "--namespace", required=True, help=NAMESPACE_HELP)
@click.option("--kind", type=click.Choice(KINDS), default="fact", show_default=True,
              help="What the memory is; the kind decides its half-life.")
@click.option("--importance", type=float, default=None, help="1-10 (default: the rule-based scorer).")
@click.option("--valid-from", default=None, help="ISO-8601 time it was said (default: now).")
@click.option("--entity", "entities", multiple=True, help="An entity (repeatable).")
@click.option("--evergreen", is_flag=True, help="Never decays.")
@click.option("--source", default="user", show_default=True, help="Who said it (stored with the memory).")
@click.option("--dry-run", is_flag=True, help="Show the merge decision without writing.")
@click.option("--idempotency-key", default=None, help="Retrying with the same key lands on the same memory.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.pass_context
def remember(ctx: click.Context, content: str, namespace: str, kind: str, importance: float | None,
             valid_from: str | None, entities: tuple[str, ...], evergreen: bool, source: str,
             dry_run: bool, idempotency_key: str | None, as_json: bool) -> None:
    """Write one memory, CONTENT (supersede-merge decides added / superseded / duplicate)."""
    res = _store(ctx).remember(content, namespace, kind=kind, importance=importance, valid_from=valid_from,
                               entities=entities, evergreen=evergreen, source=source, dry_run=dry_run,
                               idempotency_key=idempotency_key)
    if as_json:
        click.echo(json.dumps(asdict(res), ensure_ascii=False))
        return
    what = {"added": "added", "superseded": f"superseded {', '.join(res.superseded)}",
            "duplicate": f"duplicate of {res.duplicate_of}",
            "outdated": f"outdated by {res.outdated_by} (kept as history)",
            "uncertain": f"added, may update {', '.join(res.possibly_updates)} (both active; see `esmem review`)"}[res.action]
    click.echo(f"{'(dry run) ' if dry_run else ''}{'(already written) ' if res.replayed else ''}{what} -> {res.id}")
    for mid, sc in res.scores.items():
        click.echo(f"  candidate {mid}: {sc['verdict']} ({sc['why']}) overlap={sc['overlap']:.2f} bm25={sc['bm25']:.2f}")


def _recall_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed([
        click.argument("query", required=False),
        click.option("--from-messages", "messages_path", default=None,
                     help="Build the query from a conversation JSON file (fillers dropped) instead of QUERY."),
        click.option("-n", "--namespace", required=True, help=NAMESPACE_HELP),
        click.option("-k", "--k", "k", type=int, default=5, show_default=True, help=K_HELP),
        click.option("--set", "sets", multiple=True, help="Override a recall parameter: key=value."),
        click.option("--now", default=None, help="Reference time (ISO-8601; default now)."),
        click.option("--as-of", default=None, help="Only memories valid at this time."),
        click.option("--json", "as_json", is_flag=True, help=JSON_HELP),
    ]):
        f = opt(f)
    return f


def _recall(ctx: click.Context, query: str | None, messages_path: str | None, namespace: str, k: int,
            sets: tuple[str, ...], now: str | None, as_of: str | None, touch: bool, explain: bool) -> RecallResult:
    store = _store(ctx)  # --set overrides the installed policy; without it the installed defaults rank
    params = params_from_strings(store.installed_params(), _pairs(sets)) if sets else None
    return store.recall(resolve_query(query, messages_path), namespace, k, params=params, now=now, as_of=as_of,
                                      touch=touch, explain=explain)


def print_result(res: RecallResult, *, explain: bool) -> None:
    table = Table(title=f"recall {res.query!r} in {res.namespace} ({res.params.mode}, {res.took_ms:.1f} ms)")
    for col in ("#", "id", "score", "rel", "rec", "imp", "reheat", "mmr", "pre-mmr", "kind", "valid_from", "content"):
        table.add_column(col, overflow="fold")
    for i, r in enumerate(res.items, 1):
        m = r.memory
        table.add_row(str(i), m.external_id or m.id[:10], f"{r.score:.4f}", f"{r.rel:.3f}", f"{r.recency:.3f}",
                      f"{m.importance:g}", f"{r.reheat:.2f}", f"{r.mmr_penalty:.3f}", str(r.rank_before_mmr), m.kind,
                      iso(m.valid_from)[:10], m.content)
    out.print(table)
    if explain:
        for i, r in enumerate(res.items, 1):
            terms = "  ".join(f"{t}={v:.2f}" for t, v in sorted(r.terms.items(), key=lambda kv: -kv[1]))
            asking = f"  asks: rel x {r.answer:.2f}" if r.answer < 1 else ""
            dated = f"  from a period the query names: rel x {r.period:g}" if r.period != 1 else ""
            timed = f"  tells a time the query asks for: rel x {r.when:g}" if r.when != 1 else ""
            out.print(f"  #{i} terms: {terms or '(no lexical match)'}{asking}{dated}{timed}")
            if r.legs:  # hybrid recall: each leg's engine score and rank
                out.print("     legs: " + "  ".join(f"{leg} #{int(v['rank'])} {v['score']:.4f}"
                                                     for leg, v in sorted(r.legs.items())))
            if r.neighbour_of or r.demoted_by:  # client-side stages (domain/threads.py, domain/resolve.py)
                out.print("     " + (f"next to {r.neighbour_of[:10]} (inherited relevance) " if r.neighbour_of else "")
                          + (f"put under the newer {r.demoted_by[:10]}" if r.demoted_by else ""))
    if res.recent:
        out.print("recent:")
        for m in res.recent:
            out.print(f"  {iso(m.valid_from)[:16]}  {m.content}")
    if res.pinned:
        out.print("pinned (applies to this request):")
        for m in res.pinned:
            out.print(f"  {m.external_id or m.id[:10]}  {m.content}")


@cli.command()
@_recall_options
@click.option("--touch/--no-touch", default=None,
              help="Record the access (reheat write-back). Default: yes, but not with a --now in the past "
                   "(replaying history is not using the memories today).")
@click.option("--explain", "explain_", is_flag=True, help="Show per-term BM25 contributions.")
@click.pass_context
def recall(ctx: click.Context, query: str | None, messages_path: str | None, namespace: str, k: int,
           sets: tuple[str, ...], now: str | None, as_of: str | None, as_json: bool, touch: bool | None,
           explain_: bool) -> None:
    """Recall the top-k memories of a namespace for QUERY (or for a conversation, --from-messages)."""
    if touch is None:
        touch = now is None or parse_time(now) >= utcnow() - timedelta(minutes=1)
    res = _recall(ctx, query, messages_path, namespace, k, sets, now, as_of, touch, explain_)
    if as_json:
        click.echo(json.dumps(result_json(res), ensure_ascii=False))
    else:
        print_result(res, explain=explain_)


@cli.command()
@_recall_options
@click.pass_context
def explain(ctx: click.Context, query: str | None, messages_path: str | None, namespace: str, k: int,
            sets: tuple[str, ...], now: str | None, as_of: str | None, as_json: bool) -> None:
    """Recall QUERY read-only and show why each memory ranked where it did."""
    res = _recall(ctx, query, messages_path, namespace, k, sets, now, as_of, False, True)
    if as_json:
        click.echo(json.dumps(result_json(res), ensure_ascii=False))
    else:
        print_result(res, explain=True)


@cli.command("export")
@click.option("-n", "--namespace", "namespaces", multiple=True, required=True, help="A namespace (repeatable).")
@click.option("--all-versions", is_flag=True, help="Every version (history, tombstones), not only active memories.")
@click.option("--no-vectors", is_flag=True, help="Leave the embeddings out (the target re-embeds, or is lexical).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the export to this file instead of stdout.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted export into --output (same namespaces and options): after its last "
                   "complete line, a truncated last line written again (OpenSearch: memories are in id order).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary on stderr.")
@click.pass_context
def export_(ctx: click.Context, namespaces: tuple[str, ...], all_versions: bool, no_vectors: bool,
            output: Path | None, resume: bool, quiet: bool) -> None:
    """Write the namespaces' memories to stdout (or --output) as an export file (`esmem import --restore`
    reads it). A progress bar on stderr when it is a terminal."""
    from rich.progress import Progress

    from esmem.domain.export import Resume, selection

    if resume and output is None:
        fail("--resume continues an export file: give it with --output")
    store = _store(ctx)
    with Progress(console=err, transient=True, disable=quiet or not err.is_terminal) as bar:
        task = bar.add_task("exporting", total=store.catalog.count_matching(selection(namespaces, all_versions)))

        def started(point: Resume) -> None:
            bar.update(task, completed=point.count)
            if point.count and not quiet:
                err.print(f"resuming after {point.count} memories already in {output}")
        def advance(n: int) -> None:
            bar.advance(task, n)
        if output is None:
            count = store.export(sys.stdout, namespaces, all_versions=all_versions, vectors=not no_vectors,
                                 progress=advance)
        else:
            count = store.export_to(str(output), namespaces, all_versions=all_versions, vectors=not no_vectors,
                                    resume=resume, progress=advance, start=started)
    if not quiet:
        err.print(f"exported {count} memories" + (f" to {output}" if output else ""))


@cli.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("-n", "--namespace", default="default", show_default=True, help="For lines without one.")
@click.option("--no-merge", is_flag=True, help="Index every line, no supersede-merge.")
@click.option("--dry-run", is_flag=True, help="Decide without writing.")
@click.option("--restore", "restore_", is_flag=True,
              help="FILE is an `esmem export`: recreate its memories exactly (ids, links, statistics), no merge.")
@click.pass_context
def import_(ctx: click.Context, file: Path, namespace: str, no_merge: bool, dry_run: bool, restore_: bool) -> None:
    """Import memories from the JSONL FILE in file order (merge decisions batched with _msearch)."""
    from rich.progress import Progress

    from esmem.domain.export import read_header
    from esmem.domain.merge import MergePolicy
    from esmem.domain.jsonl import read_jsonl

    header = read_header(str(file))
    if restore_ or header:
        if not restore_:
            fail(f"{file} is an esmem export: restore it with `esmem import --restore {file}`")
        if dry_run or no_merge:
            fail("--restore writes the file as exported: --dry-run and --no-merge do not apply")
        store = _store(ctx)
        with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:
            task = bar.add_task(f"restoring {file.name}", total=None)
            restored = store.restore_export(str(file), progress=lambda n: bar.advance(task, n),
                                            total=lambda n: bar.update(task, total=n))
        click.echo(f"{restored.restored} memories restored"
                   + (f", {restored.existed} already there" if restored.existed else ""))
        return
    items, line_of = read_jsonl(str(file), namespace)
    store = _store(ctx, merge=MergePolicy(enabled=not no_merge))
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        bar.advance(task, n)

    try:
        with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:  # errors stay one line
            task = bar.add_task(f"importing {file.name}", total=len(items))
            results = store.remember_many(items, dry_run=dry_run, progress=advance)
    except InvalidItem as e:
        fail(f"{file}:{line_of[e.position]}: {e.reason}")
    except InvalidInput as e:
        fail(f"{file}:{line_of[0]}: {e}" if len(items) == 1 else str(e))
    except EngineError as e:
        if dry_run:
            raise
        fail(f"{e} -- {done[0]} of {len(items)} lines are durably imported (up to line "
             f"{line_of[done[0] - 1] if done[0] else 0}); re-run the same command to resume: the import is idempotent")
    counts = {a: sum(r.action == a and not r.replayed for r in results)
              for a in ("added", "superseded", "duplicate", "outdated", "uncertain")}
    replayed = sum(r.replayed for r in results)
    click.echo(f"{'(dry run) ' if dry_run else ''}{len(results)} memories: {counts['added']} added, "
               f"{counts['superseded']} merged, {counts['duplicate']} duplicate, {counts['outdated']} outdated, "
               f"{counts['uncertain']} uncertain" + (f", {replayed} already imported" if replayed else ""))


@cli.command()
@click.option("-n", "--namespace", "namespaces", multiple=True,
              help="Erase this namespace (repeatable); with --entity or --ids: only within it.")
@click.option("--entity", default=None, help="Every memory that names or mentions this entity.")
@click.option("--ids", "ids", multiple=True, help="These memory ids (repeatable, or comma-separated).")
@click.option("--dry-run", is_flag=True, help="List what would be erased; erase nothing.")
@click.option("--yes", is_flag=True, help="Confirm: erasing cannot be undone.")
@click.pass_context
def erase(ctx: click.Context, namespaces: tuple[str, ...], entity: str | None, ids: tuple[str, ...],
          dry_run: bool, yes: bool) -> None:
    """Delete memories for good (every version), print the proof (a count that must be 0) and keep an
    audit record without content. Refuses without --yes."""
    store = _store(ctx)
    wanted = [i for arg in ids for i in arg.split(",") if i.strip()]
    if not dry_run and not yes:
        preview = store.erase(namespaces=namespaces, entity=entity, ids=wanted, dry_run=True)
        fail(f"this would erase {preview.covered} memories for good: add --yes to confirm "
             "(--dry-run lists them)")
    done = store.erase(namespaces=namespaces, entity=entity, ids=wanted, dry_run=dry_run)
    if dry_run:
        for i in done.ids:
            click.echo(i)
        click.echo(f"(dry run) {done.covered} memories would be erased")
        return
    click.echo(f"erased {done.deleted} memories (selector: {done.selector}); "
               f"still matching after refresh: {done.remaining}; audit record {done.audit_id}")
    if done.remaining:
        sys.exit(1)


@cli.command("retention")
@click.option("--policy", "policy_path", required=True, help="The policy file (.toml/.json) with a [retention] table.")
@click.option("-n", "--namespace", "namespaces", multiple=True, help="Only these namespaces (default: all).")
@click.option("--dry-run", is_flag=True, help="List what would be erased; erase nothing.")
@click.option("--yes", is_flag=True, help="Confirm: erasing cannot be undone.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a summary.")
@click.pass_context
def retention_cmd(ctx: click.Context, policy_path: str, namespaces: tuple[str, ...], dry_run: bool, yes: bool,
                  as_json: bool) -> None:
    """Erase what the policy's [retention] rules say has been kept long enough (pinned memories never)."""
    from collections import Counter

    from esmem.domain.policy import load_policy

    policy = load_policy(policy_path)
    if policy.retention_rules.empty:
        fail(f"{policy_path} has no [retention] rule: nothing would ever be erased")
    store = _store(ctx)
    if dry_run or not yes:
        counts: Counter[tuple[str, str, str]] = Counter()
        for d in store.retention_due(policy, namespaces):
            counts[(d.kind, d.status, d.rule)] += 1
            if as_json and dry_run:
                click.echo(json.dumps(asdict(d), ensure_ascii=False))
        total = sum(counts.values())
        if not dry_run:
            fail(f"this would erase {total} memories for good: add --yes to confirm (--dry-run lists them)")
        if not as_json:
            for (kind, status, rule), n in sorted(counts.items()):
                click.echo(f"{n:>8}  {kind:<10} {status:<10} ({rule})")
            click.echo(f"(dry run) {total} memories would be erased")
        return
    done = store.apply_retention(policy, namespaces)
    click.echo(f"erased {done.deleted} memories; still due after refresh: {done.remaining}; "
               f"audit record {done.audit_id}")
    if done.remaining:
        sys.exit(1)


@cli.command("audit")
@click.option("--last", type=click.IntRange(1, 10_000), default=100, show_default=True, help="How many of the newest audit records to print.")
@click.pass_context
def audit_cmd(ctx: click.Context, last: int) -> None:
    """Print the erase and retention audit records (JSON lines, newest first): when, which selector
    (SHA-256 digests of its values), how many memories went and how many still matched."""
    for record in _store(ctx).catalog.audit_records(last):
        click.echo(json.dumps(record, ensure_ascii=False))


# -- history / restore -------------------------------------------------------------------------
@cli.command()
@click.argument("memory_id")
@click.option("-n", "--namespace", required=True, help=NAMESPACE_HELP)
@click.pass_context
def history(ctx: click.Context, memory_id: str, namespace: str) -> None:
    """Show the version chain of the memory MEMORY_ID, oldest first."""
    for m in _store(ctx).history(namespace, memory_id):
        click.echo(f"{m.id}  {m.status:<10} {iso(m.valid_from)[:19]}  {m.content}")


@cli.command()
@click.argument("memory_id")
@click.option("-n", "--namespace", required=True, help=NAMESPACE_HELP)
@click.option("--keep-successor", is_flag=True, help="Keep the successor active too (the merge was wrong).")
@click.pass_context
def restore(ctx: click.Context, memory_id: str, namespace: str, keep_successor: bool) -> None:
    """Reactivate the superseded memory MEMORY_ID (undo a merge)."""
    m = _store(ctx).restore(namespace, memory_id, retire_successor=not keep_successor)
    click.echo(f"{m.id} is {m.status} again")


@cli.command()
@click.option("-n", "--namespace", required=True, help="The namespace whose open pairs to list or settle.")
@click.option("--replaces", nargs=2, metavar="OLDER NEWER", help="Settle a pair: NEWER replaces OLDER.")
@click.option("--coexists", nargs=2, metavar="OLDER NEWER", help="Settle a pair: both stay true (unlinked).")
@click.option("--judge", "use_judge", is_flag=True,
              help="Let the chat judge of ESMEM_JUDGE_URL / ESMEM_JUDGE_MODEL settle every open pair.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def review(ctx: click.Context, namespace: str, replaces: tuple[str, str] | None, coexists: tuple[str, str] | None,
           use_judge: bool, as_json: bool) -> None:
    """List the merge decisions left uncertain (both memories active, linked), or settle them."""
    store = _store(ctx)
    if sum(bool(x) for x in (replaces, coexists, use_judge)) > 1:
        fail("give one of --replaces, --coexists, --judge")
    pair = replaces or coexists
    if pair:
        older, newer = pair
        store.settle(namespace, older, newer, "replaces" if replaces else "coexists")
        click.echo(f"{newer} {'replaces' if replaces else 'coexists with'} {older} (recorded on both)")
        return
    if use_judge:
        from esmem.domain.llm_judge import ChatJudge

        counts = store.review_with(ChatJudge.from_env(), namespace)
        click.echo(f"judge settled {counts['replaces']} as replaces, {counts['coexists']} as coexists; "
                   f"{counts['open']} left open")
        return
    open_pairs = store.review(namespace)
    if as_json:
        click.echo(json.dumps([{"older": {"id": p.older.id, "content": p.older.content},
                                "newer": {"id": p.newer.id, "content": p.newer.content}, "kind": p.newer.kind}
                               for p in open_pairs], ensure_ascii=False))
        return
    from rich.table import Table

    table = Table(title=f"{len(open_pairs)} open uncertain pairs in {namespace}")
    for col in ("older", "newer (may replace it)", "kind"):
        table.add_column(col)
    for p in open_pairs:
        table.add_row(f"{p.older.id}\n{p.older.content}", f"{p.newer.id}\n{p.newer.content}", p.newer.kind)
    out.print(table)


@cli.command()
@click.option("-n", "--namespace", "namespaces", multiple=True,
              help="A namespace to repair (repeatable); default: every namespace of the prefix.")
@click.option("--apply", "apply_", is_flag=True, help="Undo the listed supersessions (default: only list them).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def repair(ctx: click.Context, namespaces: tuple[str, ...], apply_: bool, as_json: bool) -> None:
    """List the supersessions today's merge decision would not make again; --apply undoes them."""
    store = _store(ctx)
    targets = list(namespaces) or sorted(store.recaller.namespaces())
    found = [f for ns in targets for f in store.repair(ns, apply=apply_)]
    if as_json:
        click.echo(json.dumps([asdict(f) for f in found], ensure_ascii=False))
        return
    from rich.table import Table

    table = Table(title=f"{len(found)} supersessions the decision would not make again"
                        + (" (undone)" if apply_ else " (dry run: --apply undoes them)"))
    for col in ("namespace", "older (retired)", "newer", "now"):
        table.add_column(col)
    for f in found:
        table.add_row(f.namespace, f"{f.older}\n{f.older_text}", f"{f.newer}\n{f.newer_text}", f"{f.verdict}: {f.why}")
    out.print(table)


# -- eval --------------------------------------------------------------------------------------
METRIC_COLUMNS = ("p@1", "r@3", "r@5", "r@10", "mrr", "ndcg@5", "stale@1", "saving", "p50_ms", "p95_ms")


def _metric_row(m: dict[str, float], columns: tuple[str, ...] = METRIC_COLUMNS) -> list[str]:
    pct = {"p@1", "r@3", "r@5", "r@10", "stale@1", "saving", "reach", "intrude@k"}
    return ["-" if c not in m or m[c] != m[c] else f"{m[c] * 100:.1f}%" if c in pct
            else f"{m[c]:.3f}" if c in ("mrr", "ndcg@5") else f"{m[c]:.1f}" for c in columns]


@cli.command("eval")
@click.argument("dataset", required=False, type=click.Path(path_type=Path))
@click.option("--locomo", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Evaluate LoCoMo conversations from this folder (esmem vs the bm25 baseline).")
@click.option("-k", "--k", "k", type=click.IntRange(1, 100), default=5, show_default=True, help=K_HELP)
@click.option("--set", "sets", multiple=True, help="Override a recall or merge parameter: key=value.")
@click.option("--sweep", default=None, help="key=v1,v2,...: one row per value.")
@click.option("--baseline", type=click.Choice(BASELINES), default=None,
              help="Run a baseline instead of esmem: newest first (recency) or plain BM25 (bm25).")
@click.option("--no-merge", is_flag=True, help="Ingest without supersede-merge.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw the sweep as a PNG (needs matplotlib).")
@click.option("--misses/--no-misses", default=True, show_default=True, help="Print every miss with its terms.")
@click.option("--embedder", default=None, help=f"A model ({', '.join(MODELS)}): also run esmem hybrid (kNN leg fused with BM25; "
              "--set knn_weight=, fusion=convex|rrf, rrf_k=).")
@click.option("--compare", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A saved `esmem eval --json` run: print per group what changed against it.")
@click.option("--previous", is_flag=True, help="Also run the previous ranking defaults (no pinned section, "
              "resolution or neighbour expansion) and print per group what the current defaults change.")
@click.pass_context
def eval_(ctx: click.Context, dataset: Path | None, locomo: Path | None, k: int, sets: tuple[str, ...],
          sweep: str | None, baseline: str | None, no_merge: bool, as_json: bool, plot: Path | None,
          misses: bool, embedder: str | None, compare: Path | None, previous: bool) -> None:
    """Measure retrieval quality of the JSONL DATASET (or of LoCoMo, --locomo) on the engine."""
    from esmem.apps import evaluate as ev
    from esmem.apps import miss_patterns
    from esmem.apps import plots
    from esmem.domain.embedding import load_embedder
    from esmem.domain.hybrid import default_fusion

    source = locomo or dataset
    if source is None or (dataset is not None and locomo is not None):
        fail("give either a DATASET file or --locomo DIR")
    if plot:
        plots.require()  # before the run, not after it
    dropped: list[str] = []
    data = ev.locomo_dataset(source, dropped) if locomo else ev.load_dataset(source)
    saved = load_saved(compare) if compare else None
    if dropped:
        err.print(f"LoCoMo evidence left out of the gold ({len(dropped)}): " + "; ".join(dropped))
    model = load_embedder(embedder)
    runs = ev.plan_runs(_pairs(sets), k, sweep=sweep, baseline=baseline, merge=not no_merge, locomo=bool(locomo),
                        semantic=default_fusion(model) if model is not None else None)
    if previous and not sweep and not baseline:
        runs.insert(1, ("previous defaults", ev.RunConfig(params_from_strings(runs[0][1].params, PREVIOUS_DEFAULTS),
                                                          runs[0][1].merge, k)))
    evaluation = ev.Evaluation(_engine(ctx), data, f"{ctx.obj['prefix']}-eval", embedder=model)
    results = []
    try:
        from rich.progress import Progress

        with Progress(console=err, transient=True) as bar:
            for label, cfg in runs:
                task = bar.add_task(label, total=len(data.queries))
                outcomes = evaluation.run(cfg, explain_misses=misses and not as_json and not sweep,
                                          progress=lambda: bar.advance(task))
                rep = {**ev.report(outcomes), "patterns": miss_patterns.count(outcomes, data)}
                results.append((label, cfg, rep, ev.misses(outcomes, data)))
    finally:
        evaluation.close()
    if as_json:
        if len(results) == 1:
            label, cfg, rep, _ = results[0]
            click.echo(json.dumps({**rep, "config": cfg.as_dict()}, ensure_ascii=False))
        else:
            click.echo(json.dumps({"runs": [{"label": label, **rep, "config": cfg.as_dict()}
                                            for label, cfg, rep, _ in results]}, ensure_ascii=False))
        return
    table = Table(title=f"{'LoCoMo' if locomo else dataset} (k={k})")
    for col in ("run", "group", "n", *METRIC_COLUMNS):
        table.add_column(col, justify="right")
    for label, _, rep, _ in results:
        for group, m in [("overall", rep["overall"]), *rep["groups"].items()]:
            table.add_row(label, group, f"{m['queries']:.0f}", *_metric_row(m))
    out.print(table)
    print_class_checks(out, [(label, rep) for label, _, rep, _ in results], saved)
    for label, _, rep, _ in results:  # esmem/apps/miss_patterns.py
        out.print(f"{label}: top-1 not gold with " + ", ".join(f"{n.replace('_', ' ')} {c}"
                                                            for n, c in rep["patterns"].items()))
    if misses:
        for label, _, _, missed in results[:1] if not sweep else []:
            for miss in missed:
                out.print(f"miss {miss['query']} [{miss['group']}] {miss['text']!r}: gold {list(miss['gold'])} "
                          f"at rank {miss['gold_rank'] or '-'}; top-1 {miss['top1']} {miss['top1_content']!r}")
                if miss["top1_terms"]:
                    out.print("     top-1 terms: " + "  ".join(f"{t}={v:.2f}" for t, v in miss["top1_terms"].items()))
    if plot:
        plots.eval_sweep(plot, [(label, rep) for label, _, rep, _ in results])
        err.print(f"wrote {plot}")


@cli.command()
@click.option("--data", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Dataset JSONL (default: the bundled datasets/demo.jsonl).")
@click.pass_context
def demo(ctx: click.Context, data: Path | None) -> None:
    """The quickstart: engine (embedded unless --url/ESMEM_URL), install, demo memories, explained recalls."""
    from esmem.apps import demo as job

    started = not ctx.obj["url"]
    if started:
        err.print("no ESMEM_URL: starting the embedded OpenSearch (the first start fetches its jars, or builds it with Maven)...")
        ctx.obj["url"] = embedded.up().url
    eng = _engine(ctx)
    done = job.run(eng, ctx.obj["prefix"], data)
    out.print(f"engine {eng.info} at {eng.url}; install: {done.installed.summary()}")
    counts = {a: sum(r.action == a and not r.replayed for r in done.written)
              for a in ("added", "superseded", "duplicate", "outdated", "uncertain")}
    replayed = sum(r.replayed for r in done.written)
    out.print(f"remembered {len(done.written)} demo memories: {counts['added']} added, {counts['superseded']} merged "
              f"(an update superseded an older rule), {counts['duplicate']} duplicate (already there), "
              f"{counts['outdated']} outdated (older than what is there: kept as history), "
              f"{counts['uncertain']} uncertain (may update an older one: both kept)"
              + (f", {replayed} written by an earlier run" if replayed else ""))
    for res in done.recalls:
        print_result(res, explain=True)
    out.print(f"try: ESMEM_URL={eng.url} esmem explain '429 怎么重试' -n demo"
              + ("   (the embedded engine keeps running: `esmem engine down` stops it)" if started else ""))


def _register() -> None:
    from esmem.cli.agent import config_cmd, context_cmd, stats_cmd
    from esmem.cli.bench import bench_cmd
    from esmem.cli.grant import grant_cmd, revoke_cmd
    from esmem.cli.mcp import mcp_cmd
    from esmem.cli.semantic import embed_cmd, merge_pairs_cmd
    from esmem.cli.serve import serve_cmd, serve_key_cmd
    from esmem.cli.ui import ui_cmd

    for command in (config_cmd, context_cmd, stats_cmd, bench_cmd, mcp_cmd, grant_cmd, revoke_cmd, embed_cmd,
                    merge_pairs_cmd, serve_cmd, serve_key_cmd, ui_cmd):
        cli.add_command(command)


_register()


def main() -> None:
    cli(prog_name="esmem")


if __name__ == "__main__":
    main()
