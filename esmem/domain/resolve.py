"""Query-time resolution of updates that the write-time merge did not settle.

Merge supersedes at write time when the pair's reading says the new memory replaces the old one
(esmem/domain/pairs.py). A pair it could not tell stays active and linked (`possibly_updates`), and a
paraphrased rule ("wait 1 s and retry three times" -> "back off with jitter") shares too few words to
be read as one: both stay active and the older, often the closer lexical match, ranks first.

A linked pair is resolved whatever the query: the older is put under the newer.

At recall the query says what the topic is. Two candidates of the same kind are on the same topic
for this query when the query terms they match overlap:

    same(a, b)  <=>  M(a), M(b) non-empty and |M(a) & M(b)| / |M(a) | M(b)| >= resolve_overlap
    M(x) = search tokens of the query that x's content holds (esmem/analysis.py)

and the newer one reads as an update of it - it says that something changed ("moved", "now",
"switched", "no longer", 改到, 改成, 以后, 现在, 不再...: `CHANGE`) or it matches the query about as
well (rel(newer) >= resolve_ratio * rel(older)). Then the older (valid_from) is demoted just under
the newer one:

    score(older) = min(score(older), resolve_factor * score(newer))

The "matches about as well" path applies to rules and events only; a fact, preference, intent or
note is an update only when it says so: "Redis failover drills happen monthly" matches "Redis
failover runbook" about as well as the runbook does and is no new version of it (tests/
test_context.py). Events keep the path by measurement: without it datasets/diversity.jsonl fell to
95% at the default MMR lambda (docs/concepts/ranking.md, "Updates merge cannot see").
Without the second condition two different rules of one blog ("scan for private data before
publishing an article" / "fill the article's front matter") that share the query's word "article"
would be taken for versions of one rule (datasets/rules.jsonl q02, q17).

Conversation turns (memories with a `thread`) are a transcript, not a state: they are left alone.
`resolve` is the plain-Python reference and the implementation (the scores come from the engine).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from esmem.domain.analysis import fold_han, token_set, tokens


CHANGE = re.compile(r"\b(now|moved?|changed?|switched|instead|no longer|anymore|from now on|updated?|replaced|"
                    r"raised|lowered|rescheduled|postponed|starting|from next)\b|"
                    r"改到|改成|改为|改发|改用|改吃|换成|换到|挪到|推迟|提前|现在|以后|不再|从下周|从今天|调整", re.I)


@dataclass(frozen=True)
class Resolved:
    hits: list[Mapping[str, Any]]
    demoted_by: dict[str, str]  # older memory id -> the newer one it was put under


def matched(query_tokens: frozenset[str], content: str) -> frozenset[str]:
    return query_tokens & token_set(content)


def same_topic(a: frozenset[str], b: frozenset[str], overlap: float) -> bool:
    return bool(a) and bool(b) and len(a & b) / len(a | b) >= overlap


RATIO_KINDS = ("rule", "event")


def reads_as_update(newer: str, rel_newer: float, rel_older: float, ratio: float, kind: str = "rule") -> bool:
    return _update(bool(CHANGE.search(fold_han(newer))), rel_newer, rel_older, ratio, kind)


def _update(marked: bool, rel_newer: float, rel_older: float, ratio: float, kind: str) -> bool:
    return marked or (kind in RATIO_KINDS and rel_newer >= ratio * rel_older)


def _listed(value: Any) -> list[str]:
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def resolve(hits: Sequence[Mapping[str, Any]], query: str, overlap: float, factor: float, ratio: float,
            rel: Callable[[Mapping[str, Any]], float]) -> Resolved:
    """Demote every older same-kind, same-topic candidate under a newer one that reads as its update."""
    q = frozenset(tokens(query, query=True))
    eligible = [h for h in hits if not h["_source"].get("thread")]
    m = {h["_id"]: matched(q, h["_source"]["content"]) for h in eligible}
    score = {h["_id"]: float(h["_score"]) for h in hits}
    rels = {h["_id"]: rel(h) for h in eligible}  # once per candidate, not once per pair
    marks: dict[str, bool] = {}

    def marked(h: Mapping[str, Any]) -> bool:  # read only for a newer same-topic candidate: most pairs stop before
        if h["_id"] not in marks:
            marks[h["_id"]] = bool(CHANGE.search(fold_han(h["_source"]["content"])))
        return marks[h["_id"]]
    # the pairs (old id, new id) the write-time merge left uncertain and linked (esmem/domain/merge.py):
    # the new one may update the old, whatever the query matches of them
    links = {(o, h["_id"]) for h in eligible for o in _listed(h["_source"].get("possibly_updates"))} | \
        {(h["_id"], n) for h in eligible for n in _listed(h["_source"].get("possibly_updated_by"))}
    demoted: dict[str, str] = {}
    for old in eligible:
        for new in eligible:
            if new is old:
                continue
            if (old["_id"], new["_id"]) not in links and (
                    new["_source"]["kind"] != old["_source"]["kind"]
                    or new["_source"]["valid_from"] <= old["_source"]["valid_from"]
                    or not same_topic(m[old["_id"]], m[new["_id"]], overlap)
                    or not _update(marked(new), rels[new["_id"]], rels[old["_id"]], ratio,
                                   new["_source"]["kind"])):
                continue
            cap = factor * float(new["_score"])
            if score[old["_id"]] > cap:
                score[old["_id"]] = cap
                demoted[old["_id"]] = new["_id"]
    ordered = sorted(range(len(hits)), key=lambda i: -score[hits[i]["_id"]])
    return Resolved([{**hits[i], "_score": score[hits[i]["_id"]]} for i in ordered], demoted)
