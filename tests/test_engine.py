"""The engine adapter and the embedded node: detection, refusal of unsupported engines, plugins."""
from __future__ import annotations


import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.installation import install
from esmem.engines.embedded import free_port
from esmem.errors import EngineUnavailable, NotFound, UnsupportedEngine
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine, detect
from esmem.index.install import uninstall
from fake_root import fake_root  # tests/fake_root.py (tests/ is on sys.path under pytest)


@pytest.fixture(params=[{"number": "7.17.9"}, {"number": "1.3.14", "distribution": "opensearch"}])
def old_cluster(request: pytest.FixtureRequest):
    """A cluster too old for esmem (only its `GET /`): for detection tests, not for ranking."""
    with fake_root(request.param) as (url, _):
        yield url, request.param["number"]


def test_detects_the_engine_family_and_version(engine: Engine) -> None:
    info = detect(engine.config)
    assert info.family in ("opensearch", "elasticsearch")
    assert info.major in ((2, 3) if info.family == "opensearch" else (8, 9))


_OS_MODULES = ["org.opensearch.transport.Netty4", "org.opensearch.painless.Painless",
               "org.opensearch.script.mustache.Mustache", "org.opensearch.analysis.common.CommonAnalysis",
               "org.opensearch.index.mapper.MapperExtras", "org.opensearch.index.reindex.Reindex"]
NEEDED = {  # what esmem uses, as each engine names it in _nodes/plugins (plugins + modules)
    # a difference between the majors: OpenSearch 3 renamed the module classes to *ModulePlugin
    "opensearch-2": [m + "Plugin" for m in _OS_MODULES],
    "opensearch-3": [m + "ModulePlugin" for m in _OS_MODULES],
    "elasticsearch": ["transport-netty4", "lang-painless", "lang-mustache", "analysis-common", "mapper-extras",
                      "reindex"],
}


def test_every_needed_plugin_is_loaded(engine: Engine) -> None:
    nodes = engine.request("GET", "/_nodes/plugins")["nodes"]
    key = "classname" if engine.info.family == "opensearch" else "name"
    loaded = {p[key] for node in nodes.values() for p in node.get("plugins", []) + node.get("modules", [])}
    which = f"opensearch-{engine.info.major}" if engine.info.family == "opensearch" else "elasticsearch"
    missing = [n for n in NEEDED[which] if n not in loaded]
    assert not missing, (missing, sorted(loaded))


def test_painless_mustache_and_cjk_bigram_work(engine: Engine) -> None:
    painless = engine.request("POST", "/_scripts/painless/_execute",
                              {"script": {"source": "params.a * 2 + 1", "params": {"a": 20}}})
    assert painless["result"] == "41"
    rendered = engine.request("POST", "/_render/template",
                              {"source": '{"query": {"match": {"f": "{{q}}"}}}', "params": {"q": 'a "quoted" \\ x'}})
    assert rendered["template_output"]["query"]["match"]["f"] == 'a "quoted" \\ x'
    tokens = engine.request("POST", "/_analyze", {"tokenizer": "standard", "filter": ["cjk_bigram"], "text": "记忆库"})
    assert [t["token"] for t in tokens["tokens"]] == ["记忆", "忆库"]


def test_adapter_maps_errors_and_records_requests(engine: Engine) -> None:
    seen = []
    eng = Engine(engine.config, recorder=lambda m, p, b, q: seen.append((m, p, b, q)))
    with pytest.raises(NotFound):
        eng.request("GET", "/esmem-no-such-index-xyz/_doc/1")
    assert seen == [("GET", "/esmem-no-such-index-xyz/_doc/1", None, None)]


@pytest.mark.fresh_prefix("uninstalls and installs its prefix again")
def test_a_write_after_uninstall_creates_no_index_under_the_alias_name(engine: Engine, installed: str) -> None:
    """A reheat write-back that outlives `uninstall` used to auto-create an index named like the alias,
    and the next install of the prefix then failed ("an index exists with the same name as the alias")."""
    store = MemoryStore(engine, installed)
    memory = store.remember("the billing service owns invoices", "late")
    alias = store.alias
    uninstall(engine, installed)
    resp = engine.bulk([{"update": {"_index": alias, "_id": memory.id, "routing": "late"}}, {"doc": {"x": 1}}])
    assert resp["items"][0]["update"]["status"] == 404
    assert engine.request("GET", f"/_cat/indices/{installed}-*", params={"format": "json"}) == []
    install(engine, installed)  # the prefix installs again


def test_nothing_listening_is_engine_unavailable() -> None:
    with pytest.raises(EngineUnavailable, match="no engine answers"):
        detect(f"http://127.0.0.1:{free_port()}")


def test_unsupported_engines_are_refused(old_cluster) -> None:
    url, number = old_cluster
    with pytest.raises(UnsupportedEngine, match=number.replace(".", r"\.")):
        Engine(url).info


def test_cli_install_against_closed_port_exits_2_with_one_line() -> None:
    res = CliRunner().invoke(cli, ["--url", f"http://127.0.0.1:{free_port()}", "install"])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and res.output.startswith("error: no engine answers")
    assert "Traceback" not in res.output


def test_cli_install_against_unsupported_engine_exits_2(old_cluster) -> None:
    url, number = old_cluster
    res = CliRunner().invoke(cli, ["--url", url, "install"])
    assert res.exit_code == 2
    assert res.output.strip() == res.output.strip().splitlines()[0]
    assert "not supported" in res.output and number in res.output


def test_bm25_is_on_the_lucene_9_scale_on_every_engine(engine: Engine, installed: str) -> None:
    """Lucene 10 (OpenSearch 3, Elasticsearch 9) dropped BM25's constant (k1 + 1) factor; the templates
    boost by EngineInfo.bm25_boost, so the merge lookup scores the documented formula everywhere."""
    import math

    from esmem.domain.analysis import tokens
    from esmem.domain.merge import MergePolicy
    from esmem.domain.store import MemoryStore
    from esmem.domain.types import MemoryInput

    docs = ["Waters the tomatoes every morning", "Reads science fiction", "Cycles to work",
            "Plays chess online", "Waters the roses in the evening"]
    MemoryStore(engine, installed, merge=MergePolicy(enabled=False)).remember_many(
        [MemoryInput(d, "scale") for d in docs])
    engine.request("POST", f"/{installed}-memories/_refresh")
    got = MemoryStore(engine, installed).remember("Waters the tomatoes", "scale", dry_run=True).scores
    lengths = [len(tokens(d)) for d in docs]
    avgdl, k1, b = sum(lengths) / len(docs), engine.info.K1, 0.75

    def bm25(doc: str) -> float:
        toks = tokens(doc)
        total = 0.0
        for term in set(tokens("Waters the tomatoes", query=True)) & set(toks):
            df = sum(term in tokens(d) for d in docs)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            tf = toks.count(term)
            total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(toks) / avgdl))
        return total

    expected = sorted((round(bm25(d), 4) for d in docs if bm25(d) > 0), reverse=True)
    assert sorted((round(s["bm25"], 4) for s in got.values()), reverse=True) == expected
    assert engine.info.bm25_boost == (1.0 if int(engine.info.lucene.split(".")[0]) < 10 else k1 + 1)
