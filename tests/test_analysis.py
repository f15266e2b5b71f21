"""The index/search analyzers on the real engine, and the Python mirror's parity with `_analyze`."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esmem.domain.analysis import tokens, truncate_query
from esmem.index.engine import Engine
from esmem.index.install import Names


def analyze(engine: Engine, prefix: str, analyzer: str, text: str) -> list[str]:
    resp = engine.request("POST", f"/{Names(prefix).alias}/_analyze", {"analyzer": analyzer, "text": text})
    return [t["token"] for t in resp["tokens"]]


def test_exact_tokens_powershell(engine: Engine, installed: str) -> None:
    text = "PowerShell 命令没有输出"
    assert analyze(engine, installed, "esmem_index", text) == [
        "powershel", "命", "命令", "令", "令没", "没", "没有", "有", "有输", "输", "输出", "出"]
    # query side: bigrams only, so 输出 no longer also counts as 输 + 出 (seed 002's fix)
    assert analyze(engine, installed, "esmem_search", text) == ["powershel", "命令", "令没", "没有", "有输", "输出"]


def test_joined_pairs_adjacent_words_into_compounds(engine: Engine, installed: str) -> None:
    """`content.joined` holds each two adjacent words as one ("smart watch" -> smartwatch, "e-mail" -> email),
    stemmed after joining, CJK left to the bigrams of `content`."""
    assert analyze(engine, installed, "esmem_joined", "Caroline's smart watches") == ["carolinesmart", "smartwatch"]
    assert analyze(engine, installed, "esmem_joined", "an E-mail") == ["ane", "email"]
    assert analyze(engine, installed, "esmem_joined", "smart 咖啡 watch 缓存") == ["smartwatch"]


def test_exact_tokens_english(engine: Engine, installed: str) -> None:
    text = "I enjoy hiking on weekends"
    assert analyze(engine, installed, "esmem_index", text) == ["i", "enjoy", "hike", "weekend"]
    assert analyze(engine, installed, "esmem_search", text) == ["i", "enjoy", "hike", "weekend"]


def test_question_words_are_stop_words(engine: Engine, installed: str) -> None:
    # LoCoMo misses: "what"/"did" matched chit-chat turns instead of the fact asked about
    assert analyze(engine, installed, "esmem_search", "What did Caroline research?") == ["carolin", "research"]


def test_weekend_finds_weekends(engine: Engine, installed: str, store) -> None:
    store.remember("I enjoy hiking on weekends", "u1")
    res = store.recall("what do I do at the weekend", "u1", touch=False)
    assert [r.memory.content for r in res.items] == ["I enjoy hiking on weekends"]


CORPUS = [
    "PowerShell 回显不稳，结果要 Set-Content 写文件再用读工具读回来",
    "无头 Chrome 截图必须加 --user-data-dir 和绝对输出路径 C:\\tmp\\shot.png",
    "遇到 HTTP 429 要指数退避 + jitter，最多重试 5 次（Retry-After 优先）",
    "User's favourite IDE is VS Code; she's learning Rust 1.95 and Go 1.26.",
    "每天最多发一篇 post，发布时间 09:00 UTC+8；e-mail: ops@example.com",
    "日本語のテキストとカタカナ、ｶﾀｶﾅ（半角）も混ぜる。한국어 문장도 있다.",
    "ＦＵＬＬＷＩＤＴＨ letters and numbers １２３ mixed with 中文",
    "Caroline went to the LGBTQ support group on 7 May 2023 and felt accepted",
    "don't, can't, won't; U.S.A. v2.0.1 foo_bar baz-qux 3.14159 1,000,000",
    "emoji 😀 and symbols © ® ™ → should not break 记忆 tokens",
    "臺北的會議改為週三下午（後天），請記住這個軟體的資料庫設定",
    "a", "中", "the and of to",
]


@pytest.mark.parametrize("text", CORPUS)
@pytest.mark.parametrize("analyzer", ["esmem_index", "esmem_search"])
def test_python_mirror_matches_the_engine(engine: Engine, installed: str, analyzer: str, text: str) -> None:
    assert tokens(text, query=analyzer == "esmem_search") == analyze(engine, installed, analyzer, text)



# Word joiners, quotes, underscores and scripts side by side, where the word-break rules differ case by case.
PUNCTUATION_HEAVY = list("abXY19_ .:,;'\"-@/") + list("\u2018\u2019\u3001\u3002\uff0c\uff0e\uff1a\uff1b\uff07\u00b7\u2014") + \
    ["中", "文", "臺", "é", "カ", "ー", "ｶ", "ｰ", "한", "😀", "ß"]


def test_python_mirror_matches_the_engine_on_punctuation_heavy_text(engine: Engine, installed: str) -> None:
    """Seeded random strings of joiners, quotes and underscores between words of several scripts, as the
    standard tokenizer and cjk_bigram have them: an opening quote is not part of the word after it
    ("say 'yes'" is say, yes), a run of "_" alone is no token, and Hangul joined with letters or digits
    is one word, not bigrams ("한1")."""
    rng = random.Random(20261205)
    texts = ["say 'yes'", "x \u2018quoted\u2019 y", "__ 中_", "a._b 1_.2 a'b'c", "한1 한국어 カー ｶｰ"] + \
        ["".join(rng.choice(PUNCTUATION_HEAVY) for _ in range(rng.randint(1, 14))) for _ in range(150)]
    for text in texts:
        for analyzer in ("esmem_index", "esmem_search"):
            assert tokens(text, query=analyzer == "esmem_search") == analyze(engine, installed, analyzer, text), \
                (analyzer, text)


def test_tokens_are_thread_safe() -> None:
    """Writers in threads of one process tokenise at once (merge overlap); the Snowball stemmer keeps
    state per call, so unguarded it raised IndexError('string index out of range') under contention."""
    import threading

    import snowballstemmer

    from esmem.domain import analysis

    errors: list[str] = []

    def work(n: int) -> None:
        own = snowballstemmer.stemmer("english")  # this thread's reference
        try:
            for i in range(1500):  # words no other thread uses: every stem is a cache miss
                w = f"connections{n}x{i}running"
                assert analysis.tokens(w) == [own.stemWord(w)]
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(list("ab 缓存部署 ,'s-") + ["the ", "Redis ", "重试"]), max_size=40).map("".join),
       limit=st.integers(1, 40))
def test_truncate_query_keeps_at_most_the_limit_and_whole_short_texts(text: str, limit: int) -> None:
    """The merge look-up and recall send at most `limit` search terms; a text of at most `limit`
    characters is sent whole (the short cut taken before analysing it)."""
    out = truncate_query(text, limit)
    assert text.startswith(out) and len(tokens(out, query=True)) <= limit
    if len(text) <= limit:
        assert out == text
