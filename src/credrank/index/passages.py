"""Long documents as passages: token-aware splitting at index time (issue 36, item 1).

A dense embedder reads a fixed window of tokens (all-MiniLM-L6-v2: 256, its two special tokens
included) and embeds only the beginning of a longer text. ``credrank index`` therefore splits a
document whose embedded text (``title\\ntext``) is longer than its index's passage size into
*passages*: consecutive, overlapping slices of the document's text that each fit, cut on a
sentence boundary where one lies in the last half of the window, else between words. Each
passage is embedded as ``title\\npassage`` (a title longer than half a passage cut to that
half, :func:`title_share`, so that every passage keeps at least the other half for its text)
and stored as its own point (same ``doc_id``, provenance and dates as its document;
:func:`credrank.index.payload.document_payload`), and a search ranks passages and returns
documents, each scored by its best passage — MaxP
(Dai & Callan, "Deeper Text Understanding for IR with Contextual Neural Language Modeling",
SIGIR 2019) — with that passage as the hit's text
(:func:`credrank.index.payload.best_passages`).

A passage is a character span ``(start, end)`` of the document's ``text`` (never re-written:
the passages of a document put together, overlaps removed, are its text). Sizes are in the
embedder's own tokens (:func:`token_spans`); an embedder without a tokenizer (the hashing
embedder of the tests) counts whitespace-separated words, and has no window, so it chunks only
when a passage size is given.

:class:`Chunking` is what an index records in its manifest (``chunk_tokens``,
``chunk_overlap``): ``tokens == 0`` turns splitting off (texts longer than the window are then
embedded from their beginning and reported, :class:`~credrank.index.ingest.IndexReport`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from credrank.core.embedder import Embedder

__all__ = [
    "DEFAULT_OVERLAP",
    "MIN_TOKENS",
    "SPECIAL_TOKENS",
    "WINDOWS",
    "Chunking",
    "Span",
    "check_chunking",
    "chunk_texts",
    "cut_titles",
    "default_chunking",
    "passage_fields",
    "passage_key",
    "split_span",
    "split_spans",
    "title_share",
    "token_spans",
    "window_budget",
]

#: tokens the model adds around every text ([CLS] and [SEP] for MiniLM): a passage's own
#: tokens are the window less these
SPECIAL_TOKENS = 2
#: the smallest passage size accepted (tokens): below it a passage holds a phrase, not a
#: statement, and the number of points explodes
MIN_TOKENS = 16
#: the default overlap between consecutive passages (tokens): about an eighth of MiniLM's
#: window, so a sentence cut at a passage's end is whole at the next one's start
DEFAULT_OVERLAP = 32

#: a character span ``(start, end)`` of a document's text
Span = tuple[int, int]

#: where a sentence ends: after ., ! or ? (closing quotes or brackets allowed) before white
#: space, or at a line break
_SENTENCE_END = re.compile(r"""[.!?]["'”’)\]]*(?=\s)|\n""")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Chunking:
    """How an index splits long texts: passages of at most ``tokens`` tokens of the embedder
    (the window, special tokens included, is the most) overlapping by ``overlap`` tokens;
    ``tokens == 0``: no splitting. Recorded in the index's manifest."""

    tokens: int
    overlap: int = DEFAULT_OVERLAP

    @property
    def on(self) -> bool:
        return self.tokens > 0


def check_chunking(tokens: int | None, overlap: int | None, window: int | None, *,
                   words: Callable[[str], str] = lambda name: name) -> Chunking:
    """The chunking of a new index: ``tokens`` (``None``: the embedder's ``window``, or no
    splitting for an embedder without one; ``0``: no splitting) and ``overlap`` (``None``:
    :data:`DEFAULT_OVERLAP`, at most half a passage). ``ValueError`` naming the option as
    ``words(name)`` spells it (``--chunk-tokens`` for the CLI) when one is out of range."""
    if tokens is None:
        tokens = window or 0
    elif not isinstance(tokens, int) or isinstance(tokens, bool):
        raise ValueError(f"{words('chunk_tokens')}: expected an integer, got {tokens!r}")
    elif tokens != 0 and tokens < MIN_TOKENS:
        raise ValueError(f"{words('chunk_tokens')}: expected 0 (no splitting) or at least "
                         f"{MIN_TOKENS} tokens, got {tokens}")
    elif window is not None and tokens > window:
        raise ValueError(f"{words('chunk_tokens')}: expected at most the embedder's window of "
                         f"{window} tokens (a longer passage is cut by the model), got {tokens}")
    if overlap is None:
        overlap = min(DEFAULT_OVERLAP, tokens // 4)
    elif not isinstance(overlap, int) or isinstance(overlap, bool) or overlap < 0:
        raise ValueError(f"{words('chunk_overlap')}: expected an integer >= 0, got "
                         f"{overlap!r}")
    elif tokens and overlap > (tokens - SPECIAL_TOKENS) // 2:
        raise ValueError(f"{words('chunk_overlap')}: expected at most half a passage "
                         f"({(tokens - SPECIAL_TOKENS) // 2} tokens with "
                         f"{words('chunk_tokens')} {tokens}), got {overlap}")
    elif not tokens and overlap:
        raise ValueError(f"{words('chunk_overlap')}: only with splitting "
                         f"({words('chunk_tokens')} > 0), got {overlap}")
    return Chunking(tokens, overlap)


def passage_key(doc_id: str, number: int) -> str:
    """What a passage's point id is derived from: the document id for its first passage (so an
    index's unsplit documents keep their point ids), ``doc_id`` + NUL + number for the others
    (a NUL cannot end a real id's collision unnoticed: Qdrant Edge refuses two ids that share
    a point, :meth:`~credrank.index.qdrant_edge.EdgeIndex.upsert`)."""
    return doc_id if number == 0 else f"{doc_id}\x00{number}"


def token_spans(embedder: Embedder) -> Callable[[Sequence[str]], list[list[Span]]]:
    """``spans(texts)``: each text's tokens as character spans, special tokens left out, in
    the embedder's tokenizer (its ``token_spans``, or a sentence-transformers model's fast
    tokenizer; a caching wrapper answers as its inner embedder), else whitespace words."""
    own = getattr(embedder, "token_spans", None)
    if callable(own):
        return lambda texts: [[(int(s), int(e)) for s, e in row] for row in own(texts)]
    inner = getattr(embedder, "inner", None)
    if inner is not None:
        return token_spans(inner)
    tokenizer = getattr(getattr(embedder, "model", None), "tokenizer", None)
    if tokenizer is not None and callable(tokenizer):
        def hf(texts: Sequence[str]) -> list[list[Span]]:
            enc = tokenizer(list(texts), add_special_tokens=False, truncation=False,
                            return_offsets_mapping=True)
            return [[(int(s), int(e)) for s, e in row] for row in enc["offset_mapping"]]
        return hf
    return lambda texts: [[m.span() for m in _WORD.finditer(t)] for t in texts]


def title_share(chunking: Chunking) -> int:
    """The most tokens of a title embedded with each passage: half a passage's own tokens
    (the passage size less the special tokens) less one for the line break after the title.
    A longer title is cut to it (:func:`cut_titles`), so a passage always keeps at least the
    other half of the window for its text: a title can no longer shrink the passages to a few
    tokens each (a document then became thousands of points that all embedded the same
    title)."""
    return max(0, (chunking.tokens - SPECIAL_TOKENS) // 2 - 1)


def window_budget(chunking: Chunking, title_tokens: int) -> int:
    """A passage's own tokens: the passage size less the special tokens and the title's
    tokens (at most :func:`title_share`, plus one for the line break after it): at least half
    the passage's own tokens, whatever the title."""
    title = min(title_tokens, title_share(chunking)) + 1 if title_tokens else 0
    return max(1, chunking.tokens - SPECIAL_TOKENS - title)


def cut_titles(embedder: Embedder, chunking: Chunking,
               titles: Sequence[str | None]) -> list[str | None]:
    """The titles as embedded with their passages under ``chunking``: each longer than
    :func:`title_share` tokens of the embedder (:func:`token_spans`) cut after its last token
    that fits (``None`` when none does); the others, and every title when splitting is off
    (the whole embedded text is then cut by the model and reported), as given. Indexing
    embeds ``title\\npassage`` with these titles and reports the documents whose title was
    cut (:class:`~credrank.index.ingest.IndexReport`)."""
    out = list(titles)
    if not chunking.on:
        return out
    share = title_share(chunking)
    titled = [i for i, t in enumerate(titles) if t]
    if not titled:
        return out
    for i, row in zip(titled, token_spans(embedder)([str(titles[i]) for i in titled]),
                      strict=True):
        if len(row) > share:
            title = str(titles[i])
            out[i] = (title[:row[share - 1][1]].rstrip() or None) if share else None
    return out


def split_spans(text: str, tokens: Sequence[Span], budget: int, overlap: int) -> list[Span]:
    """The passages of ``text`` (character spans) whose ``tokens`` (character spans, in order)
    number at most ``budget`` each, consecutive passages sharing about ``overlap`` tokens.

    Greedy, left to right: a passage starting at token ``s`` ends at the last sentence end
    (:data:`_SENTENCE_END`) after token ``s + budget // 2`` that keeps it within ``budget``
    tokens, else after token ``s + budget - 1`` between two words where the text has a space
    there, else at that token. The next passage starts ``overlap`` tokens before the end,
    moved forward to a word's start, and always after the previous start. The first passage
    starts at 0 and the last ends at ``len(text)``; a text of at most ``budget`` tokens is one
    passage ``(0, len(text))``.
    """
    n = len(tokens)
    if budget < 1:
        raise ValueError(f"budget: expected an integer >= 1, got {budget}")
    if n <= budget:
        return [(0, len(text))]
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    spans: list[Span] = []
    start_tok = 0
    while True:
        if n - start_tok <= budget:
            spans.append((tokens[start_tok][0] if spans else 0, len(text)))
            return spans
        last = start_tok + budget - 1  # the last token that fits
        cut = _sentence_cut(tokens, ends, start_tok + budget // 2, last)
        if cut is None:
            cut = _word_cut(tokens, start_tok + max(1, budget // 2), last)
        begin = tokens[start_tok][0] if spans else 0
        spans.append((begin, tokens[cut][1]))
        nxt = max(start_tok + 1, cut + 1 - overlap)
        while nxt <= cut and nxt > start_tok + 1 and not _word_start(tokens, nxt):
            nxt += 1
        start_tok = nxt


def _sentence_cut(tokens: Sequence[Span], ends: Sequence[int], lo: int, hi: int) -> int | None:
    """The last token index in ``[lo, hi]`` that ends a sentence (its end is a sentence end),
    or ``None``."""
    for t in range(hi, lo - 1, -1):
        end = tokens[t][1]
        i = bisect.bisect_left(ends, end)
        # a sentence end at this token's end, or in the white space up to the next token
        nxt = tokens[t + 1][0] if t + 1 < len(tokens) else end
        if i < len(ends) and ends[i] <= nxt:
            return t
    return None


def _word_cut(tokens: Sequence[Span], lo: int, hi: int) -> int:
    """The last token index in ``[lo, hi]`` followed by white space (a word's end), else
    ``hi``."""
    for t in range(hi, lo - 1, -1):
        if t + 1 < len(tokens) and tokens[t + 1][0] > tokens[t][1]:
            return t
    return hi


def _word_start(tokens: Sequence[Span], t: int) -> bool:
    """Whether token ``t`` starts a word (white space, or the text's start, before it)."""
    return t == 0 or tokens[t][0] > tokens[t - 1][1]


def chunk_texts(embedder: Embedder, chunking: Chunking, titles: Sequence[str | None],
                texts: Sequence[str]) -> list[list[Span]]:
    """The passages (character spans of each text) of documents with these titles and texts
    under ``chunking`` (one span ``(0, len(text))`` each when it is off). Token counts are the
    embedder's (:func:`token_spans`), tokenized once per call; a title counts for at most
    :func:`title_share` tokens (:func:`window_budget`): embed the passages with the titles of
    :func:`cut_titles`."""
    if not chunking.on:
        return [[(0, len(t))] for t in texts]
    spans_of = token_spans(embedder)
    bodies = spans_of(texts)
    titled = [i for i, t in enumerate(titles) if t]
    title_tokens: dict[int, int] = {}
    if titled:
        for i, row in zip(titled, spans_of([str(titles[i]) for i in titled]), strict=True):
            title_tokens[i] = len(row)
    out = []
    for i, (text, toks) in enumerate(zip(texts, bodies, strict=True)):
        budget = window_budget(chunking, title_tokens.get(i, 0))
        out.append(split_spans(text, toks, budget, min(chunking.overlap, budget // 2)))
    return out


def split_span(count: Any, span: Any) -> Span | None:
    """The ``span`` of a point of a document split into ``count`` passages (its payload's
    ``passages`` and ``span``), or ``None`` for a document stored whole (or a payload written
    before passages)."""
    if (isinstance(count, int) and count > 1 and isinstance(span, list | tuple)
            and len(span) == 2):
        return int(span[0]), int(span[1])
    return None


def passage_fields(number: int, count: int, span: Span) -> dict[str, Any]:
    """The payload fields that place a point in its document: ``passage`` (0-based),
    ``passages`` (the document's count) and ``span`` (``[start, end]`` of its text)."""
    return {"passage": number, "passages": count, "span": [span[0], span[1]]}


#: the window (tokens, special tokens included) of the embedders credrank ships, by name:
#: what a new index's passages default to (:func:`default_chunking`)
WINDOWS = {"minilm": 256}


def default_chunking(embedder: str) -> Chunking:
    """The chunking of a new index for the embedder called ``embedder`` when none is asked:
    passages of its whole window (:data:`WINDOWS`) overlapping by :data:`DEFAULT_OVERLAP`,
    or no splitting for an embedder without a known window (hashing, precomputed vectors)."""
    window = WINDOWS.get(embedder)
    return check_chunking(None, None, window)
