"""Pinned memories: a bounded, relevance-gated section of a recall instead of ranked slots.

A memory is pinned when it is evergreen or its importance reaches `importance_floor` (an allergy,
a condition, a password...). Giving such memories free ranked slots put "I am allergic to
penicillin" into the top 3 of "429 怎么重试" (datasets/pinned.jsonl), so they take no ranked slots by
default (`must_not_miss` off); a recall instead returns up to `pinned` of them in their own section
(`RecallResult.pinned`, the context block's first section) when they apply:

- they match the query lexically (content or entities), or
- the query names a situation they apply to: `applies_to`, trigger terms written at write time
  (given by the caller, or derived from the importance rule that fired: an allergy applies to
  eating out and to prescriptions), or
- they are evergreen: standing instructions apply to every request.

A pinned memory keeps a ranked slot only when its relevance reaches `pinned_min_share` of the best
candidate's (`gate`): a lexical match on one incidental word does not make it the answer.

A lexical system cannot know that antibiotics concern a penicillin allergy; the trigger terms are
that knowledge, written once per memory where it is cheap instead of guessed at every recall.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from esmem.domain.analysis import fold_han
from esmem.errors import InvalidInput

MAX_APPLIES_TO_CHARS = 2000

_FOOD = ("food eat eating meal dinner lunch breakfast brunch snack restaurant takeout takeaway delivery recipe "
         "cook cooking menu dish cafe bakery bake cake dessert buffet barbecue "
         "外卖 点餐 餐厅 饭店 饭馆 吃饭 晚饭 午饭 早饭 晚餐 午餐 早餐 做饭 菜谱 零食 蛋糕 甜点 火锅 烧烤 聚餐 食堂")
_MEDICAL = ("doctor medicine medication drug pill prescribe prescription antibiotic pharmacy hospital clinic "
            "vaccine injection surgery treatment anesthesia dentist tooth "
            "医生 医院 看病 开药 吃药 药物 药店 处方 抗生素 打针 疫苗 输液 手术 治疗 麻醉 牙医 拔牙 门诊")
_ACTIVITY = "exercise workout gym run running hike hiking sport 运动 健身 跑步 爬山 徒步 锻炼"
_DRINK = "alcohol drink drinking wine beer bar 喝酒 饮酒 酒吧"
_LOGIN = "login log sign account credentials password 登录 账号 账户 密码"

# (pattern on the content, situations): the first match wins; else the importance rule's default.
_SPECIFIC: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"penicillin|antibiotic|aspirin|ibuprofen|sulfa|latex|青霉素|抗生素|阿司匹林|头孢", re.I), _MEDICAL),
    (re.compile(r"peanut|\bnuts?\b|seafood|shellfish|shrimp|gluten|lactose|milk|egg|soy|wheat|花生|坚果|海鲜|虾|蟹|"
                r"乳糖|牛奶|鸡蛋|麸质|芒果", re.I), _FOOD),
    (re.compile(r"diabet|糖尿病", re.I), f"{_FOOD} {_DRINK} {_MEDICAL}"),
    (re.compile(r"ulcer|gastritis|溃疡|胃炎", re.I), f"{_FOOD} {_DRINK} {_MEDICAL}"),
    (re.compile(r"asthma|heart|哮喘|心脏", re.I), f"{_ACTIVITY} {_MEDICAL}"),
    (re.compile(r"pregnan|怀孕", re.I), f"{_FOOD} {_DRINK} {_MEDICAL} {_ACTIVITY}"),
    (re.compile(r"blood[- ]thinner|warfarin|anticoagul|insulin|抗凝|华法林|胰岛素", re.I), f"{_MEDICAL} {_DRINK}"),
)

# One case-sensitive pass over the lowercased content for most memories (the patterns are lowercase).
_ANY_SPECIFIC = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _SPECIFIC))

# Importance rule (esmem/importance.py) -> the situations a memory it fired on applies to.
TRIGGERS: Mapping[str, str] = {
    "health:allergy": f"{_FOOD} {_MEDICAL}",
    "health:condition": f"{_FOOD} {_MEDICAL} {_ACTIVITY} {_DRINK}",
    "health:medication": f"{_MEDICAL} {_DRINK}",
    "secret": _LOGIN,
}


def check_applies_to(value: Any) -> str:
    """A caller's trigger terms: a string or a list of strings, stored as one text field."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, Sequence) and not isinstance(value, bytes) and all(isinstance(v, str) for v in value):
        text = " ".join(value)
    else:
        raise InvalidInput("applies_to must be a string or a list of strings")
    if len(text) > MAX_APPLIES_TO_CHARS:
        raise InvalidInput(f"applies_to is longer than {MAX_APPLIES_TO_CHARS} characters")
    return text


def derive_applies_to(doc: dict[str, Any]) -> None:
    """Fill `applies_to` when the caller gave none (after scoring): the situations of the first
    specific pattern the content matches (a penicillin allergy concerns prescriptions, a peanut
    allergy meals), else those of the importance rule that fired. Only the pinned section reads
    the field, so an unpinned memory that carries it is not affected."""
    if doc.get("applies_to") is not None:
        return
    content = fold_han(doc["content"])  # the patterns' Chinese words are simplified
    specific = _ANY_SPECIFIC.search(content.lower()) is not None
    found = next((t for pattern, t in _SPECIFIC if specific and pattern.search(content)),
                 TRIGGERS.get(doc.get("importance_rule") or ""))
    if found:
        doc["applies_to"] = found


def is_pinned(src: Mapping[str, Any], floor: float) -> bool:
    return bool(src.get("evergreen")) or float(src.get("importance") or 0.0) >= floor


def gate(hits: list[Mapping[str, Any]], rel: Callable[[Mapping[str, Any]], float], floor: float,
         min_share: float) -> list[Mapping[str, Any]]:
    """The candidates without the pinned memories whose relevance is below `min_share` of the best
    candidate's: a match on one incidental word ("keep" of "keep sugar low" for "pods keep hitting
    the memory limit") does not make an allergy the answer. Such a memory still reaches the pinned
    section, which matches it lexically."""
    if not hits:
        return hits
    rels = [rel(h) for h in hits]
    top = max(rels)
    return [h for h, r in zip(hits, rels) if not is_pinned(h["_source"], floor) or r >= min_share * top]
