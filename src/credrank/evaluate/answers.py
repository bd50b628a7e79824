"""Answer scoring for generator-in-the-loop benches: CAG exact match and multiple-choice picking.

**CAG exact match** (:func:`cag_exact_match`). CAG (panruotong/CAG, ``metrics.py``) scores a
generation as correct when a gold answer string occurs in it (``exact_str_match``); its
``exact_presence`` first normalises both strings with the SQuAD ``normalize_answer``. We use
that normalised form, stated: both strings are lower-cased, ASCII punctuation is replaced by a
space, the articles *a/an/the* are removed and whitespace is collapsed
(:func:`squad_normalize`); the generation is correct when some normalised,
non-empty gold answer is a **substring** of the normalised generation (a plain substring, as in
CAG: "paris" matches "parisian"). A gold entry that is a list holds aliases of one answer:
any alias suffices. Punctuation becomes a space (CAG deletes it) so that "U.S." and "U S"
compare equal after whitespace collapse; with CAG's deletion "U.S." → "us" would also match
inside unrelated words.

**Multiple-choice picking** (:func:`choose_option`), rule in its docstring.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from credrank.evaluate.metrics import register_measure

#: a generation's answer of the top-document accuracy measure (the realtimeqa bench)
TOP_DOC_ACCURACY = "top-doc accuracy"
#: the generator's chosen option is the right one
GENERATOR_ACCURACY = "generator accuracy"
#: CAG exact match of the generation against the right choice's text
GENERATOR_EM = "generator EM"

register_measure(TOP_DOC_ACCURACY, re.escape(TOP_DOC_ACCURACY), "higher",
                 "share of questions whose top-ranked document contains the right choice and "
                 "no wrong choice (whole tokens after SQuAD normalisation)")
register_measure(GENERATOR_ACCURACY, re.escape(GENERATOR_ACCURACY), "higher",
                 "share of questions whose generator answer, mapped to a choice by "
                 "choose_option, is the right choice")
register_measure(GENERATOR_EM, re.escape(GENERATOR_EM), "higher",
                 "share of questions whose generation contains the right answer (CAG exact "
                 "match after SQuAD normalisation)")

_LETTER = re.compile(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:]?(?:\s|$)")


def squad_normalize(text: str) -> str:
    """SQuAD answer normalisation, used to score answers in evaluation: lower case, drop
    punctuation and the articles a/an/the, collapse whitespace.

    Not the product's answer-equivalence rule (that is
    :func:`credrank.reliability.equivalence.equivalence_normalize`)."""
    text = text.lower()
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _aliases(gold_answers: Sequence[str | Sequence[str]]) -> list[str]:
    out: list[str] = []
    for g in gold_answers:
        if isinstance(g, str):
            out.append(g)
        else:
            out += [str(a) for a in g]
    return out


def cag_exact_match(generation: str, gold_answers: Sequence[str | Sequence[str]]) -> bool:
    """``True`` when a normalised gold answer is a substring of the normalised generation.

    Normalisation: :func:`squad_normalize` (lower case, punctuation → space,
    articles removed, whitespace collapsed). Gold answers that normalise to the empty string
    never match; no gold answers → ``False``."""
    text = squad_normalize(generation or "")
    return any(norm and norm in text
               for norm in (squad_normalize(a) for a in _aliases(gold_answers)))


def contains_whole(text_norm: str, phrase: str) -> bool:
    """``phrase`` (normalised here) occurs in the already normalised ``text_norm`` as whole
    tokens; an empty phrase never occurs."""
    norm = squad_normalize(phrase)
    return bool(norm) and f" {norm} " in f" {text_norm} "


def option_letter(i: int) -> str:
    """The label of choice ``i`` in prompts: ``A``, ``B``, ...."""
    return chr(ord("A") + i)


def choose_option(generation: str, choices: Sequence[str]) -> int | None:
    """The index of the choice a generation picks, or ``None`` when it picks none or several.

    Rule, first that applies:

    1. the generation starts with a choice label: ``(A)``, ``[A]``, ``A)``, ``A.`` or ``A:``
       followed by a space or the end, or is the bare letter ``A`` alone (case-insensitive;
       labels from :func:`option_letter`) → that choice, if it exists;
    2. the choices whose normalised text occurs in the normalised generation as whole tokens
       (:func:`contains_whole`): exactly one → it; several → drop every choice whose
       normalised text is contained in another matching one ("Trump" inside "Donald
       Trump"); if one is left → it, else ``None``;
    3. none occurs → the choice sharing the largest share of its distinct normalised tokens
       with the generation, when that share is ≥ 0.5 and unique; else ``None``.
    """
    if not choices:
        return None
    text = generation or ""
    if m := _LETTER.match(text):
        k = ord(m.group(1).upper()) - ord("A")
        # a bare letter (no bracket or punctuation) counts only as the whole generation:
        # "A new iceberg" is not choice A
        if 0 <= k < len(choices) and (m.group(0).strip() != m[1] or len(text.split()) == 1):
            return k
    norm = squad_normalize(text)
    hits = [i for i, c in enumerate(choices) if contains_whole(norm, c)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        normed = {i: squad_normalize(choices[i]) for i in hits}
        kept = [i for i in hits if not any(j != i and normed[i] != normed[j]
                                           and f" {normed[i]} " in f" {normed[j]} "
                                           for j in hits)]
        return kept[0] if len(kept) == 1 else None
    tokens = set(norm.split())
    shares = []
    for c in choices:
        ct = set(squad_normalize(c).split())
        shares.append(len(ct & tokens) / len(ct) if ct else 0.0)
    best = max(shares)
    if best >= 0.5 and shares.count(best) == 1:
        return shares.index(best)
    return None
