"""Document scores → CrAM token multipliers (chapter 35.5). Pure: numpy only, no torch.

**Per-document multipliers.** Raw credibility scores ``s_d`` of the documents retrieved for
*one* query (any credrank signal: the prior, the learned reliability, agreement, or — for the
"ideal" reference only — a label) are min-max normalised per query with a floor ``ε``::

    c_d = ε + (1 − ε) · (s_d − s_min) / (s_max − s_min)        (s_max > s_min)

so the most credible passage keeps ``c = 1`` and the least credible one is down-weighted to
``ε``, not erased (:data:`DEFAULT_FLOOR`). CrAM's paper uses the plain min-max, ``ε = 0``,
which removes the least credible passage entirely: ``floor=0`` gives it (35.5: scores
``0.8`` and ``0.1`` map to ``1`` and ``0``). Declared policy for equal scores (zero range,
including a single document): every multiplier is ``1`` — nothing is reweighted — and the
result says so (``zero_range=True``).

**Token spans.** The documents' character spans ``[start, end)`` in the *rendered* prompt are
mapped to token spans through the tokenizer's offset mapping (fast tokenizers only), never by
searching the text: token ``t`` with offsets ``[a_t, b_t)`` belongs to a document span
``[start, end)`` when ``b_t > a_t`` and the two intervals overlap (``a_t < end`` and
``b_t > start``), so a token straddling a boundary (e.g. a BPE token carrying the leading space)
counts as the document's. Zero-width tokens (special tokens, offsets ``(0, 0)``) belong to no
document. A document whose span covers no token is an error naming it.

**Token multipliers.** The per-token vector holds the document's ``c_d`` on its tokens and
``1`` everywhere else (instructions, question, special tokens, and — during generation — every
generated token; :func:`credrank.cram.attention.reweight` extends the vector with ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from credrank.core.validation import check_real

DEFAULT_FLOOR = 0.1
ZERO_RANGE_POLICY = "equal scores (zero range): every multiplier is 1, nothing is reweighted"


class CramInputError(ValueError):
    """Invalid input to the CrAM multiplier preparation (scores, spans, tokenizer)."""


@dataclass(frozen=True)
class DocumentMultipliers:
    """Per-document multipliers ``c_d`` for one query, with the policy that produced them.

    ``zero_range`` is True when all scores were equal (the declared policy then sets every
    multiplier to 1; ``policy`` states it).
    """

    values: tuple[float, ...]
    floor: float
    zero_range: bool
    policy: str


@dataclass(frozen=True)
class PromptMultipliers:
    """Everything :func:`prompt_token_multipliers` derives from one rendered prompt."""

    input_ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...]
    token_spans: tuple[tuple[int, int], ...]
    documents: DocumentMultipliers
    multipliers: np.ndarray  # float64, one per token, in [0, 1]


def scores_to_multipliers(scores: Sequence[float], *, floor: float = DEFAULT_FLOOR
                          ) -> DocumentMultipliers:
    """Min-max normalise one query's document scores to multipliers in ``[ε, 1]`` (chapter
    35.5).

    ``c_d = ε + (1 − ε)(s_d − s_min)/(s_max − s_min)``; equal scores → all ``1`` (reported).
    ``floor = 0`` is the paper's plain min-max (the least credible passage's multiplier is 0);
    ``floor`` must be below 1 (1 would make every multiplier 1: CrAM off, not said).
    Scores must be finite; there must be at least one.
    """
    eps = check_real("floor", floor, 0.0, 1.0, open_high=True, error=CramInputError)
    arr = np.asarray(list(scores), dtype=np.float64) if not isinstance(scores, np.ndarray) \
        else scores.astype(np.float64, copy=False)
    if arr.ndim != 1 or arr.size == 0:
        raise CramInputError(f"scores: expected a non-empty 1-d sequence of numbers, got shape "
                             f"{arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise CramInputError(f"scores: document {bad} has a non-finite score {arr[bad]!r}")
    lo, hi = float(arr.min()), float(arr.max())
    span = hi - lo
    if not span > 0.0 or not math.isfinite(span):
        if not math.isfinite(span):
            raise CramInputError(f"scores: range {lo!r}..{hi!r} overflows")
        return DocumentMultipliers(values=(1.0,) * arr.size, floor=eps, zero_range=True,
                                   policy=ZERO_RANGE_POLICY)
    scaled = np.clip((arr - lo) / span, 0.0, 1.0)
    values = eps + (1.0 - eps) * scaled
    values[arr == hi] = 1.0  # exact top, no rounding below 1
    return DocumentMultipliers(values=tuple(float(v) for v in values), floor=eps,
                               zero_range=False,
                               policy=f"per-query min-max with floor {eps:g}")


def encode_with_offsets(tokenizer: Any, prompt: str, *, add_special_tokens: bool = True
                        ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Token ids and character offsets of ``prompt``.

    ``tokenizer`` is a transformers fast tokenizer (``return_offsets_mapping``) or a raw
    ``tokenizers.Tokenizer`` (``encode(...).offsets``). A tokenizer without offsets (a "slow"
    Python tokenizer) is an error: token spans are never recovered by string searching.
    """
    if not isinstance(prompt, str):
        raise CramInputError(f"prompt: expected a string, got {type(prompt).__name__}")
    hint = ("CrAM needs the tokenizer's offset mapping to place document tokens: use a fast "
            "tokenizer (transformers `use_fast=True`, or a `tokenizers.Tokenizer`)")
    if type(tokenizer).__module__.split(".")[0] == "tokenizers":  # a raw tokenizers.Tokenizer
        enc = tokenizer.encode(prompt, add_special_tokens=add_special_tokens)
        ids, offsets = enc.ids, enc.offsets
    else:
        if getattr(tokenizer, "is_fast", False) is not True:
            raise CramInputError(f"{hint}; got {type(tokenizer).__name__}, which has no offsets")
        try:
            enc = tokenizer(prompt, return_offsets_mapping=True,
                            add_special_tokens=add_special_tokens)
        except NotImplementedError as exc:  # slow tokenizers refuse offsets
            raise CramInputError(f"{hint}; {type(tokenizer).__name__} refused: {exc}") from exc
        ids, offsets = enc["input_ids"], enc.get("offset_mapping")
        if offsets is None:
            raise CramInputError(f"{hint}; {type(tokenizer).__name__} returned none")
    ids_t = tuple(int(i) for i in ids)
    off_t = tuple((int(a), int(b)) for a, b in offsets)
    if len(ids_t) != len(off_t):
        raise CramInputError(f"tokenizer returned {len(ids_t)} ids but {len(off_t)} offsets")
    return ids_t, off_t


def _names(n: int, names: Sequence[str] | None) -> list[str]:
    if names is None:
        return [f"document {i}" for i in range(n)]
    out = [str(x) for x in names]
    if len(out) != n:
        raise CramInputError(f"names: expected {n} (one per span), got {len(out)}")
    return out


def token_spans(offsets: Sequence[tuple[int, int]], char_spans: Sequence[tuple[int, int]],
                *, names: Sequence[str] | None = None, text_length: int | None = None
                ) -> list[tuple[int, int]]:
    """Half-open token spans ``[first, last + 1)`` of each document's character span.

    A token belongs to a span when its (non-empty) offsets overlap it. Character spans must be
    ``0 <= start < end`` (``<= text_length`` when given) and must not overlap each other; a span
    covering no token, or two documents sharing a token, is an error naming the document(s).
    """
    labels = _names(len(char_spans), names)
    spans: list[tuple[int, int]] = []
    for label, span in zip(labels, char_spans, strict=True):
        try:
            start, end = (int(span[0]), int(span[1]))
        except (TypeError, ValueError, IndexError) as exc:
            raise CramInputError(f"{label}: character span {span!r} is not (start, end)") from exc
        if not 0 <= start < end or (text_length is not None and end > text_length):
            limit = f" within a prompt of {text_length} characters" if text_length is not None \
                else ""
            raise CramInputError(f"{label}: character span ({start}, {end}) must satisfy "
                                 f"0 <= start < end{limit}")
        spans.append((start, end))
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    for a, b in pairwise(order):
        if spans[b][0] < spans[a][1]:
            raise CramInputError(f"{labels[a]} and {labels[b]}: character spans {spans[a]} and "
                                 f"{spans[b]} overlap")
    starts = np.asarray([o[0] for o in offsets], dtype=np.int64)
    ends = np.asarray([o[1] for o in offsets], dtype=np.int64)
    real = ends > starts
    out: list[tuple[int, int]] = []
    for label, (start, end) in zip(labels, spans, strict=True):
        hit = np.flatnonzero(real & (starts < end) & (ends > start))
        if hit.size == 0:
            raise CramInputError(f"{label}: character span ({start}, {end}) covers no token of "
                                 "the rendered prompt (was it truncated or rendered elsewhere?)")
        out.append((int(hit[0]), int(hit[-1]) + 1))
    order = sorted(range(len(out)), key=lambda i: out[i])
    for a, b in pairwise(order):
        if out[b][0] < out[a][1]:
            raise CramInputError(f"{labels[a]} and {labels[b]} share token {out[b][0]}: leave a "
                                 "separator between documents in the rendered prompt")
    return out


def token_multipliers(n_tokens: int, spans: Sequence[tuple[int, int]],
                      values: Sequence[float]) -> np.ndarray:
    """The per-token multiplier vector: ``values[d]`` on document ``d``'s tokens, 1 elsewhere."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 0:
        raise CramInputError(f"n_tokens: expected an integer >= 0, got {n_tokens!r}")
    if len(spans) != len(values):
        raise CramInputError(f"got {len(spans)} token spans but {len(values)} multipliers")
    vec = np.ones(n_tokens, dtype=np.float64)
    for d, ((first, last), c) in enumerate(zip(spans, values, strict=True)):
        c = check_real(f"multiplier of document {d}", c, 0.0, 1.0, error=CramInputError)
        if not 0 <= first < last <= n_tokens:
            raise CramInputError(f"document {d}: token span ({first}, {last}) is outside "
                                 f"0..{n_tokens}")
        vec[first:last] = c
    return vec


def prompt_token_multipliers(tokenizer: Any, prompt: str,
                             char_spans: Sequence[tuple[int, int]], scores: Sequence[float], *,
                             floor: float = DEFAULT_FLOOR, names: Sequence[str] | None = None,
                             add_special_tokens: bool = True) -> PromptMultipliers:
    """Tokenise the rendered ``prompt`` and build its per-token multipliers.

    ``char_spans[d]`` is document ``d``'s ``[start, end)`` in ``prompt`` (as produced by the
    prompt renderer) and ``scores[d]`` its raw credibility score for this query. Use the same
    ``add_special_tokens`` as the model call, so the ids here are the ids the model sees.
    """
    if len(char_spans) != len(scores):
        raise CramInputError(f"got {len(char_spans)} document spans but {len(scores)} scores")
    ids, offsets = encode_with_offsets(tokenizer, prompt, add_special_tokens=add_special_tokens)
    spans = token_spans(offsets, char_spans, names=names, text_length=len(prompt))
    docs = scores_to_multipliers(scores, floor=floor)
    vec = token_multipliers(len(ids), spans, docs.values)
    return PromptMultipliers(input_ids=ids, offsets=offsets, token_spans=tuple(spans),
                             documents=docs, multipliers=vec)
