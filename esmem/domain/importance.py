"""Importance 1-10 at write time (seed 004): keyword rules by default, any callable if you have a judge.

A scorer takes a batch of texts and returns one `(score, rule)` per text (a bare number counts as
rule "custom"); the rule that fired is stored with the memory (`importance_rule`) so a score can
always be traced back. `score_batch` checks every answer before anything is written: a scorer that
raises or answers outside 1..10 fails the write with ConfigError instead of storing a bogus score.
An LLM judge is costly, so `gated` sends it only the texts a keyword rule flags and `batched` keeps
each call to a bounded number of texts.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

from esmem.domain.analysis import fold_han
from esmem.errors import ConfigError
from esmem.index.bridge import off_loop

Scorer = Callable[[Sequence[str]], Sequence[tuple[float, str]]]

DEFAULT_IMPORTANCE = 3.0

# (score, rule name, pattern): the highest matching score wins.
RULES: list[tuple[float, str, re.Pattern[str]]] = [
    (10.0, "health:allergy", re.compile(r"allerg|过敏|anaphyla", re.I)),
    (9.0, "health:condition", re.compile(r"\b(illness|disease|diabet|asthma|ulcer|cancer|surgery|pregnan)|"
                                         r"疾病|生病|糖尿病|哮喘|胃溃疡|溃疡|手术|怀孕", re.I)),
    (9.0, "health:medication", re.compile(r"\b(medication|medicine|prescri|dose|insulin|penicillin)|药|处方|剂量", re.I)),
    (9.0, "health:mental", re.compile(r"\b(depress|anxiety disorder|panic attack|suicid|self[- ]harm)|"
                                      r"抑郁|焦虑症|惊恐发作|自杀|自残", re.I)),
    (9.0, "secret", re.compile(r"\b(password|passcode|api[ _-]?key|secret|token|pin code)\b|密码|密钥|口令", re.I)),
    (8.0, "life:event", re.compile(r"\b(married|wedding|divorc|passed away|funeral|newborn|gave birth)|"
                                   r"结婚|婚礼|离婚|去世|过世|葬礼|出生了|生了孩子", re.I)),
    (8.0, "finance", re.compile(r"\b(bank account|credit card|salary|mortgage|loan|debt)\b|银行卡|信用卡|工资|"
                                r"薪水|房贷|贷款|欠款", re.I)),
    (8.0, "family", re.compile(r"\b(wife|husband|son|daughter|mother|father|mom|dad|child|children|kids?|"
                               r"parents?|sister|brother|family)\b|家人|妻子|丈夫|老婆|老公|儿子|女儿|父亲|母亲|爸爸|妈妈|孩子", re.I)),
    # 7, under the must-not-miss floor: at 8 every "must" rule filled free top-k slots of unrelated queries
    (7.0, "rule:absolute", re.compile(r"\b(never|always|must not|must|do not ever)\b|绝不|永远不|必须|禁止|不许|不要|一定要", re.I)),
    (7.0, "deadline", re.compile(r"\b(deadline|due (date|by)|by (monday|tuesday|wednesday|thursday|friday|"
                                 r"saturday|sunday|tomorrow))\b|截止|到期|最晚|之前完成", re.I)),
    (7.0, "identity", re.compile(r"\b(my name is|call me|birthday|born (on|in)|i live in|home address|"
                                 r"phone number)\b|我叫|名字是|生日|出生于|我住在|家住|住址|电话号码|手机号", re.I)),
    (6.0, "preference:strong", re.compile(r"\b(love|hate|can't stand|favorite|favourite|dislike)\b|"
                                          r"最喜欢|讨厌|受不了|不喜欢|偏好", re.I)),
    (5.0, "preference", re.compile(r"\b(prefer|prefers|preferred|i like|i enjoy)\b|喜欢|爱吃|爱喝", re.I)),
]


def rule_scorer(texts: Sequence[str]) -> list[tuple[float, str]]:
    """The default scorer: highest matching keyword rule, else a low default."""
    out = []
    for text in map(fold_han, texts):  # the rules' Chinese words are simplified; either script matches
        best = (DEFAULT_IMPORTANCE, "default")
        for score, name, pattern in RULES:
            if score > best[0] and pattern.search(text):
                best = (score, name)
        out.append(best)
    return out


def score_batch(scorer: Scorer, texts: Sequence[str]) -> list[tuple[float, str]]:
    """Run a scorer and check what it returned; a failing scorer never yields a bogus score."""
    try:  # a scorer you give may call a model: off the event loop; the built-in rules run in place
        result = list(scorer(texts)) if scorer is rule_scorer else off_loop(lambda: list(scorer(texts)))
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"importance scorer failed: {type(e).__name__}: {e}") from e
    if len(result) != len(texts):
        raise ConfigError(f"importance scorer returned {len(result)} scores for {len(texts)} texts")
    checked = []
    for item in result:
        score, rule = item if isinstance(item, (tuple, list)) and len(item) == 2 else (item, "custom")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 1 <= score <= 10:
            raise ConfigError(f"importance scorer returned {score!r}; scores must be numbers in 1..10")
        checked.append((float(score), str(rule)))
    return checked


def batched(scorer: Scorer, size: int) -> Scorer:
    """`scorer` called on at most `size` texts at a time: a judge's prompt has a limit, a bulk write not."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(f"batch size must be a positive integer, got {size!r}")

    def score(texts: Sequence[str]) -> list[tuple[float, str]]:
        out: list[tuple[float, str]] = []
        for start in range(0, len(texts), size):
            out.extend(score_batch(scorer, texts[start:start + size]))
        return out

    return score


def gated(judge: Scorer, *, batch_size: int = 32) -> Scorer:
    """Seed 004's cost cut: texts no keyword rule flags keep the low default without asking `judge`;
    the flagged ones are scored by `judge` (in batches of `batch_size`), whose rule name is stored."""
    ask = batched(judge, batch_size)

    def score(texts: Sequence[str]) -> list[tuple[float, str]]:
        out = rule_scorer(texts)
        flagged = [i for i, (_, rule) in enumerate(out) if rule != "default"]
        if flagged:
            for i, judged in zip(flagged, ask([texts[i] for i in flagged])):
                out[i] = judged
        return out

    return score
