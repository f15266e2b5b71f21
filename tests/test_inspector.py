"""The memory inspector in a real headless Chromium (Playwright driving Debian's chromium) on the real engine.

The pages show the engine's own numbers (the playground's factors are those of `esmem explain --json`),
a restore from a memory's page lands in the store's history, memory text renders as text (no script of a
memory ever runs), writes need the page's CSRF token and the inspector's origin, and a namespace the
credentials or the API key may not see is a 404 page by URL. Each page's screenshot goes to
docs/guides/img/ (the docs page docs/guides/inspector.md shows them).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from click.testing import CliRunner

from esmem.apps.api_keys import Keyring, add_key
from esmem.apps.bench_inspector import Background
from esmem.apps.evaluate import load_dataset
from esmem.apps.http_api import create_app
from esmem.apps.inspector import browse, create_ui
from esmem.cli.main import cli
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.engines import embedded
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine
from esmem.index.grant import grant, revoke
from esmem.index.install import uninstall
from listening import free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "guides" / "img"
CHROMIUM = os.environ.get("ESMEM_CHROMIUM", "/usr/bin/chromium")
NOW = "2026-12-01T12:00:00Z"
HOSTILE = '<script>alert("memory")</script><img src=x onerror="alert(1)"> & <b>bold</b>'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium: a missing browser skips here and fails under ESMEM_REQUIRE_BROWSER=1 (CI).

    Module-scoped: Playwright's sync API keeps an event loop running on the test's thread while it is
    open, and a later test of another module calling `asyncio.run` must not find it there."""
    missing = None if shutil.which(CHROMIUM) else f"no chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package is not installed (the dev extra)"
    if missing:
        if os.environ.get("ESMEM_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page of a fresh browser context (its own cookies), recording every dialog a script would open."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    p = context.new_page()
    p.dialogs = []
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    yield p
    context.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Background]]:
    started: list[Background] = []

    def start(make_store: Callable[[], MemoryStore], **options: Any) -> Background:
        started.append(Background(create_ui(make_store, **options)))
        return started[-1]

    yield start
    for s in started:
        s.stop()


def _demo(store: MemoryStore) -> None:
    store.remember_many([m for _, m in load_dataset(ROOT / "datasets" / "demo.jsonl").memories])


def _shot(page: Any, name: str) -> None:
    """A full-page screenshot; into the docs only when asked (a run on several engines would race for the files)."""
    png = page.screenshot(full_page=True)
    assert png.startswith(b"\x89PNG")
    if os.environ.get("ESMEM_DOCS_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / f"inspector-{name}.png").write_bytes(png)


def test_the_playgrounds_factors_are_those_of_explain_json(engine: Engine, installed: str, page: Any,
                                                           serve: Callable[..., Background]) -> None:
    store = MemoryStore(engine, installed)
    _demo(store)
    ui = serve(lambda: MemoryStore(engine, installed))
    page.goto(ui.url + "/")
    assert page.locator("#namespaces tr[data-namespace=demo]").count() == 1
    _shot(page, "namespaces")
    page.click("text=demo")
    page.wait_for_url(ui.url + "/ns/demo")
    page.wait_for_load_state()
    assert page.locator("#memories tr[data-id]").count() > 5
    _shot(page, "memories")
    page.goto(ui.url + "/ns/demo/recall")
    page.fill("input[name=q]", "spicy food")
    page.fill("input[name=now]", NOW)
    page.click("#playground button[type=submit]")
    page.wait_for_load_state()
    rows = page.locator("#hits tr.hit")
    assert rows.count() > 0
    shown = [{"id": rows.nth(i).get_attribute("data-id"), "score": float(rows.nth(i).get_attribute("data-score")),
              **{c.get_attribute("data-factor"): float(c.get_attribute("data-value"))
                 for c in rows.nth(i).locator("td.factor").all()}} for i in range(rows.count())]
    _shot(page, "recall")
    out = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "explain", "spicy food", "-n", "demo",
                                   "--now", NOW, "--json"])
    assert out.exit_code == 0, out.output
    explained = json.loads(out.output)["items"]
    assert [s["id"] for s in shown] == [e["id"] for e in explained]
    for s, e in zip(shown, explained):
        for key in ("score", "rel", "answer", "recency", "importance_part", "reheat", "mmr_penalty"):
            assert s[key] == pytest.approx(e[key], rel=1e-9, abs=1e-12), (s["id"], key)
    bars = page.locator("#hits tr.hit").first.locator("svg.factors rect")
    assert bars.count() == 6  # one segment per factor


def test_a_restore_from_the_memory_page_is_in_the_history(engine: Engine, installed: str, page: Any,
                                                         serve: Callable[..., Background]) -> None:
    store = MemoryStore(engine, installed)
    first = store.remember("The deploy window is Tuesday 10:00", "ops", kind="rule", valid_from="2026-01-01T00:00:00Z")
    second = store.remember("The deploy window is now Thursday 14:00", "ops", kind="rule",
                            valid_from="2026-02-01T00:00:00Z")
    assert second.action == "superseded" and first.id in second.superseded
    ui = serve(lambda: MemoryStore(engine, installed), allow_writes=True)
    page.goto(f"{ui.url}/ns/ops/m/{second.id}")
    chain = page.locator("#chain .version")
    assert [chain.nth(i).get_attribute("data-id") for i in range(chain.count())] == [first.id, second.id]
    assert "superseded by" in chain.first.inner_text()  # the pair reading of the merge
    _shot(page, "memory")
    page.locator(f"#chain .version[data-id='{first.id}'] button.restore").click()
    page.wait_for_load_state()
    assert {m.id: m.status for m in store.history("ops", first.id)}[first.id] == "active"
    assert store.get("ops", second.id).status == "retired"  # restore retires the version that replaced it
    assert page.locator(f"#chain .version[data-id='{first.id}']").get_attribute("data-status") == "active"


def test_writes_need_the_pages_token_and_the_inspectors_origin(engine: Engine, installed: str,
                                                               serve: Callable[..., Background]) -> None:
    store = MemoryStore(engine, installed)
    first = store.remember("The office opens at 8", "ops", valid_from="2026-01-01T00:00:00Z")
    store.remember("The office opens at 9 now", "ops", valid_from="2026-02-01T00:00:00Z")
    assert store.get("ops", first.id).status == "superseded"
    ui = serve(lambda: MemoryStore(engine, installed), allow_writes=True)
    page_html = httpx.get(f"{ui.url}/ns/ops/m/{first.id}").text
    token = page_html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    target = f"{ui.url}/ns/ops/m/{first.id}/restore"
    for fields, origin in (({"csrf": "forged"}, ui.url), ({}, ui.url), ({"csrf": token}, "https://evil.example"),
                           ({"csrf": token}, None)):
        headers = {"origin": origin} if origin else {}
        r = httpx.post(target, data=fields, headers=headers)
        assert r.status_code == 403, (fields, origin)
    assert store.get("ops", first.id).status == "superseded"  # nothing was written
    read_only = serve(lambda: MemoryStore(engine, installed))
    r = httpx.post(f"{read_only.url}/ns/ops/m/{first.id}/restore", data={"csrf": token},
                   headers={"origin": read_only.url})
    assert r.status_code == 403 and store.get("ops", first.id).status == "superseded"
    r = httpx.post(target, data={"csrf": token}, headers={"origin": ui.url})
    assert r.status_code == 303 and store.get("ops", first.id).status == "active"
    for bad in ("/ns/ops?min_importance=lots", "/ns/ops?kind=gossip", "/ns/ops/recall?q=office&k=0",
                "/ns/ops?after=not-a-cursor", "/ns/bad%20name"):  # an error page, never a traceback
        r = httpx.get(ui.url + bad)
        assert r.status_code == 400 and r.headers["content-type"].startswith("text/html"), bad
        assert 'id="error"' in r.text and "Traceback" not in r.text, bad


def test_a_memory_with_html_and_script_renders_as_text(engine: Engine, installed: str, page: Any,
                                                       serve: Callable[..., Background]) -> None:
    store = MemoryStore(engine, installed)
    _demo(store)
    hostile = store.remember(HOSTILE + " deploy notes", "demo", kind="note")
    ui = serve(lambda: MemoryStore(engine, installed))
    for path in ("/ns/demo", f"/ns/demo/m/{hostile.id}", "/ns/demo/recall?q=deploy+notes+bold"):
        page.goto(ui.url + path)
        assert HOSTILE in page.locator("main").inner_text(), path
        assert page.locator("main script, main img, main b").count() == 0, path
    assert page.dialogs == []
    page.goto(ui.url + "/ns/demo/stats")
    assert page.locator("#decay polyline").count() == 6 and page.locator("#ages tr").count() > 1
    _shot(page, "stats")
    assert page.dialogs == []


def test_another_namespace_is_a_404_page_for_the_gate_and_for_an_api_key(engine: Engine, installed: str, page: Any,
                                                                        serve: Callable[..., Background],
                                                                        tmp_path: Path,
                                                                        request: pytest.FixtureRequest) -> None:
    store = MemoryStore(engine, installed)
    secret = store.remember("the launch code is quetzal-77", "secret-ns")
    store.remember("the cafeteria opens at noon", "open-ns")
    ui = serve(lambda: MemoryStore(engine, installed), namespaces=["open-ns"])
    token = add_key(tmp_path / "keys.json", "open-key", ["open-ns"])
    keys = Keyring.load(tmp_path / "keys.json")
    api = create_app(lambda: MemoryStore(engine, installed), keys)  # as `esmem serve --ui` mounts it
    api.mount("/ui", create_ui(lambda: MemoryStore(engine, installed), keys=keys))
    keyed = Background(api)
    request.addfinalizer(keyed.stop)
    page.goto(ui.url + "/")
    assert page.locator("#namespaces tr[data-namespace]").all_inner_texts()[0].startswith("open-ns")
    assert "secret-ns" not in page.content()
    for path in ("/ns/secret-ns", f"/ns/secret-ns/m/{secret.id}", "/ns/secret-ns/recall?q=launch+code",
                 f"/ns/open-ns/m/{secret.id}", "/ns/secret-ns/stats", "/ns/secret-ns/review"):
        response = page.goto(ui.url + path)
        assert response.status == 404 and "quetzal" not in page.content(), path
    page.goto(keyed.url + "/ui/ns/open-ns")  # not signed in: the sign-in page
    assert page.locator("input[name=key]").count() == 1 and "cafeteria" not in page.content()
    page.fill("input[name=key]", token)
    page.click("button[type=submit]")
    page.wait_for_url(keyed.url + "/ui/")
    page.wait_for_load_state()
    assert page.locator("#namespaces tr[data-namespace]").count() == 1
    assert "secret-ns" not in page.content()  # the namespaces page lists the key's namespaces only
    page.click("a[href='/ui/ns/open-ns']")
    page.wait_for_url(keyed.url + "/ui/ns/open-ns")
    page.wait_for_load_state()
    assert "cafeteria" in page.content() and token not in page.content()
    response = page.goto(keyed.url + "/ui/ns/secret-ns")
    assert response.status == 404 and "quetzal" not in page.content()


@pytest.mark.own_engine
def test_a_confined_user_sees_only_its_namespaces(secured: embedded.Running, secured_admin: Engine, page: Any,
                                                  serve: Callable[..., Background], tmp_path: Path) -> None:
    prefix, user = f"ui{uuid.uuid4().hex[:8]}", f"agent-ui-{uuid.uuid4().hex[:6]}"
    install(secured_admin, prefix)
    try:
        admin = MemoryStore(secured_admin, prefix)
        admin.remember("alpha ships on Mondays", "alpha-ns")
        other = admin.remember("the payroll password is okapi-42", "payroll-ns")
        grant(secured_admin, prefix, user, ["alpha-ns"], tmp_path / "agent.pw", shared_index=True)
        agent = Engine(ConnectionConfig(url=secured.url, ca_certs=str(secured.ca), username=user,
                                        password=(tmp_path / "agent.pw").read_text().strip()))
        ui = serve(lambda: MemoryStore(agent, prefix))
        page.goto(ui.url + "/")
        assert page.locator("#namespaces tr[data-namespace]").count() == 1, page.inner_text("main")
        assert "alpha-ns" in page.content() and "payroll" not in page.content()
        for path in ("/ns/payroll-ns", f"/ns/payroll-ns/m/{other.id}", f"/ns/alpha-ns/m/{other.id}",
                     "/ns/payroll-ns/recall?q=payroll+password"):
            response = page.goto(ui.url + path)
            assert response.status == 404 and "okapi" not in page.content(), path
        agent.close()
    finally:
        revoke(secured_admin, prefix, user)
        uninstall(secured_admin, prefix)


def test_pages_of_a_namespace_cover_every_match_once_even_with_equal_times(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False))
    written = store.remember_many([MemoryInput(f"ticket {i} was closed", "many", kind="event" if i % 3 else "fact",
                                               valid_from="2026-03-01T00:00:00Z" if i % 2 else f"2026-02-{1 + i % 28:02d}")
                                   for i in range(120)])
    seen, sizes, after = [], [], ""
    while True:
        page = browse(store, "many", after=after)
        seen += [m.id for m in page.memories]
        sizes.append(len(page.memories))
        assert page.total == 120
        if page.after is None:
            break
        after = page.after
    assert sizes == [50, 50, 20] and sorted(seen) == sorted(r.id for r in written)
    facts = browse(store, "many", kind="fact", size=100)
    assert facts.total == 40 and {m.kind for m in facts.memories} == {"fact"} and facts.after is None
    assert browse(store, "many", text="ticket 7").total >= 1


def test_esmem_ui_serves_read_only_on_localhost_and_logs_no_query_or_memory(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed)
    mid = store.remember("the vault combination is 31-41-59", "cli-ns").id
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from esmem.cli.main import main; main()", "--url", engine.url,
                             "--prefix", installed, "ui", "--port", str(port), "-n", "cli-ns"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(proc, port)
        base = f"http://127.0.0.1:{port}"
        page_ = httpx.get(f"{base}/ns/cli-ns/recall", params={"q": "vault combination"}, timeout=60)
        assert page_.status_code == 200 and "31-41-59" in page_.text
        assert page_.headers["content-security-policy"].startswith("default-src 'none'")
        memory_page = httpx.get(f"{base}/ns/cli-ns/m/{mid}", timeout=60).text
        assert "31-41-59" in memory_page and 'method="post"' not in memory_page  # read-only: no write form
        assert httpx.get(f"{base}/ns/other-ns", timeout=60).status_code == 404
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert {"method": "GET", "route": "/ns/{namespace}/recall", "namespace": "cli-ns", "status": 200}.items() \
        <= logged[0].items()
    assert "vault" not in stderr and "31-41-59" not in stderr
    password = os.environ.get("ESMEM_PASSWORD")
    assert not password or password not in stderr


def test_merge_review_confirm_and_dismiss_from_the_page(engine: Engine, installed: str, page: Any,
                                                        serve: Callable[..., Background]) -> None:
    store = MemoryStore(engine, installed)
    pairs = {}
    for ns in ("nursery", "garden"):
        old = store.remember("We plan to tile the bathroom floor with slate.", ns, valid_from="2026-01-01T00:00:00Z")
        new = store.remember("We plan to tile the bathroom floor with marble.", ns, valid_from="2026-02-01T00:00:00Z")
        assert new.action == "uncertain"
        pairs[ns] = (old.id, new.id)
    ui = serve(lambda: MemoryStore(engine, installed), allow_writes=True)
    page.goto(ui.url + "/ns/nursery/review")
    assert page.locator("#pending tr[data-older]").count() == 1
    _shot(page, "review")
    page.click("button[value=replaces]")
    page.wait_for_load_state()
    assert page.locator("#pending tr[data-older]").count() == 0 and store.review("nursery") == []
    older, newer = pairs["nursery"]
    assert store.get("nursery", older).status == "superseded" and store.get("nursery", newer).status == "active"
    page.goto(ui.url + "/ns/garden/review")
    page.click("button[value=coexists]")
    page.wait_for_load_state()
    older, newer = pairs["garden"]
    assert store.review("garden") == [] and {store.get("garden", i).status for i in (older, newer)} == {"active"}
    assert store.get("garden", newer).reviews[0]["verdict"] == "coexists"
