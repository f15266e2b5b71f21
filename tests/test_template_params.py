"""Every parameter of every stored search template, called over plain HTTP with sections, lists, objects,
null, missing, numbers and strings: the namespace filter stays the caller's namespace string (0 rows
of another namespace; 0 hits without a string namespace), no call is an HTTP 500 or carries a Java
stack frame, and a bad number of a stored script is an HTTP 400 naming the parameter."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esmem.domain.installation import artifacts, install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidParameter
from esmem.index.catalog import Catalog, Search
from esmem.index.engine import Engine
from esmem.index.install import uninstall

pytestmark = pytest.mark.plain_http  # talks to the engine itself (urllib)

OWN, OTHER = "alice", "bob"
SECRET = "zebrasecret"  # a word only the other namespace's memories hold
# Templates that span namespaces by design (the write path's, `esmem stats`', the inspector's and the migration's look-ups):
# names, counts, times and ids, or memories of the namespaces a list names. Checked for 500s and stack frames only.
SPANNING = {"namespaces", "groups", "written_since", "overview", "underived"}
JAVA_FRAME = re.compile(r"\bat (?:org|java|jdk|com|sun)\.[\w.$]+\(|java\.base/|\.java:\d+\)")
MUSTACHE_NAME = re.compile(r"\{\{[#^/]?\s*([A-Za-z_][\w.]*)\s*\}\}")

# Numbers the stored scripts read, with values each must refuse naming the parameter
FUSE_KNOBS = {"w", "k", "c", "alpha", "beta", "gamma"}
BAD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e309", "bob", "-1"]
BAD_DURATIONS = ["0", "0d", "-1d", "NaN", "bob", "1e309d", "7x", "d"]


def http(url: str, path: str, body: Any) -> tuple[int, str]:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture(scope="module")
def world(engine_url: str) -> Iterator[tuple[str, str, dict[str, list[str]]]]:
    """Two namespaces with distinct memories (every kind, evergreen, important), and the parameters
    each installed template reads (from its installed source)."""
    engine = Engine(engine_url)
    prefix = f"t{uuid.uuid4().hex[:10]}"
    install(engine, prefix)
    try:
        store = MemoryStore(engine, prefix, merge=MergePolicy(enabled=False))
        for ns, word in ((OWN, "pin"), (OTHER, SECRET)):
            store.remember_many([
                MemoryInput(f"{ns} {word} code is 1234 redis cache", ns, kind="fact", importance=9),
                MemoryInput(f"{ns} {word} prefers tea redis", ns, kind="preference"),
                MemoryInput(f"{ns} {word} plans a trip to beijing", ns, kind="intent"),
                MemoryInput(f"{ns} {word} always answer in english", ns, kind="rule", evergreen=True),
                MemoryInput(f"{ns} {word} met the team on monday redis", ns, kind="event"),
                MemoryInput(f"{ns} {word} note about the cache", ns, kind="note", importance=2)])
        store.catalog.refresh()
        params = {}
        for art in artifacts(engine, prefix):
            if art.kind == "script" and art.body["script"]["lang"] == "mustache":
                names = {n.split(".")[0] for n in MUSTACHE_NAME.findall(art.body["script"]["source"])}
                params[art.name.removeprefix(f"{prefix}-")] = sorted(names - {"toJson", "join", "url"})
        yield engine_url, prefix, params
    finally:
        uninstall(engine, prefix, delete_data=True)
        engine.close()


def test_the_world_holds_every_template_and_parameter(world) -> None:
    _, _, params = world
    assert {"recall", "recent", "lookup", "pinned", "stats", "count", "neighbours", "bm25", "namespace_chars"} <= set(params)
    assert {"namespace", "query", "w", "k", "exhaustive", "rel_only", "half_life_fact", "must_not_miss_boost",
            "kinds", "as_of", "now"} <= set(params["recall"])
    assert params["stats"] == ["namespace", "top"]


SECTIONS = st.sampled_from([{"namespace": OTHER}, [{"namespace": OTHER}], [{"namespace": OTHER}, {"namespace": OTHER}],
                            {"namespace": [OTHER]}, {"namespaces": [OTHER]}, {"value": OTHER}, {}, []])
NUMBERS = st.one_of(st.sampled_from(BAD_NUMBERS + BAD_DURATIONS + ["0", "0.5", "1", "7d", "none", "false", "1e-320"]),
                    st.integers(-10**20, 10**20), st.floats(allow_nan=False))
STRINGS = st.one_of(st.sampled_from(["{{namespace}}", OTHER, '"}', '"}}]}}', "\\", "[]", "", "*", "redis pin",
                                     '{"match_all": {}}', "2026-10-08T12:00:00Z", "{{#toJson}}namespace{{/toJson}}"]),
                    st.text(max_size=20))
VALUES = st.one_of(SECTIONS, NUMBERS, STRINGS, st.none(), st.booleans(),
                   st.lists(st.one_of(st.text(max_size=8), st.integers(), st.just(OTHER)), max_size=3))
MISSING = object()


def _truthy(v: Any) -> bool:
    """Mustache's test: a section renders for anything but null, false, "" and an empty list."""
    return v not in (None, False, "", []) and v is not MISSING


def _no_window(value: Any) -> bool:
    """A rescore window the engine reads as 0 (or less): no hit is fused, so no script reads a number."""
    try:
        return value is not None and value is not MISSING and not isinstance(value, (dict, list, bool)) \
            and int(float(value)) < 1
    except (TypeError, ValueError):
        return False


def _bad_script_numbers(template: str, params: dict[str, Any]) -> set[str]:
    """The parameters the stored scripts read on every fused call and must refuse (a subset: values
    known to be bad whatever the engine's number parser, given as strings)."""
    if template != "recall" or _truthy(params.get("rel_only")) or _no_window(params.get("rescore_window")):
        return set()
    bad = {k for k in FUSE_KNOBS if params.get(k) in BAD_NUMBERS or (k == "k" and params.get(k) in ("0", "-1"))}
    bad |= {k for k, v in params.items() if k.startswith("half_life_") and v in BAD_DURATIONS}
    return bad


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_parameter_reaches_another_namespace_or_fails_the_server(world, data) -> None:
    url, prefix, params = world
    template = data.draw(st.sampled_from(sorted(params)), label="template")
    names = params[template]
    chosen = data.draw(st.dictionaries(st.sampled_from(names), st.one_of(VALUES, st.just(MISSING)),
                                       min_size=1, max_size=5), label="params") if names else {}
    call = {"namespace": OWN, "query": "redis pin", "namespaces": [OWN], "size": 10, "after_seq_no": -1,
            "ids": []} | chosen
    call = {k: v for k, v in call.items() if v is not MISSING and (k in names)}
    if call.get("namespace") == OTHER or call.get("namespaces") == [OTHER]:
        call["namespace"] = OWN  # asking for the other namespace by name is allowed: not what is tested
    status, text = http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-{template}", "params": call})

    assert status in (200, 400), text
    assert not JAVA_FRAME.search(text), text
    body = json.loads(text)
    if status == 400:
        named = re.findall(r"param (\w+) must", text)
        assert set(named) <= set(call), (named, call)
        return
    hits = body["hits"]["hits"]
    assert not _bad_script_numbers(template, call) or not hits, (call, hits[:1])
    if template in SPANNING:
        return
    assert SECRET not in text, (call, text[:500])
    assert all(h["_source"].get("namespace", OWN) == OWN for h in hits)
    if "namespace" in names and not isinstance(call.get("namespace"), str):
        assert hits == [] and body["hits"].get("total", {"value": 0})["value"] == 0, (call, text[:500])


@pytest.mark.parametrize("param,values", [*((k, BAD_NUMBERS) for k in sorted(FUSE_KNOBS)),
                                          ("k", ["0"]), ("half_life_fact", BAD_DURATIONS),
                                          ("half_life_intent", BAD_DURATIONS), ("now", ["bob", "2026-13-45", "-"])])
def test_a_bad_number_of_a_stored_script_is_a_400_naming_it(world, param: str, values: list[str]) -> None:
    url, prefix, _ = world
    for value in values:
        call = {"namespace": OWN, "query": "redis pin", "half_life_fact": "30d", param: value}
        status, text = http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-recall", "params": call})
        assert status == 400, (value, text)
        assert f'"param {param} must' in text and not JAVA_FRAME.search(text), text
        assert json.loads(text)["error"]["caused_by"]["caused_by"]["type"] == "illegal_argument_exception"


def test_a_bad_time_cue_or_its_boost_is_a_400_naming_it(world) -> None:
    url, prefix, _ = world
    calls = [("periods", {"periods": bad}) for bad in ("bob", "2023-13", "*", "20231-01", "2023-", "-06", "2023,x", "*-0")]
    calls += [("period_boost", {"periods": "*-01,2026", "period_boost": bad}) for bad in [*BAD_NUMBERS, "0.5"]]
    calls += [("asks_when", {"asks_when": bad}) for bad in ("yes", "1", "TRUE", "{}")]
    calls += [("when_boost", {"asks_when": True, "when_boost": bad}) for bad in [*BAD_NUMBERS, "0.5"]]
    for param, sent in calls:
        status, text = http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-recall", "params": {
            "namespace": OWN, "query": "redis pin", **sent}})
        assert status == 400 and f'"param {param} must' in text and not JAVA_FRAME.search(text), (sent, text)
    status, text = http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-recall", "params": {
        "namespace": OWN, "query": "redis pin", "periods": " 2026 , *-12,1999-01", "period_boost": "3",
        "asks_when": True, "when_boost": "2"}})
    assert status == 200 and json.loads(text)["hits"]["hits"], text


def test_must_not_miss_boost_is_checked_where_it_is_used(world) -> None:
    url, prefix, _ = world
    for value in BAD_NUMBERS:
        status, text = http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-recall", "params": {
            "namespace": OWN, "query": "nothing matches this", "must_not_miss": True, "must_not_miss_boost": value}})
        assert status == 400 and '"param must_not_miss_boost must' in text and not JAVA_FRAME.search(text), text


def test_the_python_client_raises_invalid_parameter_naming_it(world) -> None:
    url, prefix, _ = world
    catalog = Catalog(Engine(url), prefix)
    with pytest.raises(InvalidParameter) as one:
        catalog.search(Search("recall", {"namespace": OWN, "query": "redis", "w": "NaN"}))
    assert one.value.param == "w" and one.value.status == 400 and "[0, 1]" in str(one.value)
    with pytest.raises(InvalidParameter) as many:
        catalog.msearch([Search("recall", {"namespace": OWN, "query": "redis", "half_life_intent": "0"})])
    assert many.value.param == "half_life_intent"


@pytest.mark.parametrize("template,section", [("recall", "exhaustive"), ("recall", "rel_only"), ("recall", "as_of"),
                                              ("recall", "must_not_miss"), ("recall", "kinds"), ("recall", "min_importance"),
                                              ("stats", "namespace"),
                                              ("count", "namespace"), ("recent", "as_of"), ("lookup", "after_seq_no")])
def test_a_section_on_an_object_does_not_choose_the_namespace(world, template: str, section: str) -> None:
    url, prefix, _ = world
    for value in ({"namespace": OTHER, "as_of": "2030-01-01T00:00:00Z", "after_seq_no": -1},
                  [{"namespace": OTHER}], None):
        call = {"namespace": OWN, "query": "redis", section: value}
        if section == "namespace":
            call = {section: value} if value is not None else {}
        status, text = http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-{template}", "params": call})
        assert status in (200, 400) and SECRET not in text, (value, text[:400])
        if status == 200 and section == "namespace":
            assert json.loads(text)["hits"]["total"]["value"] == 0


def test_min_importance_filters_only_the_calls_that_give_it(world) -> None:
    """Every memory holds an importance of 1 to 10, so the default call renders no importance range;
    a call's min_importance still leaves out the memories below it, and the same memories pass either way."""
    url, prefix, _ = world

    def recalled(**extra: str) -> set[str]:
        status, text = http(url, f"/{prefix}-memories/_search/template",
                            {"id": f"{prefix}-recall", "params": {"namespace": OWN, "query": "cache", **extra}})
        assert status == 200, text[:400]
        return {h["_source"]["content"] for h in json.loads(text)["hits"]["hits"]}

    def ranges(**extra: str) -> list[Any]:
        status, text = http(url, "/_render/template", {"id": f"{prefix}-recall", "params": {"namespace": OWN, **extra}})
        assert status == 200, text[:400]
        filters = json.loads(text)["template_output"]["query"]["bool"]["filter"]
        return [f["range"]["importance"] for f in filters if "importance" in f.get("range", {})]

    note, code = f"{OWN} pin note about the cache", f"{OWN} pin code is 1234 redis cache"
    assert ranges() == [] and ranges(min_importance="3") == [{"gte": "3"}]
    assert recalled() == recalled(min_importance="1") == recalled(min_importance="2") == {note, code}
    assert recalled(min_importance="3") == {code}
    assert http(url, f"/{prefix}-memories/_search/template", {"id": f"{prefix}-recall", "params": {
        "namespace": OWN, "query": "cache", "min_importance": "lots"}})[0] == 400


TAG = re.compile(r"\{\{([#^/]?)\s*([^}]*?)\s*\}\}")


def test_namespace_is_rendered_only_outside_every_section(world) -> None:
    """A section on a caller's object pushes it onto the lookup scope: {{namespace}} inside one would
    read the object's own key. Every installed template renders it at top level only."""
    url, prefix, params = world
    for template in params:
        with urllib.request.urlopen(f"{url}/_scripts/{prefix}-{template}", timeout=30) as resp:
            source = json.load(resp)["script"]["source"]
        open_sections: list[str] = []
        for kind, name in TAG.findall(source):
            if kind in "#^" and kind:
                open_sections.append(kind + name)
            elif kind == "/":
                assert open_sections and open_sections.pop()[1:] == name, (template, name)
            elif name == "namespace":
                assert not [s for s in open_sections if s.startswith("#")], (template, open_sections)
        assert not open_sections, (template, open_sections)
