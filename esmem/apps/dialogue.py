"""The recall query an agent should send, built from the last turns of its conversation (seed 000).

Concatenating the last few messages is the obvious query, and it breaks in two ways: acknowledgements
("嗯", "好的，继续", "ok thanks") carry no topic yet take the window's slots, and after a topic switch
the window still holds the old topic's words. So:

1. Filler is removed phrase by phrase (phrases are split at punctuation). A phrase is filler when it
   is covered entirely by entries of a small Chinese + English lexicon of acknowledgements, greetings,
   thanks and "go on" replies ("好的，我继续" = 好的 + 我 + 继续). A turn with nothing left, fewer than
   `min_chars` letters/digits left, or only question words left ("为什么？", "that helps") is
   dropped - the user's and the assistant's alike.
2. The window is the last `n` *substantive* turns, so a run of "嗯" cannot push the topic out of it.
3. The newest substantive user turn is the anchor and is always kept. An older turn is kept only if
   it shares a content token with the anchor: on a topic switch the old topic drops out entirely
   (dropping beats down-weighting, because BM25 would still match the old topic's memories).
   The cost: an elliptical follow-up that repeats no word of the topic ("那持久化呢？" after a Redis
   question) loses the earlier turn's keywords.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from esmem.domain.analysis import tokens
from esmem.domain.patterns import Pattern
from esmem.errors import InvalidInput

ROLES = ("user", "assistant")
SKIPPED_ROLES = ("system", "tool")

# Acknowledgements, greetings, thanks and continuation replies; single function words are listed so
# that "好的我继续" or "ok, let me continue" are covered, but never a word that could carry a topic.
_ZH_FILLER = """
嗯 嗯嗯 嗯哼 哦 噢 喔 啊 呃 额 唔 哈 哈哈 嘿 嗨 哈喽 好 好的 好吧 好呀 好啊 好哒 好嘞 行 行吧 可以 可以的 对 对的
对呀 是 是的 是啊 没错 当然 继续 接着 然后 然后呢 继续说 接着说 下去 往下 谢谢 谢了 多谢 感谢 辛苦了 你好 您好
早 早上好 上午好 中午好 下午好 晚上好 晚安 再见 拜拜 收到 明白 明白了 了解 了解了 知道了 懂了 清楚了 没问题
原来如此 这样啊 我 你 您 请 吧 呢 了 啦 呀 吗 嘛 的 地 一下 马上 这就 那 那么 非常 很 太 真 棒 太好了 不错 很好
说 讲 来 现在 再 还有 一些 更多 些
"""
_EN_FILLER = """
ok, okay, k, kk, yes, yeah, yep, yup, ya, sure, right, alright, all right, fine, cool, great, nice, good,
perfect, awesome, excellent, thanks, thank you, thx, ty, cheers, got it, i see, understood, noted, clear,
continue, continuing, go on, go ahead, keep going, carry on, proceed, please, hi, hello, hey,
good morning, good afternoon, good evening, good night, bye, goodbye, see you, hmm, hm, uh, um, ah, oh,
lol, haha, sounds good, makes sense, helps, helpful, works, let me, let's, i, i'll, i will, me, you, it,
that, this, will, do, sure thing, no problem, of course, more, next, and, so, then, well, very, much,
a lot, here, here's, there, is, are, we, now, absolutely, certainly, indeed
"""

_UNITS = Pattern(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]|[\p{L}\p{N}]+")
# Clause punctuation only: apostrophes and the dot of "Next.js" stay inside a phrase.
_PHRASE_SPLIT = Pattern(r"(?:[,!?;:()\[\]\"，。！？；：、…（）【】「」《》~～\n]|\.(?=\s|$))+")
_WORD_CHAR = Pattern(r"[\p{L}\p{N}]")
# Question words, pronouns and "that helps": a turn made only of these is no topic, and sharing only
# these with the anchor does not make an older turn on-topic.
_GENERIC = frozenset(tokens(
    "i you we me my your our can could how what why when where which who do does did should would want "
    "need please tell about know like get use using make help thing something anything", query=True)
) | frozenset("怎么 么办 么样 什么 如何 为什 可以 一下 我们 你们 他们 应该 需要 想要 这个 那个 哪个 有没 没有 "
              "是不 不是 能不 不能 告诉 知道 请问 帮我 问题".split())


def _units(text: str) -> tuple[str, ...]:
    """A phrase as lexicon units: one per CJK character, one per Latin word (apostrophes removed)."""
    return tuple(_UNITS.findall(text.replace("'", "").replace("\u2019", "").casefold()))


_LEXICON: frozenset[tuple[str, ...]] = frozenset(
    filter(None, map(_units, [*_ZH_FILLER.split(), *_EN_FILLER.split(",")])))
_LONGEST = max(len(e) for e in _LEXICON)


def _covered(units: tuple[str, ...]) -> bool:
    """True when the units split entirely into lexicon entries (dynamic programming over prefixes)."""
    ok = [True] + [False] * len(units)
    for end in range(1, len(units) + 1):
        ok[end] = any(ok[start] and units[start:end] in _LEXICON
                      for start in range(max(0, end - _LONGEST), end))
    return ok[-1]


def strip_filler(text: str, *, min_chars: int = 2) -> str:
    """`text` without its filler phrases; "" when nothing substantive (or almost nothing) is left."""
    kept = [p.strip() for p in _PHRASE_SPLIT.split(text) if p.strip() and not _covered(_units(p))]
    content = " ".join(kept)
    return content if len(_WORD_CHAR.findall(content)) >= min_chars and _topic_tokens(content) else ""


def is_filler(text: str, *, min_chars: int = 2) -> bool:
    """An acknowledgement, greeting, thanks, "go on", a bare "why?" or a very short turn: nothing to
    search for."""
    return not strip_filler(text, min_chars=min_chars)


def _topic_tokens(text: str) -> frozenset[str]:
    return frozenset(tokens(text, query=True)) - _GENERIC


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of {'role': ..., 'content': ...} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str):
            raise InvalidInput(f"message #{i + 1} must be an object with a string 'content'")
        role = m.get("role")
        if role in SKIPPED_ROLES:
            continue
        if role not in ROLES:
            raise InvalidInput(f"message #{i + 1} has role {role!r} "
                               f"(expected one of {', '.join(ROLES + SKIPPED_ROLES)})")
        out.append((role, m["content"]))
    return out


def build_query(messages: Sequence[Mapping[str, Any]], n: int = 3, *, min_chars: int = 2,
                max_turn_chars: int = 400) -> str:
    """The recall query for the conversation so far; "" when no turn has anything to search for.

    `messages` are {"role": "user" | "assistant", "content": str}, oldest first ("system" and "tool"
    messages are skipped). Each kept turn is cut to `max_turn_chars` so one long assistant answer
    cannot outweigh the user's words."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInput(f"n must be a positive integer, got {n!r}")
    turns = [(role, strip_filler(text, min_chars=min_chars)[:max_turn_chars]) for role, text in _turns(messages)]
    turns = [(role, text) for role, text in turns if text]
    if not turns:
        return ""
    users = [i for i, (role, _) in enumerate(turns) if role == "user"]
    anchor = users[-1] if users else len(turns) - 1
    anchor_tokens = _topic_tokens(turns[anchor][1])
    window = sorted(set(range(max(0, len(turns) - n), len(turns))) | {anchor})
    return " ".join(turns[i][1] for i in window
                    if i >= anchor or _topic_tokens(turns[i][1]) & anchor_tokens)


def read_messages(path: str | Path) -> list[Any]:
    """A conversation file: a JSON list of messages, or an object with a "messages" list."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidInput(f"cannot read messages file {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidInput(f"messages file {path} is not valid JSON: {e}") from None
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise InvalidInput(f'messages file {path} must hold a JSON list of messages (or {{"messages": [...]}})')
    return messages
