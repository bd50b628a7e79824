"""Credibility tiers for credibility-annotated generation (CAG, chapter 35.4), pure math.

The declared benchmark policy of section 35.4 (timestamps and the unknown-age policy from
section 35.7)::

    tier = min(S_tier, max(1, R − ⌊(T − t)/τ⌋))

* ``R ∈ {1, 2, 3}`` — the **relevance tier**, binned from the query–passage cosine similarity
  with stated cut points ``(c_mid, c_high)`` (:data:`RELEVANCE_CUTS`, :func:`relevance_tier`):
  ``R = 3`` if ``sim ≥ c_high``, ``2`` if ``sim ≥ c_mid``, else ``1``. The chapter gives no
  numbers ("bins retrieval relevance into high/medium/low levels"); the defaults
  ``c_mid = 0.3``, ``c_high = 0.5`` are our choice for L2-normalised sentence embeddings
  (MiniLM scale) and are reported with every annotation.
* ``⌊(T − t)/τ⌋`` — one tier lost per elapsed interval ``τ > 0`` (days) between the evidence
  date ``t`` (:func:`credrank.freshness.dates.freshness_date`) and the evaluation time ``T``
  (:func:`interval_downgrades`). With ``τ`` equal to the freshness half-life, one tier is lost
  per halving of the decay weight ``2^(−(T−t)/τ)``: ``⌊(T−t)/τ⌋ = ⌊−log₂ w⌋``.
* the floor ``max(1, ·)`` — time never pushes a passage below the lowest tier;
* ``S_tier ∈ {1, 2, 3}`` — the **source tier**, a cap: from the source type
  (:data:`SOURCE_TYPE_TIERS`) or from a reliability / credibility score in ``[0, 1]`` binned
  with :data:`SOURCE_SCORE_CUTS` (:func:`source_tier_from_score`). The type table is exactly
  those score cut points applied to the ``current`` prior preset
  (:data:`credrank.signals.prior.CURRENT`): peer_reviewed 0.95 and government 0.90 → 3,
  established_news 0.80 → 2, blog / unknown 0.50, user_generated 0.40, ai_generated 0.30 → 1.

**Unknown age** (no ``observed_at`` / ``verified_at`` / ``published_at``) follows the same
:class:`~credrank.freshness.policy.UnknownAge` policy as the ranking, mapped to a downgrade
through the weight it would get (:func:`undated_downgrade`): ``k = ⌊−log₂ w_u⌋`` with ``w_u``
the policy's weight — the age at which a dated passage would weigh the same. So
``neutral:1`` → no downgrade, ``penalty:0.5`` → one tier, ``penalty:0.25`` → two, ``neutral``
(the median of the dated weights of the ranking's candidate pool, 0.5 when none is dated: the
same ``w_u`` the ranking's freshness stage gives the passage; never the median of the shown
top-k, which would make a passage's tier depend on the context's length) → the downgrade of
that median weight; a weight of 0 gives :data:`MAX_DOWNGRADE` (enough to reach tier 1);
``exclude`` → the passage is left out of the context and reported. A date after ``T`` is no
usable age (a data error, never the best one): it is treated as unknown. Without ``τ`` time
plays no part: no downgrade, nothing excluded.

Sentence granularity: each sentence (:func:`split_sentences`) gets its own ``R`` from its own
similarity to the query (:func:`sentence_similarities`), the document's downgrade and the
document's source tier as the cap.

This is a declared ordinal heuristic, not a calibrated probability (section 35.4).

The CAG arithmetic of section 35.4 (:func:`points`, :func:`relative`): HotpotQA EM 0.509 vs
0.280 is 22.9 points and ≈ 81.785714 % relative; RGB 0.897 vs 0.773 is 12.4 points; ChatGPT's
HotpotQA EM with prompted labels, 0.334 → 0.422, is 8.8 points. (The section's back-solved
baseline ``50.9/1.82 ≈ 27.967033`` is not computed here: the reported 28.0 % is the baseline.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from credrank.core.embedder import Embedder
from credrank.documents.schema import SOURCE_TYPES
from credrank.freshness.decay import check_half_life
from credrank.freshness.policy import UnknownAge

TIERS = (1, 2, 3)
#: tier → level name (CAG's three levels)
LEVELS: dict[int, str] = {3: "high", 2: "medium", 1: "low"}
#: declared similarity cut points ``(c_mid, c_high)`` for the relevance tier (cosine)
RELEVANCE_CUTS: tuple[float, float] = (0.3, 0.5)
#: declared cut points ``(s_mid, s_high)`` for a source score in [0, 1]
SOURCE_SCORE_CUTS: tuple[float, float] = (0.6, 0.85)
#: declared source tier per source type (the score cuts applied to the ``current`` preset)
SOURCE_TYPE_TIERS: dict[str, int] = {
    "peer_reviewed": 3,
    "government": 3,
    "established_news": 2,
    "blog": 1,
    "user_generated": 1,
    "ai_generated": 1,
    "unknown": 1,
}
#: a downgrade of 2 takes any R ≤ 3 to the floor; used for an undated weight of 0
MAX_DOWNGRADE = 2
#: tolerance for ⌊·⌋ of quotients that are integers up to rounding (e.g. 730 days / 365)
_FLOOR_EPS = 1e-9

assert set(SOURCE_TYPE_TIERS) == set(SOURCE_TYPES)


@dataclass(frozen=True)
class Cuts:
    """Two ascending cut points ``(mid, high)``: ``3`` at or above ``high``, ``2`` at or above
    ``mid``, else ``1``."""

    mid: float
    high: float
    name: str = "cuts"

    def __post_init__(self) -> None:
        for which, value in (("mid", self.mid), ("high", self.high)):
            if not isinstance(value, int | float) or isinstance(value, bool) or \
                    not math.isfinite(value):
                raise ValueError(f"{self.name}: expected finite numbers, got {which}={value!r}")
        if not self.mid <= self.high:
            raise ValueError(f"{self.name}: expected mid <= high, got mid={self.mid!r}, "
                             f"high={self.high!r}")

    def within(self, low: float, high: float) -> Cuts:
        """``self`` if both cut points lie in ``[low, high]`` (the range of the values binned:
        a cut outside it puts every value in one tier), else ``ValueError``."""
        if not (low <= self.mid <= high and low <= self.high <= high):
            raise ValueError(f"{self.name}: expected cut points in [{low:g}, {high:g}] (the "
                             f"range of the values binned), got mid={self.mid!r}, "
                             f"high={self.high!r}")
        return self

    @classmethod
    def of(cls, value: Cuts | Sequence[float], name: str = "cuts") -> Cuts:
        """``value`` as :class:`Cuts` (a pair ``(mid, high)`` is accepted)."""
        if isinstance(value, Cuts):
            return value
        try:
            mid, high = value
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected two cut points (mid, high), got {value!r}"
                             ) from None
        return cls(float(mid), float(high), name)

    def bin(self, values: np.ndarray | Sequence[float]) -> np.ndarray:
        """Tiers (int64) of ``values`` (finite, else ``ValueError``)."""
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{self.name}: expected finite values to bin, got "
                             f"{x[~np.isfinite(x)][:3].tolist()}")
        return np.where(x >= self.high, 3, np.where(x >= self.mid, 2, 1)).astype(np.int64)


def relevance_tier(similarity: np.ndarray | Sequence[float],
                   cuts: Cuts | Sequence[float] = RELEVANCE_CUTS) -> np.ndarray:
    """``R``: 3 if ``sim ≥ c_high``, 2 if ``sim ≥ c_mid``, else 1 (vectorised)."""
    return Cuts.of(cuts, "relevance cuts").bin(similarity)


def source_tier_from_score(score: np.ndarray | Sequence[float],
                           cuts: Cuts | Sequence[float] = SOURCE_SCORE_CUTS) -> np.ndarray:
    """``S_tier`` from a reliability / credibility score in ``[0, 1]`` (``ValueError``
    outside)."""
    x = np.asarray(score, dtype=np.float64).reshape(-1)
    if x.size and (not np.all(np.isfinite(x)) or x.min() < 0.0 or x.max() > 1.0):
        raise ValueError(f"source score: expected values in [0, 1], got min {np.nanmin(x)!r}, "
                         f"max {np.nanmax(x)!r}")
    return Cuts.of(cuts, "source cuts").bin(x)


def source_tier_from_type(source_types: np.ndarray | Sequence[object],
                          table: Mapping[str, int] | None = None) -> np.ndarray:
    """``S_tier`` per source type from :data:`SOURCE_TYPE_TIERS` (or ``table``); a missing
    or unlisted type is ``unknown``."""
    table = dict(SOURCE_TYPE_TIERS if table is None else table)
    for name, tier in table.items():
        if tier not in TIERS:
            raise ValueError(f"source tier table: expected a tier in {{1, 2, 3}} for {name!r}, "
                             f"got {tier!r}")
    default = table.get("unknown", 1)
    return np.array([table.get(t, default) if isinstance(t, str) else default
                     for t in source_types], dtype=np.int64)


def interval_downgrades(elapsed_days: np.ndarray | Sequence[float],
                        interval_days: float) -> np.ndarray:
    """The tiers lost to age of chapter 35.4, ``⌊(T − t)/τ⌋`` (int64) per elapsed time in days
    (finite, ``≥ 0``; ``τ > 0``)."""
    tau = check_half_life(interval_days, "interval (half_life)")
    e = np.asarray(elapsed_days, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("elapsed: expected finite times >= 0 in days (a date after T has no "
                         "usable age: apply the unknown-age policy to it, as to undated "
                         "passages)")
    return np.floor(e / tau + _FLOOR_EPS).astype(np.int64)


def weight_downgrade(weight: float) -> int:
    """``⌊−log₂ w⌋`` for a decay weight ``w ∈ [0, 1]`` (:data:`MAX_DOWNGRADE` at 0)."""
    w = float(weight)
    if not (math.isfinite(w) and 0.0 <= w <= 1.0):
        raise ValueError(f"weight: expected a value in [0, 1], got {weight!r}")
    if w == 0.0:
        return MAX_DOWNGRADE
    return max(0, math.floor(-math.log2(w) + _FLOOR_EPS))


def undated_weight(policy: UnknownAge, dated_elapsed_days: np.ndarray | Sequence[float],
                   interval_days: float) -> float | None:
    """``w_u``, the weight of an undated passage under ``policy`` (module docstring); ``None``
    for ``exclude``. ``dated_elapsed_days``: the elapsed times of the dated candidates of the
    ranking's pool (the ``neutral`` median is over their weights ``2^(−e/τ)``)."""
    tau = check_half_life(interval_days, "interval (half_life)")
    e = np.asarray(dated_elapsed_days, dtype=np.float64).reshape(-1)
    return policy.weight(np.exp2(-e / tau))


def undated_downgrade(policy: UnknownAge, dated_elapsed_days: np.ndarray | Sequence[float],
                      interval_days: float) -> int | None:
    """The downgrade ``⌊−log₂ w_u⌋`` of an undated passage under ``policy``
    (:func:`undated_weight`); ``None`` for ``exclude``."""
    weight = undated_weight(policy, dated_elapsed_days, interval_days)
    return None if weight is None else weight_downgrade(weight)


def downgrades(elapsed_days: np.ndarray | Sequence[float], interval_days: float | None,
               policy: UnknownAge, weight: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(k, excluded)`` per passage: ``elapsed_days`` holds ``NaN`` for an unknown age.

    ``weight``: ``w_u`` of the unknown ages when the caller resolved it over the ranking's pool
    (:func:`undated_weight`); default: from the dated passages of ``elapsed_days`` themselves
    (they are the pool). Ignored by ``exclude``. ``interval_days=None``: no downgrade and
    nothing excluded (time plays no part)."""
    e = np.asarray(elapsed_days, dtype=np.float64).reshape(-1)
    k = np.zeros(len(e), dtype=np.int64)
    excluded = np.zeros(len(e), dtype=bool)
    if interval_days is None:
        return k, excluded
    unknown = np.isnan(e)
    k[~unknown] = interval_downgrades(e[~unknown], interval_days)
    if unknown.any():
        w_u = (None if policy.kind == "exclude" else weight if weight is not None
               else undated_weight(policy, e[~unknown], interval_days))
        if w_u is None:
            excluded[unknown] = True
        else:
            k[unknown] = weight_downgrade(w_u)
    return k, excluded


def combine_tiers(relevance: np.ndarray | Sequence[int], source: np.ndarray | Sequence[int],
                  downgrade: np.ndarray | Sequence[int] | int = 0) -> np.ndarray:
    """``tier = min(S_tier, max(1, R − k))`` element-wise (section 35.4)."""
    r = np.asarray(relevance, dtype=np.int64).reshape(-1)
    s = np.broadcast_to(np.asarray(source, dtype=np.int64), r.shape)
    k = np.broadcast_to(np.asarray(downgrade, dtype=np.int64), r.shape)
    for name, arr in (("relevance tier", r), ("source tier", s)):
        if arr.size and (arr.min() < 1 or arr.max() > 3):
            raise ValueError(f"{name}: expected values in {{1, 2, 3}}, got "
                             f"{sorted(set(arr.tolist()))}")
    if k.size and k.min() < 0:
        raise ValueError(f"downgrade: expected integers >= 0, got {k.min()}")
    return np.minimum(s, np.maximum(1, r - k))


def tier(relevance: int, source: int, elapsed_days: float | None = None,
         interval_days: float | None = None, policy: UnknownAge | None = None) -> int | None:
    """One passage's tier of chapter 35.4 (``None`` when ``policy`` excludes an undated
    passage); a scalar convenience over :func:`downgrades` and :func:`combine_tiers`."""
    e = np.array([np.nan if elapsed_days is None else float(elapsed_days)])
    k, excluded = downgrades(e, interval_days, policy or UnknownAge())
    if excluded[0]:
        return None
    return int(combine_tiers([relevance], [source], k)[0])


# -- sentences ------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")
#: words ending in a full stop that end no sentence (compared case-insensitively): a split
#: after them is undone (``Dr. Smith``, ``e.g. aspirin``, ``U.S. data``)
ABBREVIATIONS = frozenset({
    "dr.", "mr.", "mrs.", "ms.", "prof.", "st.", "jr.", "sr.", "vs.", "cf.", "e.g.", "i.e.",
    "al.", "fig.", "no.", "approx.", "u.s.", "u.k.", "u.n.", "e.u.",
})


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split at line breaks, after ``.``, ``!`` or ``?`` followed by
    white space, and after the full-width ``。``, ``！`` and ``？`` (CJK text puts no space
    after them); not after an abbreviation of :data:`ABBREVIATIONS` (``Dr.``, ``e.g.``,
    ``U.S.``). Inner white space collapsed, empty pieces dropped; ``[]`` for blank text. A
    declared heuristic: a sentence that ends with such an abbreviation joins the next one."""
    out: list[str] = []
    for line in str(text or "").splitlines():
        merged: list[str] = []
        for piece in _SENTENCE_END.split(line):
            sentence = " ".join(piece.split())
            if not sentence:
                continue
            if merged and merged[-1].rsplit(" ", 1)[-1].lower() in ABBREVIATIONS:
                merged[-1] = f"{merged[-1]} {sentence}"
            else:
                merged.append(sentence)
        out += merged
    return out


def sentence_similarities(sentences: Sequence[str], query_vector: np.ndarray,
                          embedder: Embedder) -> np.ndarray:
    """Cosine of each sentence with the query: ``embed(sentences) · q`` (the embedder's
    vectors are L2-normalised; ``q`` is normalised here). One ``embed`` call for all."""
    if not sentences:
        return np.zeros(0)
    q = np.asarray(query_vector, dtype=np.float64).reshape(-1)
    norm = float(np.linalg.norm(q))
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError("query_vector: expected a finite, non-zero vector")
    vectors = np.asarray(embedder.embed(list(sentences)), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[1] != q.shape[0]:
        raise ValueError(f"embedder: expected vectors of dimension {q.shape[0]}, got shape "
                         f"{vectors.shape}")
    sims = vectors @ (q / norm)
    return np.clip(np.nan_to_num(sims, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0)


# -- CAG arithmetic (section 35.4) ----------------------------------------------------------

def points(a: float, b: float) -> float:
    """Absolute gain in percentage points, ``100 · (a − b)`` (chapter 35.4: 0.509 vs 0.280 →
    22.9)."""
    a, b = _finite("a", a), _finite("b", b)
    return 100.0 * (a - b)


def relative(a: float, b: float) -> float:
    """Relative gain ``(a − b)/b`` (chapter 35.4: 0.509 vs 0.280 → 0.81785714…).

    Declared policy for ``b = 0``: ``ValueError`` (a relative gain over a zero baseline is
    undefined; report :func:`points` instead) — never ``inf`` or ``NaN``."""
    a, b = _finite("a", a), _finite("b", b)
    if b == 0.0:
        raise ValueError("relative: the baseline b is 0, so a relative gain is undefined; "
                         "report the absolute gain in points instead")
    return (a - b) / b


def _finite(name: str, value: float) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return x
