"""A Python mirror of the index's analyzers, so MMR and the merge overlap see the engine's tokens.

Engine chain (templates/index_template.json.j2): traditional Chinese characters folded to simplified
(esmem_han, templates/han_t2s.txt) -> standard tokenizer (UAX #29 words, one token per Han character)
-> cjk_width -> lowercase -> possessive_english -> stop words (templates/stopwords_en.txt) -> cjk_bigram
-> snowball English.
`esmem_index` keeps CJK unigrams and bigrams; `esmem_search` keeps only bigrams (plus lone
characters), which is the query-side dedup of seed 002: a bigram no longer counts its two unigrams
again. tests/test_analysis.py checks this module against `_analyze` on a mixed corpus.
"""
from __future__ import annotations

import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

from esmem.domain.patterns import Pattern
from esmem.index.templates import han_folding, stopwords

MAX_TOKEN_LENGTH = 255  # the standard tokenizer's default
_BOUNDARY = Pattern(r"(?V1w)\b")
_WORDLIKE = Pattern(r"[\p{L}\p{N}\p{M}\p{Extended_Pictographic}]")  # "_" alone makes no token
# A word of these scripts only (and the prolonged sound mark) is what cjk_bigram pairs; Hangul joins
# letters and digits ("한b", "한1": one alphanumeric word, left whole like any other).
_CJK = Pattern(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc\uff70]+")
_WIDE = Pattern("[\uff00-\uffef]")  # the forms cjk_width folds
_QUOTES = "'\u2018\u2019"  # the split leaves these opening a word; the standard tokenizer does not
_POSSESSIVE = ("'s", "\u2019s", "\uff07s")
_stemmer = snowballstemmer.stemmer("english")  # stateful: one thread at a time (_STEM_LOCK)
_STEM_LOCK = threading.Lock()
STOP_WORDS = stopwords()  # templates/stopwords_en.txt, also rendered into the index template
_HAN = str.maketrans(han_folding())  # templates/han_t2s.txt, the char filter esmem_han


def _fold_width(text: str) -> str:
    """cjk_width: full-width ASCII to half-width, half-width katakana to full-width."""
    if not _WIDE.search(text):
        return text
    return "".join(unicodedata.normalize("NFKC", ch) if "\uff00" <= ch <= "\uffef" else ch for ch in text)


def fold_han(text: str) -> str:
    """Traditional Chinese characters as their simplified forms, one for one (the char filter esmem_han):
    what every reader of a text's words sees, so cue words written in simplified match both scripts."""
    return text if text.isascii() else text.translate(_HAN)


@lru_cache(maxsize=4096)  # the pair reading and both analyzers segment the same text one after the other
def _segments(text: str) -> tuple[tuple[str, int, int], ...]:
    """esmem_han then the standard tokenizer: UAX #29 word segments that hold a letter or digit, with
    offsets (the folding maps one character to one, so they are the text's own)."""
    text = fold_han(text)
    out: list[tuple[str, int, int]] = []
    pos = 0
    for part in _BOUNDARY.split(text):
        start, pos = pos, pos + len(part)
        if part and part[0] in _QUOTES:  # "say 'yes'": the word starts after the quote
            word = part.lstrip(_QUOTES)
            start, part = pos - len(word), word
        if not part or not _wordlike(part):
            continue
        for i in range(0, len(part), MAX_TOKEN_LENGTH):
            chunk = part[i:i + MAX_TOKEN_LENGTH]
            out.append((chunk, start + i, start + i + len(chunk)))
    return tuple(out)


@lru_cache(maxsize=65536)  # a vocabulary recurs: one regex search per distinct segment, not per segment
def _wordlike(part: str) -> bool:
    return _WORDLIKE.search(part) is not None


def _is_cjk(token: str) -> bool:
    return bool(_CJK.fullmatch(token))


def _normalise(token: str) -> str:
    return _strip_possessive(_fold_width(token).lower())


def _strip_possessive(token: str) -> str:
    for suffix in _POSSESSIVE:
        if token.endswith(suffix):
            return token[:-2]
    return token


@lru_cache(maxsize=65536)
def _stem(token: str) -> str:
    with _STEM_LOCK:  # concurrent writers in one process share it; unguarded it fails with IndexError
        stem: str = _stemmer.stemWord(token)  # snowballstemmer has no type hints
        return stem


def tokens(text: str, *, query: bool = False) -> list[str]:
    """Tokens as `esmem_index` (query=False) or `esmem_search` (query=True) would produce them."""
    return _analyse(text)[1 if query else 0]


def _analyse(text: str) -> tuple[list[str], list[str]]:
    """One pass, both analyzers: (index tokens, search tokens) - they differ only in CJK unigrams."""
    index: list[str] = []
    search: list[str] = []
    run: list[str] = []  # adjacent CJK characters waiting to be bigrammed
    last_end = -1
    wide = _WIDE.search(text) is not None  # cjk_width has work only then

    def flush() -> None:
        if len(run) == 1:
            index.append(_stem(run[0]))
            search.append(index[-1])
        else:
            for i in range(len(run) - 1):
                index.append(_stem(run[i]))
                index.append(_stem(run[i] + run[i + 1]))
                search.append(index[-1])
            index.append(_stem(run[-1]))
        run.clear()

    for raw, start, end in _segments(text):
        unit = _unit(raw, wide)
        if unit is None:
            continue
        token, cjk = unit
        if cjk:
            if run and start != last_end:
                flush()
            run.extend(token)
            last_end = end
            continue
        if run:
            flush()
        index.append(_stem(token))
        search.append(index[-1])
    if run:
        flush()
    return index, search


@lru_cache(maxsize=65536)  # a vocabulary recurs: each word is normalised once (a third of _analyse)
def _unit(raw: str, wide: bool) -> tuple[str, bool] | None:
    """A segment as both analyzers see it: (token, whether CJK), or None for a stop word."""
    token = _normalise(raw) if wide else _strip_possessive(raw.lower())
    return None if token in STOP_WORDS else (token, _is_cjk(token))


@lru_cache(maxsize=16384)  # MMR and update resolution see the same memories recall after recall
def token_sets(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The distinct (index, search) tokens of a text, computed once per text and process."""
    index, search = _analyse(text)
    return frozenset(index), frozenset(search)


def token_set(text: str) -> frozenset[str]:
    """The distinct index tokens of a text: the unit of MMR's Jaccard similarity."""
    return token_sets(text)[0]


def truncate_query(text: str, max_terms: int) -> str:
    """The longest prefix of `text` whose search tokens number at most `max_terms`.

    A match query builds one clause per token; a 10 KB query would exceed the engine's clause
    limit (1024), so recall keeps the first terms instead of failing."""
    if len(text) <= max_terms:  # the count below never exceeds the number of characters
        return text
    count = 0
    for raw, start, end in _segments(text):
        token = _normalise(raw)
        if token in STOP_WORDS:
            continue
        count += len(token) if _is_cjk(token) else 1  # a CJK run yields at most one bigram per character
        if count > max_terms:
            return text[:start]
    return text
