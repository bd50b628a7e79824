"""Answer equivalence ``~``: which source answers count as the same answer class (chapter 35.3).

The chapter leaves ``~`` to "the chosen answer-equivalence rule" and warns not to count
paraphrases as separate truths. The rule here is declared in three layers, applied in order:

1. **normalisation** (:func:`equivalence_normalize`): Unicode NFKC, case folding, invisible
   format characters deleted (zero-width space, soft hyphen, BOM), thousands separators dropped
   (``1,000`` → ``1000``), another comma between digits read as a decimal comma (``3,14`` →
   ``3.14``), hyphens/dashes/slashes → space, every other punctuation or symbol character
   deleted, except what changes the answer: a decimal point between two digits, a minus sign
   that starts a number (``-5``, ``−5``), a slash between digits (``1/2``; ``½`` is ``1/2``),
   ``+`` and ``#`` attached to the end of a word (``C++``, ``C#``); number words ``zero`` …
   ``ninety-nine`` → digits (``twenty one`` → ``21``), articles ``a``/``an``/``the`` removed
   (unless the answer is nothing but articles, e.g. the choice ``A``), whitespace collapsed.
   The rule merges spellings, never different answers: ``-5`` ≁ ``5``, ``C++`` ≁ ``C``,
   ``½`` ≁ ``12``, ``3,14`` ≁ ``314``;
2. **aliases**: a mapping ``canonical -> [aliases]``; every alias (normalised) maps to the
   normalised canonical form;
3. **embedding clustering** (optional): an injected ``embed(list[str]) -> (n, d) array``;
   within one question, normalised answers whose cosine similarity is ``>= threshold`` are
   joined (single link, i.e. connected components). Default: no embedding, so only 1 and 2.

Class ids are deterministic: within one question the classes are numbered in lexicographic
order of their *representative*, the lexicographically smallest normalised key in the class.
The tie rule of :mod:`credrank.reliability.vote` ("lowest class id") is therefore "the
lexicographically smallest normalised answer". The same :class:`AnswerEquivalence` object must
be used for estimation and for voting; it records its settings in :meth:`config`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from credrank.core.maths import cosine_matrix
from credrank.core.validation import as_matrix, check_nonzero_rows, check_real

#: answers that mean "no answer" once normalised (chapter 35.3: IDK is an abstention). "N/A"
#: is matched on the raw text (:data:`NOT_APPLICABLE`), not here: normalised it is "n", and
#: "n" and "na" are also answers (nitrogen, sodium)
ABSTENTION_PHRASES: frozenset[str] = frozenset({
    "", "idk", "i dont know", "i do not know", "dont know", "do not know", "not known",
    "unknown", "no answer", "cannot answer", "cant answer", "can not answer",
    "unanswerable", "insufficient information", "not enough information",
    "no information", "abstain", "no idea",
})
#: spellings of "not applicable" that are abstentions, compared with the raw answer after
#: NFKC, case folding and deleting whitespace (so "N/A" and "n / a" but not "Na" or "N")
NOT_APPLICABLE: frozenset[str] = frozenset({"n/a", "n.a.", "n.a"})

_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_UNIT_VALUE = {w: i for i, w in enumerate(_UNITS)}
_ARTICLES = frozenset({"a", "an", "the"})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DECIMAL = re.compile(r"(?<=\d)[.,](?=\d)")
_MINUS = re.compile(r"(?<![\w.])[-\u2212](?=\d)")
_DIGIT_SLASH = re.compile(r"(?<=\d)[/\u2044\u2215](?=\d)")
_ATTACHED = re.compile(r"(?<=[^\W_]|[+#])[+#]")
_DASHES = re.compile(r"[-\u2010-\u2015\u2212/\u2044\u2215]")
#: private-use stand-ins for the characters that survive punctuation deletion (category Co
#: is neither P nor S; private-use characters of the input are deleted first)
_KEEP = {".": "\ue000", "-": "\ue001", "/": "\ue002", "+": "\ue003", "#": "\ue004"}
_RESTORE = str.maketrans({v: k for k, v in _KEEP.items()})
#: distinct raw answers whose keys an AnswerEquivalence remembers
_KEY_CACHE_SIZE = 1_000_000


def _drop_invisible(text: str) -> str:
    """Delete format (Cf: zero-width space, soft hyphen, BOM) and private-use characters;
    other control characters become spaces."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in ("Cf", "Co"):
            continue
        out.append(" " if cat == "Cc" else ch)
    return "".join(out)


def _strip_punctuation(text: str) -> str:
    text = _DECIMAL.sub(_KEEP["."], text)
    text = _MINUS.sub(_KEEP["-"], text)
    text = _DIGIT_SLASH.sub(_KEEP["/"], text)
    text = _ATTACHED.sub(lambda m: _KEEP[m.group()], text)
    text = _DASHES.sub(" ", text)
    kept = [ch for ch in text if not unicodedata.category(ch).startswith(("P", "S"))]
    return "".join(kept).translate(_RESTORE)


def _numbers_to_digits(tokens: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _TENS:
            value = _TENS[tok]
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            if nxt in _UNIT_VALUE and 0 < _UNIT_VALUE[nxt] < 10:
                value += _UNIT_VALUE[nxt]
                i += 1
            out.append(str(value))
        elif tok in _UNIT_VALUE:
            out.append(str(_UNIT_VALUE[tok]))
        else:
            out.append(tok)
        i += 1
    return out


def equivalence_normalize(text: str) -> str:
    """Normalised form of an answer string (layer 1 of the equivalence rule, chapter 35.3).

    This is the product's answer-equivalence normalisation; the SQuAD-style normalisation used
    to *score* answers in evaluation is :func:`credrank.evaluate.answers.squad_normalize`.

    NFKC, case folding, invisible characters deleted, thousands separators dropped, a decimal
    comma read as a point, dashes and slashes to spaces, other punctuation and symbols deleted
    (kept: a decimal point between digits, a leading minus, a slash between digits, ``+``/``#``
    at the end of a word), number words 0–99 to digits, articles a/an/the removed (kept when
    they are the whole answer), whitespace collapsed (module docstring, layer 1).
    ``"The SARS-CoV-2 virus"`` → ``"sars cov 2 virus"``; ``"Twenty-One"`` → ``"21"``;
    ``"1,000"`` → ``"1000"``; ``"3,14"`` → ``"3.14"``; ``"−5"`` → ``"-5"``; ``"½"`` →
    ``"1/2"``; ``"C++"`` → ``"c++"``; ``"A"`` → ``"a"``.
    """
    if not isinstance(text, str):
        raise TypeError(f"answer: expected a str, got {type(text).__name__} ({text!r})")
    text = _drop_invisible(unicodedata.normalize("NFKC", text).casefold())
    text = _THOUSANDS.sub("", text)
    text = _strip_punctuation(text)
    tokens = _numbers_to_digits(text.split())
    content = [t for t in tokens if t not in _ARTICLES]
    return " ".join(content or tokens)   # an answer that is only "A" stays "a"


def is_abstention(text: str | None, phrases: Iterable[str] = ABSTENTION_PHRASES) -> bool:
    """True when ``text`` is missing, empty or an IDK phrase after normalisation (chapter 35.3).

    Abstentions never vote and never count as agreement. ``phrases`` are compared after
    :func:`equivalence_normalize` (so ``"I don't know."`` matches ``"i dont know"``).
    """
    if text is None:
        return True
    phrases = phrases if isinstance(phrases, frozenset) else frozenset(phrases)
    return _not_applicable(text) or equivalence_normalize(text) in phrases


def _not_applicable(text: str) -> bool:
    """``text`` is one of the :data:`NOT_APPLICABLE` spellings (raw, case and spaces aside)."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split()) in NOT_APPLICABLE


EmbedFn = Callable[[list[str]], np.ndarray]


class AnswerEquivalence:
    """The declared answer-equivalence rule ``~`` (normalisation, aliases, optional embeddings).

    Args:
        aliases: ``{canonical: [alias, ...]}``; each alias is equivalent to its canonical
            answer. An alias may belong to one canonical answer only.
        embed: optional ``embed(list[str]) -> np.ndarray`` of shape ``(n, d)``; normalised
            answers of one question with cosine similarity ``>= threshold`` are joined.
        threshold: cosine threshold in ``(-1, 1]`` for the embedding clustering.
        abstentions: phrases (normalised) that mean abstention.
    """

    def __init__(
        self,
        aliases: Mapping[str, Iterable[str]] | None = None,
        embed: EmbedFn | None = None,
        threshold: float = 0.9,
        abstentions: Iterable[str] = ABSTENTION_PHRASES,
    ) -> None:
        self.threshold = check_real("threshold", threshold, -1.0, 1.0, open_low=True)
        if embed is not None and not callable(embed):
            raise TypeError(f"embed: expected a callable list[str] -> array, got {embed!r}")
        self.embed = embed
        self.abstentions = frozenset(abstentions)
        self._alias: dict[str, str] = {}
        self._aliases_in = {str(k): sorted(str(a) for a in v) for k, v in (aliases or {}).items()}
        for canonical, names in self._aliases_in.items():
            target = equivalence_normalize(canonical)
            if target in self.abstentions:
                raise ValueError(f"aliases: canonical answer {canonical!r} is an abstention")
            for name in [canonical, *names]:
                key = equivalence_normalize(name)
                previous = self._alias.get(key)
                if previous is not None and previous != target:
                    raise ValueError(
                        f"aliases: {name!r} (normalised {key!r}) is listed under both "
                        f"{previous!r} and {target!r}; expected one canonical answer per alias")
                self._alias[key] = target
        self._cache: dict[str, np.ndarray] = {}
        self._keys: dict[str, str | None] = {}

    # -- single answers ---------------------------------------------------------------
    def key(self, answer: str | None) -> str | None:
        """Normalised, alias-resolved key of ``answer``; ``None`` for an abstention."""
        if answer is None:
            return None
        if answer in self._keys:
            return self._keys[answer]
        norm = equivalence_normalize(answer)
        key = None if norm in self.abstentions or _not_applicable(answer) \
            else self._alias.get(norm, norm)
        if len(self._keys) < _KEY_CACHE_SIZE:
            self._keys[answer] = key
        return key

    def aliases_of(self, answer: str) -> list[str]:
        """Every normalised surface form equivalent to ``answer`` by normalisation/aliases."""
        key = self.key(answer)
        if key is None:
            return []
        return sorted({key} | {k for k, v in self._alias.items() if v == key})

    def equivalent(self, a: str | None, b: str | None) -> bool:
        """``a ~ b``. Abstentions are equivalent to nothing, not even to each other."""
        _labels, classes = self.classes([a, b])
        return bool(classes[0] >= 0 and classes[0] == classes[1])

    # -- one question -----------------------------------------------------------------
    def classes(self, answers: Sequence[str | None]) -> tuple[list[str], np.ndarray]:
        """Answer classes of the answers to one question.

        Returns ``(labels, ids)``: ``labels[c]`` is the representative (lexicographically
        smallest normalised key) of class ``c``, classes numbered in lexicographic order of
        representatives; ``ids[i]`` is the class of ``answers[i]`` or ``-1`` for abstention.
        """
        keys = [self.key(a) for a in answers]
        distinct = sorted({k for k in keys if k is not None})
        rep = {k: k for k in distinct}
        if self.embed is not None and len(distinct) > 1:
            rep = self._cluster(distinct)
        labels = sorted(set(rep.values()))
        index = {lab: i for i, lab in enumerate(labels)}
        ids = np.array([-1 if k is None else index[rep[k]] for k in keys], dtype=np.int64)
        return labels, ids

    def _vectors(self, keys: list[str]) -> np.ndarray:
        missing = [k for k in keys if k not in self._cache]
        if missing:
            assert self.embed is not None
            vecs = as_matrix("embed", self.embed(missing))
            if vecs.shape[0] != len(missing):
                raise ValueError(
                    f"embed: expected an array of shape ({len(missing)}, d) for {len(missing)} "
                    f"answers, got shape {vecs.shape}")
            check_nonzero_rows("embed", vecs, why="cosine needs a direction", labels=missing)
            for k, v in zip(missing, vecs, strict=True):
                self._cache[k] = v
        return np.stack([self._cache[k] for k in keys])

    def _cluster(self, distinct: list[str]) -> dict[str, str]:
        sim = cosine_matrix(self._vectors(distinct))
        parent = list(range(len(distinct)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        rows, cols = np.nonzero(np.triu(sim >= self.threshold - 1e-12, k=1))
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)   # root = smallest index = smallest key
        return {k: distinct[find(i)] for i, k in enumerate(distinct)}

    def config(self) -> dict[str, Any]:
        """JSON-serialisable description of the rule (record it with every estimate)."""
        return {
            "normalisation": "nfkc+casefold+punct+articles+numbers0-99",
            "aliases": self._aliases_in,
            "embedding": None if self.embed is None else getattr(
                self.embed, "__name__", type(self.embed).__name__),
            "threshold": self.threshold if self.embed is not None else None,
        }
