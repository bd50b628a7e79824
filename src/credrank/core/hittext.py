"""The text a hit carries — one vocabulary for every front door — and the snippet rule.

Every result (``credrank search`` and its ``--json``, ``POST /search`` and ``/rerank``,
:meth:`~credrank.core.candidates.Candidates.hits`, the web page) carries its document's text in
one of three forms, chosen by the option :data:`TEXT_OPTION` (``--text`` on the command line,
the JSON field ``"text"`` over HTTP, ``text=`` in the library), checked by the one validator
:func:`check_text`:

* ``full`` — the stored text, as indexed;
* ``snippet`` (the default, :data:`DEFAULT_TEXT`) — a passage of at most
  :data:`SNIPPET_CHARS` characters of it (:func:`snippet`);
* ``none`` — no text: the hit has no ``text`` key, and the text is not read from the store.

The snippet is the window of at most :data:`SNIPPET_CHARS` characters of the text (runs of
whitespace said as one space) that holds the most distinct query words — ties: more matches,
then the earlier window — centred on the words it holds and cut at word boundaries, with ``…``
(U+2026) at each end where text was cut off (so at most ``SNIPPET_CHARS + 2`` characters in
all). A text of at most :data:`SNIPPET_CHARS` characters is its own snippet; a text without
any query word gives its opening window. A *query word* is a run of letters or digits of at
least two characters that is not in :data:`STOPWORDS` (all words count when every one is);
it matches a word of the text that starts with it, ignoring case ("prevent" matches
"Prevention"; case as Python's case-insensitive regular expressions fold it, so "σ" also
matches "ς" and "Σ"). The web page highlights the same words in the snippet (``app.js``
holds a copy of :data:`STOPWORDS`; a test checks the two agree).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "DEFAULT_TEXT",
    "ELLIPSIS",
    "SNIPPET_CHARS",
    "STOPWORDS",
    "TEXT_CHOICES",
    "TEXT_HELP",
    "TEXT_OPTION",
    "check_text",
    "highlights",
    "hit_text",
    "query_words",
    "snippet",
]

#: the option's name: ``--text`` (CLI), ``"text"`` (HTTP), ``text=`` (library)
TEXT_OPTION = "text"
#: what a hit may carry of its document's text
TEXT_CHOICES = ("full", "snippet", "none")
#: what it carries when nothing is asked
DEFAULT_TEXT = "snippet"
#: the longest snippet, in characters of the document (the ``…`` marks come on top)
SNIPPET_CHARS = 240
#: what marks a cut end of a snippet
ELLIPSIS = "\u2026"
#: the option's help, as every front door says it (each states its own default)
TEXT_HELP = (f"the text each hit carries: full (as indexed) | snippet (at most "
             f"{SNIPPET_CHARS} characters around the query words, cut at word boundaries, "
             f"'{ELLIPSIS}' where cut) | none")
#: English function words that never choose a snippet's window (nor are highlighted)
STOPWORDS = frozenset("""
a about after all also am an and any are as at be been before being between both but by can
could did do does doing during each for from had has have having he her here hers him his how i
if in into is it its just me more most my no nor not of off on once only or other our ours out
over own same she should so some such than that the their theirs them then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours
""".split())

_WORD = re.compile(r"\w+")


def check_text(value: object, name: str = TEXT_OPTION) -> str:
    """``value`` if it is one of :data:`TEXT_CHOICES`, else ``ValueError`` naming ``name``
    (``--text`` for the CLI, ``text`` for the library and the service) — the one validator."""
    if isinstance(value, str) and value in TEXT_CHOICES:
        return value
    raise ValueError(f"{name}: expected one of {', '.join(TEXT_CHOICES)}, got {value!r}")


def query_words(query: str) -> list[str]:
    """The query's words that choose a snippet's window, lower-cased, in order, once each
    (see the module docstring)."""
    words = [w for w in dict.fromkeys(_WORD.findall(query.lower())) if len(w) >= 2]
    content = [w for w in words if w not in STOPWORDS]
    return content or words


@lru_cache(maxsize=256)
def _word_matcher(query: str) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
    """The query's words and one pattern that finds the words of a text they start: group
    ``k`` is the ``k``-th query word, tried in the query's order at the start of each word
    of the text (so a word is credited to the first query word that starts it), ignoring
    case; ``None`` where the query has no word. Cached per query: every hit of a search
    shares it."""
    words = tuple(query_words(query))
    if not words:
        return words, None
    alternatives = "|".join(f"({re.escape(w)})" for w in words)
    return words, re.compile(rf"(?<!\w)(?:{alternatives})\w*", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _ascii_words(query: str) -> tuple[str, ...] | None:
    """The query's words when every one is ASCII (then case folding is ``str.lower``),
    else ``None``. Cached per query: a tuple, no compiled pattern."""
    words = tuple(query_words(query))
    return words if all(w.isascii() for w in words) else None


_WORD_END = re.compile(r"\w*")


def _ascii_matches(text: str, words: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """:func:`_matches` of an ASCII ``text`` and ASCII query ``words`` without compiling a
    pattern per query: each word's occurrences in the lower-cased text (``str.find``), kept
    where a word of the text starts, credited to the first query word in the query's order
    that starts it; ``O(len(text) · words)`` in C plus ``O(matches)`` in Python. The same
    answer as the pattern: on ASCII, Python's case-insensitive matching is ``str.lower``."""
    low = text.lower()
    found: dict[int, str] = {}
    for word in words:
        at = low.find(word)
        while at != -1:
            if (at == 0 or not _is_word(low[at - 1])) and at not in found:
                found[at] = word
            at = low.find(word, at + 1)
    out = []
    for at in sorted(found):
        word_end = _WORD_END.match(text, at)
        assert word_end is not None  # ``\w*`` matches everywhere
        out.append((at, word_end.end(), found[at]))
    return out


def _is_word(char: str) -> bool:
    """Whether an ASCII character is a ``\\w`` character."""
    return char.isalnum() or char == "_"


def _matches(text: str, query: str) -> list[tuple[int, int, str]]:
    """``(start, end, query word)`` of every word of ``text`` that a query word starts (one
    regular-expression scan of ``text``; for ASCII text and query words, :func:`_ascii_matches`,
    which compiles nothing per query)."""
    ascii_words = _ascii_words(query)
    if ascii_words is not None and text.isascii():
        return _ascii_matches(text, ascii_words) if ascii_words else []
    words, pattern = _word_matcher(query)
    if pattern is None:
        return []
    return [(m.start(), m.end(), words[m.lastindex - 1])  # type: ignore[operator]
            for m in pattern.finditer(text)]


def highlights(text: str, query: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every word of ``text`` a query word matches: what a page or a
    terminal highlights (never part of the JSON documents)."""
    return [(start, end) for start, end, _ in _matches(text, query)]


def snippet(text: str, query: str, chars: int = SNIPPET_CHARS) -> str:
    """The passage of ``text`` shown for ``query``: at most ``chars`` characters of the text
    around the best query-word match, cut at word boundaries, with ``…`` at a cut end (the
    rule in the module docstring)."""
    if chars < 1:
        raise ValueError(f"chars: expected an integer >= 1, got {chars!r}")
    flat = " ".join(text.split())  # runs of whitespace as one space
    n = len(flat)
    if n <= chars:
        return flat
    found = _matches(flat, query)
    if not found:
        return _cut(flat, 0, chars, 0, 0)
    first, last = _best_window(found, chars)
    slack = chars - (last - first)
    start = max(0, first - slack // 2)
    end = min(n, start + chars)
    start = max(0, end - chars)
    return _cut(flat, start, end, first, last)


def _best_window(found: list[tuple[int, int, str]], chars: int) -> tuple[int, int]:
    """``(start of its first match, end of its last)`` of the run of matches that fits in
    ``chars`` with the most distinct query words (ties: more matches, then earlier)."""
    best: tuple[int, int, int, int] | None = None  # (distinct, count, -first, last)
    counts: dict[str, int] = {}
    j = 0
    for i, (first, _, _) in enumerate(found):
        while j < len(found) and found[j][1] - first <= chars:
            counts[found[j][2]] = counts.get(found[j][2], 0) + 1
            j += 1
        if j > i:
            score = (len(counts), j - i, -first, found[j - 1][1])
            if best is None or score[:3] > best[:3]:
                best = score
        else:  # one word longer than the window: itself alone
            score = (1, 1, -first, first + chars)
            if best is None or score[:3] > best[:3]:
                best = score
            j = i + 1
            continue
        word = found[i][2]
        counts[word] -= 1
        if not counts[word]:
            del counts[word]
    assert best is not None
    return -best[2], best[3]


def _cut(flat: str, start: int, end: int, first: int, last: int) -> str:
    """``flat[start:end]`` moved in to word boundaries (never past the matched words
    ``flat[first:last]``), ``…`` where text is left out."""
    if start > 0 and not flat[start - 1].isspace() and not flat[start].isspace():
        space = flat.find(" ", start, first)
        if space != -1:
            start = space + 1
    if end < len(flat) and not flat[end].isspace() and not flat[end - 1].isspace():
        space = flat.rfind(" ", max(start, last), end)
        if space != -1:
            end = space
    body = flat[start:end].strip()
    return (ELLIPSIS if start > 0 else "") + body + (ELLIPSIS if end < len(flat) else "")


def hit_text(text: object, query: str, mode: str, chars: int = SNIPPET_CHARS) -> str | None:
    """What a hit carries of ``text`` under ``mode`` (``full`` or ``snippet``; ``None`` where
    the batch holds no text for it)."""
    if text is None:
        return None
    text = str(text)
    return text if mode == "full" else snippet(text, query, chars)
