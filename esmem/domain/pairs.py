"""How a new memory relates to an older one of the same kind, read from the two texts alone.

Word overlap says two memories are about the same topic; it cannot say whether the new one *replaces*
the old ("The standup moved to 10am") or *adds to* it ("I'm allergic to shellfish as well", "Lea
dislikes a red bike according to the onboarding call"). A wrong supersede hides a true fact from every
recall, silently; a missed one leaves a stale memory that recall still ranks, below the newer. So the
reading supersedes only on evidence that the old statement stopped being true, and says `uncertain`
where a reader could not tell without knowing the world:

- restates  : the same statement again (Jaccard of search tokens >= dup_overlap, same polarity)
- replaces  : same topic and the same subject, and the new text says the old stopped being true: a
              change cue it adds ("now", "instead", "no longer", "moved to", 改成, 不再, 以后, 搬到 ...),
              a flipped negation of the same statement, a value swap where the values are times,
              dates or amounts ("at 9am" -> "at 10am"), colours or languages ("reply in Spanish" ->
              "... in Portuguese"), the same statement reworded with another amount, or, for events,
              a reschedule/cancel cue
- coexists  : an additive cue ("also", "as well", "another", 也, 还, 另外), another subject (a relative,
              a colleague, another named person), distinct facts that share a frame (two or more slots
              differ: subject and object, or qualifier and value), another item of a multi-valued
              attribute (allergies, languages, pets, things owned, likes)
- uncertain : same topic, one slot differs, no cue either way ("My manager is Priya." after "My
              manager is Tom."): both stay active, linked, newer ranked first, for review or a judge

Nothing here depends on the index: the same two texts always read the same, whatever else the index
or the namespace holds and however a write was batched or retried. Tokens are the search analyzer's
for words (stemmed, stop words dropped) and single characters for CJK, so a Chinese change that
rewrites the bigrams around a character ("周五发布" -> "发布从周五改到周二") still shares its characters.
Text shared by the pair but found in neither's differing slots (a provenance suffix) never counts
as evidence: only what differs and the cues decide.
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache
from types import ModuleType

from esmem.domain.analysis import STOP_WORDS, _is_cjk, _normalise, _segments, _stem, fold_han, token_sets
from esmem.domain.patterns import IGNORECASE, Match, Pattern, escape

RESTATES, REPLACES, COEXISTS, UNCERTAIN = "restates", "replaces", "coexists", "uncertain"
# Topic overlap above which a text that differs in several places repeats most of the other: a rule
# rewritten in place, or two facts about two things told in one frame; the reading cannot tell which.
_CLOSE = 0.75

# Cues a new memory uses to say the old one stopped being true. English as whole words or phrases,
# Chinese as substrings. A cue counts only when the new text has it and the old one does not (a frame
# such as "moved to" in both is part of the topic, not a change).
_CHANGE_EN = (
    r"now", r"nowadays", r"these days", r"any ?more", r"no longer", r"not \w+ any ?more", r"instead",
    r"rather than", r"from now on", r"going forward", r"starting (?:today|tomorrow|now|next|this|from)",
    r"as of (?:today|now|this|next|\w+ \d+)", r"effective (?:today|immediately|now|from|as of)",
    r"(?:has|have|had) (?:been )?(?:changed|moved|switched|replaced|updated|become)", r"changed", r"change[sd]? to",
    r"switched", r"switch(?:es|ed)? (?:to|over)", r"replaced", r"replac(?:es|ing)", r"moved", r"moves to",
    r"relocated", r"renamed", r"rebooked", r"rescheduled", r"postponed", r"pushed (?:back|out|to)",
    r"brought forward", r"moved up", r"delayed", r"slipped", r"cancell?ed", r"called off", r"scrapped",
    r"stopped", r"stop", r"quit", r"gave up", r"no more", r"updated", r"after all",
    r"corrected", r"correction", r"actually", r"turns out", r"wrong", r"mistaken", r"by mistake", r"my mistake", r"new (?:one|address|number|phone|email|role|job|manager|owner|lead|deadline|date|time|plan|rule|policy)",
    r"upgraded", r"downgraded", r"migrated", r"took over", r"handed (?:over|off)", r"again", r"became",
    r"is back", r"back to", r"revert(?:ed)? to", r"increased", r"decreased", r"raised", r"lowered",
    r"extended", r"shortened", r"reduced", r"was changed", r"will now", r"unsubscribed", r"opted out",
    r"turned off", r"switched off", r"scratch that", r"update:", r"mixed up", r"misspoke", r"oops", r"typo",
    r"my bad",
)
_CHANGE_ZH = (
    "改成", "改为", "改到", "改在", "改用", "改名", "改签", "改期", "改了", "更改", "变成", "变为", "换成", "换到",
    "换了", "改换", "不再", "以后", "今后", "往后", "从此", "从今", "起改", "开始改", "现在", "如今", "目前改",
    "取消", "推迟", "延期", "延后", "挪到", "搬到", "搬去", "搬家", "调到", "调整", "升级到", "升级为",
    "降级", "交给", "移交", "接手", "接任", "接替", "离开", "退出", "戒了", "不用了", "不要了", "停了", "更新为", "更正", "纠正", "其实", "改回", "恢复", "又改", "延长", "缩短", "提高到", "降到", "涨到",
    "改由", "调成", "调为", "调整为", "记错", "写错", "说错", "搞错", "弄错", "给错", "填错", "打错", "提前到",
    "加到", "减到", "增加到", "减少到", "降为", "迁到", "迁移到", "转到", "关掉", "关闭了", "停用", "作废", "停办", "即日起",
    "退掉", "退订", "拖到", "改主意", "改",
)
# Cues that say the old text was a mistake: the new one is about the same thing even where a person
# named on one side only would otherwise mean another subject ("记错了，家长会是周五" after "女儿的家长会是周四").
_CORRECTIONS = frozenset(("wrong", "mistaken", "by mistake", "my mistake", "corrected", "correction", "mixed up",
                          "misspoke", "oops", "typo", "my bad", "记错", "写错", "说错", "搞错", "弄错", "给错", "填错",
                          "打错", "更正", "纠正"))
# Events: only a reschedule or a cancellation replaces an earlier event of the same occasion.
_EVENT_EN = (
    r"moved", r"moves to", r"rescheduled", r"postponed", r"pushed (?:back|out|to)", r"brought forward",
    r"moved up", r"delayed", r"slipped", r"cancell?ed", r"called off", r"scrapped", r"rebooked",
    r"changed to", r"now (?:at|on|in)", r"instead", r"no longer", r"not happening", r"stopped", r"after all",
    r"wrong", r"actually", r"corrected", r"correction", r"mistaken", r"(?:is|are) off", r"scratch that",
    r"bumped", r"mixed up", r"misspoke", r"oops", r"typo", r"my bad", r"fell through", r"delays?",
    r"postponement", r"cancell?ation",
)
_EVENT_ZH = ("改到", "改在", "改期", "改签", "推迟", "延期", "延后", "提前到", "挪到", "取消", "调到",
             "不开了", "不去了", "不办了", "换到", "记错", "写错", "说错", "搞错", "弄错", "其实", "更正", "停了", "作废",
             "停办", "黄了", "拖到", "退订")
# Change cues that retract a statement rather than give it a new value: with one of them alone, the
# new text must be about the same thing (no differing slot), or it retracts something else.
_RETRACT_EN = (r"no longer", r"not \w+ any ?more", r"any ?more", r"stopped", r"stop", r"quit", r"gave up",
               r"no more", r"unsubscribed", r"opted out", r"turned off", r"switched off")
_RETRACT_ZH = ("不再", "戒了", "不用了", "不要了", "停了", "关掉", "关闭了", "停用")
# Words of obligation, wish and address that a retraction rewords ("must be signed" -> "no longer need
# to be signed", "必须" -> "不再强制要求", "please stop"): they name nothing the statement is about.
_MODAL = frozenset(_stem(w) for w in (
    "must need needs required require requires should have has to please want wants plan planning plans "
    "like likes always usually every each all from since").split()) | frozenset("必须需要求强制应该得一定总是每请想打算计划")
# How strongly a rule binds is not what it is about: "must", "should", "要", "必须" read alike.
_OBLIGATION = frozenset(_stem(w) for w in "must should need needs required".split()) | frozenset("必须需要应该")
_ADDITIVE_EN = (r"also", r"as well", r"too", r"another", r"in addition", r"additionally", r"besides",
                r"on top of", r"one of")
_ADDITIVE_ZH = ("也", "还", "又", "另外", "另一", "此外", "同时", "以及", "第二")
_NEGATION_EN = r"not|no|never|n't|cannot|without|none|nobody|nothing|neither|nor"
_NEGATION_ZH = ("不", "没", "别", "无", "未", "非")
_NEGATION_ZH_NOT = ("不错", "不同", "不仅", "不过", "不断", "不少", "不久", "不管", "无论", "并非", "非常", "没关系",
                    "别的", "别人", "不…了")
# People other than the speaker: one named on one side only means another subject (a relative's fact
# is not the person's own).
_OTHERS_EN = frozenset(_stem(w) for w in (
    "mother mom mum father dad parent parents sister brother sibling wife husband partner spouse son "
    "daughter kid kids child children baby friend neighbour neighbor colleague coworker roommate "
    "flatmate cousin aunt uncle niece nephew grandma grandpa grandmother grandfather grandparent "
    "girlfriend boyfriend fiance fiancee teammate classmate").split())
_OTHERS_ZH = ("妈妈", "母亲", "爸爸", "父亲", "父母", "姐姐", "妹妹", "哥哥", "弟弟", "老婆", "妻子", "老公", "丈夫",
              "儿子", "女儿", "孩子", "朋友", "邻居", "同事", "室友", "爷爷", "奶奶", "外婆", "外公", "姥姥", "姥爷",
              "男朋友", "女朋友", "表哥", "表姐", "表妹", "表弟", "堂哥", "堂姐", "叔叔", "阿姨", "舅舅", "姑姑",
              "队友", "同学", "亲戚")
# A statement of one value: "<subject> is <value>", "<subject>: <value>", "<subject> lives in <value>".
# When both texts give the same subject (two words or more besides pronouns: an attribute, not a bare
# "I" or a name) and differ only after it, the attribute took a new value.
_COPULA = Pattern(r"(?<![\p{L}])(?:is|are|was|were|equals)(?![\p{L}])|[:=：]|(?<![但还就总可于只要正不都也凡若像])是",
                  IGNORECASE)
# Relations a subject has one of at a time, whoever the subject ("I live in ...", "我住在 ...").
_ONE_OF = Pattern(
    r"(?<![\p{L}])(?:lives? in|living in|based in|works? (?:at|for)|working (?:at|for)|reports? to|located in|"
    r"costs?|set to|due (?:on|by)|capped at|limited to|married to)(?![\p{L}])|住在|定在|设为|设成|上限是|在做",
    IGNORECASE)
_DETERMINERS = frozenset("my our your his her their its".split())
_OWNER = Pattern(r"(?<![\p{L}])(?:my|our|your|his|her|their)(?![\p{L}])|['’]s(?![\p{L}])|的", IGNORECASE)
_PRONOUNS = frozenset("i me my mine we us our ours you your he him his she her they them their it its user 我 你 他 她 们 用 户".split())
# Attributes a person has many of: a second value without a cue is another item, not a change.
_MULTI_EN = frozenset(_stem(w) for w in (
    "allergic allergy allergies speak speaks language languages pet pets dog dogs cat cats own owns have "
    "has collect collects like likes love loves enjoy enjoys hobby hobbies play plays friend friends "
    "visited visit member subscribe subscribed follow follows fan know knows learn learning studying "
    "certified skill skills tool tools use uses translate translates").split())
_MULTI_ZH = Pattern("过敏|会说|会讲|语言|养了|养着|宠物|拥有|收藏|(?<!最)喜欢|爱好|热爱|会弹|会玩|订阅|关注|会用|学过|"
                    "在学|去过|朋友")
# CJK characters that carry no content of their own (particles, structure words).
_CJK_FUNCTION = frozenset("的了着吗呢吧啊呀哦嘛和与及很都就把被之")
_CJK_VALUE = "今昨一二三四五六七八九十百千万两半零〇点号月日周星期天年时分秒钟早晚上下午中凌晨次个元块兆楼层岁倍度"
_VALUE = Pattern(
    r"^(?:\d[\d.,:/-]*(?:am|pm|st|nd|rd|th|h|k|m|km|kg|g|gb|mb|tb|ms|s|min|mins|x|%)?|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun|"
    r"januari|februari|march|april|may|june|juli|august|septemb|octob|novemb|decemb|jan|feb|mar|apr|jun|"
    r"jul|aug|sep|sept|oct|nov|dec|morn|afternoon|even|night|noon|midnight|week|weekend|month|year|day|"
    r"daili|weekli|month|annual|hour|minut|second|[" + _CJK_VALUE + r"]|\p{N}+)$")

# Kinds of value a statement holds one of at a time, whatever it is about: a colour ("paint the fence
# white"), a language or script ("reply in Spanish", "用繁体中文"). One slot that swaps one of a
# kind for another of the same kind is a new value, not another thing (things owned, eaten or liked
# are many-valued and read earlier).
_KINDS_OF_VALUE = (
    Pattern(  # colours
        r"(?<![\p{L}])(?:red|yellow|green|blue|purple|violet|pink|brown|black|white|gr[ae]y|beige|navy|"
        r"teal|turquoise|maroon|burgundy|lilac|lavender|ivory|champagne)(?![\p{L}])|"
        r"(?:[红橙黄绿青蓝紫粉棕褐黑白灰金银米]|香槟|咖啡|藏青|天蓝|酒红|奶白|纯白|墨绿|浅蓝|深蓝)色",
        IGNORECASE),
    Pattern(  # languages and scripts
        r"(?<![\p{L}])(?:english|spanish|portuguese|french|german|italian|dutch|chinese|mandarin|cantonese|"
        r"japanese|korean|russian|arabic|hindi|turkish|swedish|vietnamese|thai|indonesian|greek|"
        r"hebrew)(?![\p{L}])|繁体|简体|普通话|粤语|(?:[英中日法德俄韩意]|西班牙|葡萄牙|意大利|阿拉伯)[文语]",
        IGNORECASE),
)
_NUMBER = Pattern(r"^\d")
_NEXT_WORD = Pattern(r"[ \t]+(\p{L}+)")
# Words that put a time in a span: "before noon" -> "after 2 pm" is one time changing.
_TIME_WORDS = frozenset(_stem(w) for w in "before after until till around from".split())
# ... and what they make a time of the day: "after lunch", "before work".
_DAY_MARKS = frozenset(_stem(w) for w in "breakfast lunch dinner supper work school bed".split())


def _phrases(words: tuple[str, ...]) -> Pattern:
    return Pattern(r"(?<![\p{L}\p{N}])(?:" + "|".join(words) + r")(?![\p{L}\p{N}])", IGNORECASE)


_CHANGE_EN_RE, _EVENT_EN_RE, _ADDITIVE_EN_RE = _phrases(_CHANGE_EN), _phrases(_EVENT_EN), _phrases(_ADDITIVE_EN)
_RETRACT_EN_RE = _phrases(_RETRACT_EN)
_NEGATION_EN_RE = Pattern(r"(?<![\p{L}])(?:" + _NEGATION_EN + r")(?![\p{L}])|n't", IGNORECASE)
_BU_LE = Pattern(r"不[\p{Han}]{1,4}了|[从自][^，。,.；;]{1,8}起")  # 不……了 "no longer ...", 从/自……起 "from ... on"
# Where a memory says where it came from: brackets, and clauses such as "according to the onboarding
# call". Shared provenance says nothing about whether two statements are one.
_PROVENANCE = Pattern(
    r"[(（\[【][^)）\]】]*[)）\]】]|"
    r"[,;，；]?\s*(?:according to|as (?:mentioned|discussed|noted|said|stated|agreed|reported) (?:in|at|during|on|by)|"
    r"source:)\s[^.;。；!?！？]*|"
    r"[,，]?\s*(?:据|来自|见|出自)[^，。；！？]{1,16}(?:所说|说的|提到|记录|纪要|手册|面谈)|"
    # ... and why it holds: a clause of purpose says why, not what ("so that the dashboards are fresh")
    r"[,，]?\s*(?:so that|in order to|这样|以便|好让)[^.;。；!?！？]*",
    IGNORECASE)


@dataclass(frozen=True)
class Reading:
    """What the pair reading found; `verdict` is one of restates, replaces, coexists, uncertain."""

    verdict: str
    why: str
    overlap: float  # overlap coefficient of the pair tokens
    jaccard: float  # Jaccard of the search tokens (the restatement measure)
    slots: int      # differing spans where both texts say something
    change_cue: bool
    additive_cue: bool
    negation_flip: bool
    other_subject: bool
    renamed: bool = False  # the statements open with different names (another subject, unless a cue rewords)


@lru_cache(maxsize=16384)
def pair_tokens(text: str) -> tuple[str, ...]:
    """Words as the search analyzer keeps them (stemmed, no stop words, no possessive determiners),
    CJK as single characters (particles dropped): the unit of the pair's alignment and overlap."""
    out: list[str] = []
    for raw, _, _ in _segments(text):
        out.extend(_pair_unit(raw))
    return tuple(out)


@lru_cache(maxsize=65536)  # a vocabulary recurs: normalising and stemming a word once saves half of pair_tokens
def _pair_unit(raw: str) -> tuple[str, ...]:
    token = _normalise(raw)
    if _is_cjk(token):
        return tuple(ch for ch in token if ch not in _CJK_FUNCTION)
    return () if token in STOP_WORDS or token in _DETERMINERS else (_stem(token),)


def _weight(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    """What two token sequences share: a word counts 1, a CJK character 1/2 (a two-character word is
    one word), each as often as both have it (婆婆 is two characters)."""
    shared = Counter(a) & Counter(b)
    return sum((0.5 if _is_cjk(t) else 1.0) * k for t, k in shared.items())


# Chinese cues that are also the tail of a longer word of another meaning: 提交给 (submit to) is not
# 交给 (hand over to); 下班以后 (after work) is not 以后 (from now on).
_ZH_NOT_AFTER = {"交给": "提递", "以后": "班课饭后前之天年月日点时"}
# ... and cues that are a cancellation only at the end of a clause: 停了 ("called off") vs 停了半天水
# (the water was off for half a day).
_ZH_NOT_BEFORE = {"停了": r"\p{Han}"}
# ... and a cue only before what it switches to: 改喝拿铁 ("switched to drinking lattes"), not 改善 or
# 改革 (the verb stays in the text, so it is still what the two statements share).
_ZH_ONLY_BEFORE = {"改": "[喝吃坐骑开穿住走听学玩]"}


_HAN = Pattern(r"\p{Han}")


def _zh(words: tuple[str, ...]) -> Pattern:
    """One pattern for a list of Chinese cues, longest first, each guarded against its longer words."""
    def guarded(w: str) -> str:
        before = f"(?<![{_ZH_NOT_AFTER[w]}])" if w in _ZH_NOT_AFTER else ""
        after = f"(?!{_ZH_NOT_BEFORE[w]})" if w in _ZH_NOT_BEFORE else \
            f"(?={_ZH_ONLY_BEFORE[w]})" if w in _ZH_ONLY_BEFORE else ""
        return before + escape(w) + after
    return Pattern("|".join(guarded(w) for w in sorted(set(words), key=len, reverse=True)))


def _negated(text: str) -> bool:
    if _NEGATION_EN_RE.search(text):
        return True
    stripped = text
    for w in _NEGATION_ZH_NOT:
        stripped = stripped.replace(w, "")
    return any(w in stripped for w in _NEGATION_ZH)


def _others(text: str, toks: tuple[str, ...]) -> set[str]:
    found = {t for t in toks if t in _OTHERS_EN}
    return found | {w for w in _OTHERS_ZH if w in text} if _HAN.search(text) else found


def _compiled_difflib() -> ModuleType:
    """cydifflib, difflib's SequenceMatcher compiled, where a wheel of it exists for this Python; difflib
    elsewhere. The same alignments (tests/test_merge.py), 3x faster: the 25,061 pairs a pass over the
    bench's 10k merge sample reads align in 0.15 s instead of 0.46 s, and the pass writes ~7% more
    memories a second."""
    try:
        import cydifflib
    except ImportError:
        return difflib
    compiled: ModuleType = cydifflib
    return compiled


_ALIGNER = _compiled_difflib()


def _spans(a: tuple[str, ...], b: tuple[str, ...]) -> list[tuple[tuple[str, ...], tuple[str, ...], int, int]]:
    """The differing spans of the alignment: (old part, new part, old start, new start)."""
    matcher = _ALIGNER.SequenceMatcher(None, a, b, autojunk=False)
    return [(a[i1:i2], b[j1:j2], i1, j1) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def _is_value(part: tuple[str, ...]) -> bool:
    """Times, dates and amounts only (小 counts in 小时, "hour")."""
    return bool(part) and all(_VALUE.match(t) or (t == "小" and part[i + 1:i + 2] == ("时",)) for i, t in enumerate(part))


def _is_when(part: tuple[str, ...]) -> bool:
    """A time, date or amount, after at most one word that places a time ("before noon", "after 2 pm"),
    or such a word and a mark of the day ("after lunch")."""
    if len(part) == 2 and part[0] in _TIME_WORDS and part[1] in _DAY_MARKS:
        return True
    rest = part[1:] if part[:1] and part[0] in _TIME_WORDS else part
    return _is_value(tuple(t for i, t in enumerate(rest) if not (t in ("am", "pm") and i and _VALUE.match(rest[i - 1]))))


def _strip_cues(text: str) -> str:
    """The text without its change and additive cues: they are read as cues, not as differing content."""
    for pattern in (_CHANGE_EN_RE, _ADDITIVE_EN_RE, _EVENT_EN_RE):
        text = pattern.sub(" ", text)
    return _ANY_ZH_RE.sub(" ", text) if _HAN.search(text) else text


def _subject(text: str) -> tuple[tuple[str, ...], str, str] | None:
    """(subject tokens, relation, the rest) of a one-value statement, or None: a relation of one value
    at a time, or a copula or key separator after an attribute ("the home Wi-Fi password is", "my
    manager is", "家里WiFi密码是"), not after a bare pronoun or name ("I am", "Marco is")."""
    m = _ONE_OF.search(text)
    if m:
        return pair_tokens(text[:m.start()]), m.group(0).lower(), text[m.end():]
    m = _COPULA.search(text)
    if not m:
        return None
    head_text = text[:m.start()]
    head = pair_tokens(head_text)
    content = [t for t in head if t not in _PRONOUNS]
    owned = bool(_OWNER.search(head_text))
    return (head, "is", text[m.end():]) if len(content) >= 2 or (owned and content) else None


class _Text:
    """What the reading needs of one text, computed once per text (a batch reads each memory against
    several candidates, and the candidates recur from memory to memory); what only a pair on one topic
    needs is computed on first use (most candidates of a look-up share too little to get that far)."""

    def __init__(self, raw: str):
        self.text = _PROVENANCE.sub(" ", fold_han(raw))
        self.tokens = pair_tokens(self.text)
        self.topic = frozenset(self.tokens)
        self.change = _found(self.text, _CHANGE_EN_RE, _CHANGE_ZH_RE)
        self.event = _found(self.text, _EVENT_EN_RE, _EVENT_ZH_RE)
        self.bu_le = bool(_BU_LE.search(self.text))
        self.far = bool(self.change or self.event or self.bu_le)

    @cached_property
    def search(self) -> frozenset[str]:
        return token_sets(self.text)[1]

    @cached_property
    def additive(self) -> frozenset[str]:
        return _found(self.text, _ADDITIVE_EN_RE, _ADDITIVE_ZH_RE)

    @cached_property
    def retract(self) -> frozenset[str]:
        return _found(self.text, _RETRACT_EN_RE, _RETRACT_ZH_RE)

    @cached_property
    def negated(self) -> bool:
        return _negated(self.text)

    @cached_property
    def plain(self) -> tuple[str, ...]:
        """The pair tokens without the cues."""
        return tuple(t for t in pair_tokens(_strip_cues(self.text)) if t not in _OBLIGATION)

    @cached_property
    def change_beside_retract(self) -> frozenset[str]:
        """The change cues other than a retraction."""
        return _found(_strip_retractions(self.text), _CHANGE_EN_RE, _CHANGE_ZH_RE)

    @cached_property
    def others(self) -> frozenset[str]:
        return frozenset(_others(self.text, self.tokens))

    @cached_property
    def opens_with(self) -> frozenset[str]:
        """The first two pair tokens and a person word the text starts with."""
        return frozenset(self.tokens[:2]) | frozenset(w for w in _OTHERS_ZH if self.text.startswith(w))

    @cached_property
    def stated(self) -> tuple[tuple[str, ...], str, str] | None:
        """(subject tokens, relation, the value as written) when it states one attribute (`_subject`)."""
        return _subject(self.text)

    @cached_property
    def subject(self) -> tuple[tuple[str, ...], str, tuple[str, ...]] | None:
        return (self.stated[0], self.stated[1], pair_tokens(self.stated[2])) if self.stated else None

    @cached_property
    def attribute(self) -> tuple[tuple[str, ...], str] | None:
        """(subject tokens, relation) of the one attribute it states, when the subject has words."""
        return self.stated[:2] if self.stated and self.stated[0] else None

    @cached_property
    def value_form(self) -> str | None:
        """How the value it states begins (`_VALUE_FORMS`), when it states one attribute."""
        rest = self.stated[2].strip() if self.stated else ""
        return next((form for form, pattern in _VALUE_FORMS if pattern.match(rest)), None)

    @cached_property
    def kinds(self) -> tuple[frozenset[str], ...]:
        """The values of each of `_KINDS_OF_VALUE` it names as values: an English word that qualifies
        the next one names a sort of thing, not its value ("green tea", "Spanish class")."""
        def qualifies(m: Match[str]) -> bool:
            after = _NEXT_WORD.match(self.text, m.end())
            return after is not None and not _HAN.match(m.group(0)) and after.group(1).lower() not in STOP_WORDS
        return tuple(frozenset(m.group(0).lower() for m in pattern.finditer(self.text) if not qualifies(m))
                     for pattern in _KINDS_OF_VALUE)

    @cached_property
    def many(self) -> bool:
        """It names a Chinese many-valued attribute."""
        return bool(_MULTI_ZH.search(self.text))


def _swaps_a_kind(old: _Text, new: _Text) -> bool:
    """Whether one value of a kind held one at a time (`_KINDS_OF_VALUE`) gives way to another of it."""
    return any(len(a - b) == 1 and len(b - a) == 1 for a, b in zip(old.kinds, new.kinds))


def _another_amount(old: _Text, new: _Text) -> bool:
    """Whether the new text tells the old one again, reworded, with another amount: one number on each
    side, not the same; no word the old text lacks; at most one of its words left out, and three or
    more kept ("The Kubernetes cluster autoscaler caps the pool at 40 nodes" -> "The cluster autoscaler
    caps the node pool at 60 nodes"; not "The Q1 budget is 40k" -> "The budget is 60k")."""
    a, b = set(old.plain), set(new.plain)
    numbers_a, numbers_b = {t for t in a if _NUMBER.match(t)}, {t for t in b if _NUMBER.match(t)}
    if len(numbers_a) != 1 or len(numbers_b) != 1 or numbers_a == numbers_b:
        return False
    return not b - a - numbers_b and len(a - b - numbers_a) <= 1 and len(a & b) >= 3


def _found(text: str, en: Pattern, zh: Pattern) -> frozenset[str]:
    found = frozenset(m.group(0).lower() for m in en.finditer(text))
    return found | frozenset(m.group(0) for m in zh.finditer(text)) if _HAN.search(text) else found


@lru_cache(maxsize=32768)
def _read_text(raw: str) -> _Text:
    return _Text(raw)


def topic(text: str) -> tuple[frozenset[str], bool, tuple[tuple[str, ...], str] | None]:
    """What the reading's first test looks at: the text's pair tokens (its provenance left out);
    whether it reaches far - it carries a change, event or correction cue, the only reading that looks
    below `min_overlap` of a topic; and the attribute it states, if any (`_Text.attribute`): two
    statements of one attribute are read whatever their overlap."""
    t = _read_text(text)
    return t.topic, t.far, t.attribute


def read(old: str, new: str, kind: str, *, dup_overlap: float = 0.9, min_overlap: float = 0.5,
         events: tuple[str, ...] = ("event",), cosine: float | None = None, same_meaning: float = 1.0) -> Reading:
    """Read the pair (old, new) of one kind. `min_overlap`: the topic overlap a replacement without a
    change cue needs (with one, half of it and two shared words, or a word and a CJK character: three
    characters of a Chinese text; below half, nothing but `coexists`);
    `events`: kinds whose memories are happenings, replaced only by a reschedule, a cancellation or a
    correction. `cosine` (the two texts' embeddings, when the store has an embedder) at or above
    `same_meaning` makes a text with a change cue about the same topic however few words it shares
    ("Shipping is weekly now." after "We release every two weeks."); without a cue it decides nothing."""
    o, n = _read_text(old), _read_text(new)
    event = kind in events
    jac = len(o.search & n.search) / len(o.search | n.search) if o.search and n.search else 0.0
    ta, tb = set(o.tokens), set(n.tokens)
    ov = len(ta & tb) / min(len(ta), len(tb)) if ta and tb else 0.0
    flip = o.negated != n.negated
    if event:
        change = bool(n.event - o.event) or (n.bu_le and not o.bu_le)
    else:
        change = bool(n.change - o.change) or (n.bu_le and not o.bu_le)
    retract_only = change and not event and bool(n.retract - o.retract) and not (n.change_beside_retract - o.change_beside_retract)
    additive = bool(n.additive - o.additive) and not change
    # the common case of a look-up's candidates: too little in common to read further (with a change cue,
    # half of min_overlap and two shared words, or three shared CJK characters, are enough)
    same_meaning = change and cosine is not None and cosine >= same_meaning
    # ... or both give one attribute a value of one form, however long the values ("My doctor is Anna
    # Smith" -> "My doctor is John Lee" share one word of three)
    one_attribute = o.attribute is not None and o.attribute == n.attribute and _alike_values(o, n)
    if not same_meaning and not one_attribute and (
            ov < min_overlap / 2 or (ov < min_overlap and not (change and _weight(o.plain, n.plain) >= 1.5))):
        return Reading(COEXISTS, "another topic", round(ov, 4), round(jac, 4), 0, change, additive, flip, False)
    a, b = o.plain, n.plain
    shared = set(a) & set(b)
    spans = _spans(a, b)
    slots = [(x, y) for x, y, _, _ in spans if x and y]
    # one attribute of one subject on both sides ("my emergency contact is ..."): a person named in the
    # value is the value, not another subject
    same_attribute = bool(o.subject and n.subject and o.subject[:2] == n.subject[:2])
    others = frozenset() if same_attribute else o.others ^ n.others
    # another subject: a person named on one side only; with a change cue, only when each side names its
    # own person or that person opens a text (a change may well mention someone: "my brother")
    corrects = bool((n.change | n.event) & _CORRECTIONS)
    other = bool(others) and (not change or bool(o.others - n.others and n.others - o.others)
                              or (not corrects and bool(others & (o.opens_with | n.opens_with))))
    # or another name opens the statement: the first differing span starts the sentence (after at most
    # one shared token: "老张" / "老李") and neither side's words occur anywhere in the other text
    # (a change often rewords the opening, so with a cue this only ranks candidates: see merge.decide)
    first = spans[0] if spans else None
    renamed = bool(first and first[0] and first[1] and first[2] <= 1 and first[3] <= 1 and first[2] == first[3]
                   and not set(first[0]) & set(b) and not set(first[1]) & set(a)
                   and not (_is_value(first[0]) and _is_value(first[1]))
                   and not (same_attribute and not (o.others or n.others) and _alike_values(o, n)))
    # ... unless the statement gives the holder of a role there is one of ("Marco is the tech lead of the
    # search team" -> "Aisha is the tech lead of the search team"): then the name is the value
    holder = renamed and not change and len(slots) == 1 and len(spans) == 1 and _holds_the_role(o.text, n.text)
    other = other or (renamed and not change and not holder)

    def reading(verdict: str, why: str) -> Reading:
        return Reading(verdict, why, round(ov, 4), round(jac, 4), len(slots), change, additive, flip, other, renamed)

    if other:  # however much else two statements share, they are about two people ("Trent 在Seattle出差…")
        return reading(COEXISTS, "another subject")
    if jac >= dup_overlap and not flip and not change:
        return reading(RESTATES, "the same statement again")
    if additive:
        return reading(COEXISTS, "an additive cue")
    if holder:
        return reading(REPLACES, "a role of one holder has a new holder")
    if change and retract_only and not same_meaning and any(_names_another(y, o.tokens) for _, y in slots):
        return reading(UNCERTAIN, "it retracts, and says it of something else too")
    if same_meaning and ov < min_overlap:
        return reading(REPLACES, "a change cue, and the same meaning in other words")
    if change:
        return reading(REPLACES, "a reschedule, cancellation or correction" if event else "a change cue")
    if flip and not slots:
        return reading(REPLACES, "the same statement, negated")
    if spans and not slots and not flip and not event:  # a happening told again with more or less is another one
        if all(not y for _, y, _, _ in spans):
            return reading(RESTATES, "the same statement, with less detail")
        if all(not x for x, _, _, _ in spans):
            return reading(REPLACES, "the same statement, with more detail")
    if spans and not flip and all(_is_when(x) or not x for x, _, _, _ in spans) and all(_is_when(y) or not y for _, y, _, _ in spans):
        # a number that opens a statement says which one it is about ("room 4 has", "一楼的租客"), and two
        # numbers apart are two attributes ("sample S-14 ... freezer 2"): neither is one value changing
        if _names_the_thing(a, spans[0]) or _apart(a, spans):
            return reading(UNCERTAIN, "values differ in several places, or in what the statement is about")
        if event and not same_attribute:  # a happening told with another date may be another happening
            return reading(UNCERTAIN, "a time, date or amount changed")
        # ... but an occasion's time is one value ("The sprint demo is on Thursday" -> "... on Friday")
        return reading(REPLACES, "the occasion's time changed" if event else "a time, date or amount changed")
    if _MULTI_EN & shared or (o.many and n.many):
        return reading(COEXISTS, "another item of a many-valued attribute")
    if o.subject and n.subject and o.subject[:2] == n.subject[:2] and o.subject[2] != n.subject[2]:
        return reading(UNCERTAIN if event else REPLACES, "one attribute of one subject took a new value")
    if event:
        return reading(COEXISTS, "another happening")
    if len(slots) >= 2 and ov >= _CLOSE:
        return reading(UNCERTAIN, f"{len(slots)} slots differ in an otherwise repeated text")
    if len(slots) >= 2:
        return reading(COEXISTS, f"{len(slots)} slots differ")
    if _swaps_a_kind(o, n):
        return reading(REPLACES, "one value of a kind held one at a time took another")
    if _another_amount(o, n):
        return reading(REPLACES, "the same statement with another amount")
    return reading(UNCERTAIN, "same topic, one slot differs, no cue")


# How a stated value begins: a name, a number, "a/an/the ..." - or something else (a state: "slow",
# "on leave", "out sick"; and Chinese, whose attributes are rarely one word: left as before).
_VALUE_FORMS = (("name", Pattern(r"\p{Lu}")), ("number", Pattern(r"\p{N}")),
                ("thing", Pattern(r"(?:a|an|the)\s", IGNORECASE)))


def _alike_values(old: _Text, new: _Text) -> bool:
    """Whether two statements of one attribute give values of one form - two names, two numbers, two
    "a ..." - so that the new one is another value of it ("My boss is Ana" -> "My boss is Ben"), not a
    state of the old one ("My manager is Priya" -> "My manager is out sick today") or what the value is
    ("My car is a Civic" -> "My car is in the shop")."""
    return old.value_form is not None and old.value_form == new.value_form


_THE_ROLE = Pattern(r"^\s*(.{1,40}?)\s+(?:is|was)\s+(?:now\s+)?the\s+(.+)$", IGNORECASE)


def _holds_the_role(old: str, new: str) -> bool:
    """Whether both texts say "<name> is the <role>" of one and the same role: a definite role has one
    holder at a time ("the tech lead of the search team"; not "a member of ...")."""
    a, b = _THE_ROLE.match(old), _THE_ROLE.match(new)
    if a is None or b is None:
        return False
    return pair_tokens(a.group(2)) == pair_tokens(b.group(2)) \
        and not _PRONOUNS & set(pair_tokens(a.group(1)) + pair_tokens(b.group(1)))


def _names_the_thing(a: tuple[str, ...], span: tuple[tuple[str, ...], tuple[str, ...], int, int]) -> bool:
    """Whether the first differing value opens the statement (at most one word before it) and the
    statement goes on after it: "Room 4 has a projector", "一楼的租客没养宠物"."""
    x, _, i, _ = span
    return i <= 1 and any(not _VALUE.match(t) for t in a[i + len(x):])


# What joins the two ends of one range of values ("9点到21点", "周一至周五"; English "to" is a stop word).
_RANGE = frozenset("到至")


def _apart(a: tuple[str, ...], spans: list[tuple[tuple[str, ...], tuple[str, ...], int, int]]) -> bool:
    """Whether words that are not values stand between two of the differing spans (in the old text):
    two values joined into one range are one value."""
    for (x, _, i, _), (_, _, j, _) in zip(spans, spans[1:]):
        if not all(_VALUE.match(t) or t in _RANGE for t in a[i + len(x):j]):
            return True
    return False


def _names_another(part: tuple[str, ...], old: tuple[str, ...]) -> bool:
    """Whether a differing part of a retraction names something the old text does not: a word that is
    not a time or amount, a pronoun or a word of obligation ("I no longer drink soda" after "I drink two
    cups of coffee a day" retracts another drink; "quit smoking in January" retracts the smoking)."""
    return any(t not in old and t not in _PRONOUNS and t not in _MODAL and not _VALUE.match(t) for t in part)


def _strip_retractions(text: str) -> str:
    return _RETRACT_ZH_RE.sub(" ", _RETRACT_EN_RE.sub(" ", text))


_CHANGE_ZH_RE, _EVENT_ZH_RE, _ADDITIVE_ZH_RE, _RETRACT_ZH_RE = (_zh(w) for w in (_CHANGE_ZH, _EVENT_ZH, _ADDITIVE_ZH, _RETRACT_ZH))
_ANY_ZH_RE = _zh(_CHANGE_ZH + _EVENT_ZH + _ADDITIVE_ZH)
