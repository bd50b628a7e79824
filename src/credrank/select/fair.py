"""FA*IR: ranked group fairness with prefix minimums (Zehlike et al. 2017; chapter 35.9).

A top-``k`` ranking is fair at significance ``α`` for a minimum protected proportion ``p``
when every prefix ``i = 1..k`` holds at least ``m(i)`` protected items, where
``m(i) = F⁻¹(α; i, p)`` is the binomial inverse CDF (the definition of
``scipy.stats.binom.ppf``): the smallest ``m`` with ``CDF(m; i, p) ≥ α``, decided on the
binary floats given, with no tolerance (see :func:`mtable` for the ties).

* :func:`mtable` — the unadjusted table.
* :func:`failure_probability` — the exact probability that a ranking whose positions are
  independently protected with probability ``p`` violates the table at some prefix
  ``1..k`` **including position k** (the PyPI package ``fairsearchcore`` stops at ``k − 1``;
  its issue #1). Computed by dynamic programming over the protected count, O(k²).
* :func:`adjust_alpha` — multiple-testing correction. **Rule:** the adjusted ``α_c`` is the
  largest ``α_c ∈ (0, 1)`` whose table has exact failure probability ``≤ α``. Tables change
  only at the finitely many breakpoints ``CDF(m; i, p)``, and the failure probability is
  non-decreasing in ``α_c``, so bisection over the sorted distinct breakpoints is exact.
  ``α_c`` is reported as the right end of the winning table's ``α`` interval (or ``α``
  itself in the edge case where the strictest table already qualifies).
* :func:`fair_rerank` — the greedy FA*IR algorithm with two score-sorted queues.
* :func:`check_ranking` — test a given ranking's protected flags against the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from credrank.core.validation import as_flags, as_vector, check_bool, check_int, check_probability


def check_params(k: Any, p: Any, alpha: Any) -> tuple[int, float, float]:
    """Guards: ``k ≥ 1`` integer, ``0 < p < 1``, ``0 < α < 1`` (clear errors otherwise)."""
    return (check_int("k", k, 1),
            check_probability("p", p, open_low=True, open_high=True),
            check_probability("alpha", alpha, open_low=True, open_high=True))


def _cdf_rows(k: int, p: float) -> list[np.ndarray]:
    """``CDF(m; i, p)`` for ``m = 0..i`` and ``i = 1..k``.

    Built by the recurrence ``CDF(m; i+1) = p·CDF(m−1; i) + (1−p)·CDF(m; i)`` (sums of
    positive terms, no cancellation; O(k²) in ``k`` vector steps), kept monotone and ≤ 1.
    """
    q = 1.0 - p
    row = np.array([q, 1.0])
    rows = [row]
    for i in range(1, k):
        nxt = np.empty(i + 2)
        nxt[0] = q * row[0]
        nxt[1:i + 1] = p * row[:i] + q * row[1:i + 1]
        nxt[i + 1] = 1.0
        row = np.minimum(np.maximum.accumulate(nxt), 1.0)
        rows.append(row)
    return rows


def _table(cdfs: list[np.ndarray], alpha: float) -> np.ndarray:
    # smallest m with CDF(m) >= alpha  ==  number of CDF values strictly below alpha
    return np.array([int(np.searchsorted(c, alpha, side="left")) for c in cdfs], dtype=np.int64)


def mtable(k: int, p: float, alpha: float) -> np.ndarray:
    """``m(i) = min{m : CDF(m; i, p) ≥ α}`` for ``i = 1..k`` (FA*IR; chapter 35.9).

    The definition of ``scipy.stats.binom.ppf(α, i, p)``, computed exactly on the floats
    given; where ``CDF(m; i, p) = α`` holds in decimal the floats decide, and the table can
    differ from scipy's by one: ``p = 0.9, α = 0.1`` gives ``m(1) = 1`` (``1 − 0.9`` is
    ``0.09999999999999998 < 0.1`` in binary; scipy says 0), and ``p = 0.5, α = 0.5`` gives
    ``m(35) = 17`` (scipy's rounding says 18). For ``(k, p, α) = (12, 0.5, 0.1)`` the table is
    ``0,0,0,1,1,1,2,2,3,3,3,4``.
    """
    k, p, alpha = check_params(k, p, alpha)
    return _table(_cdf_rows(k, p), alpha)


def failure_probability(table: np.ndarray, p: float) -> float:
    """Exact ``P(∃ i ≤ k: #protected in the top i < m(i))`` under i.i.d. Bernoulli(``p``) (35.9).

    Dynamic programme over the protected count among rankings that have not failed yet;
    every prefix ``i = 1..k`` is tested, position ``k`` included. For the (12, 0.5, 0.1)
    table the value is ``598/4096 ≈ 0.145996``.
    """
    m = np.asarray(table)
    if m.ndim != 1 or len(m) == 0 or not np.issubdtype(m.dtype, np.integer):
        raise ValueError(f"table: expected a non-empty 1-d integer array, got {table!r}")
    if np.any(m < 0) or np.any(m > np.arange(1, len(m) + 1)):
        raise ValueError("table: expected 0 <= m(i) <= i for every prefix i")
    p = check_probability("p", p, open_low=True, open_high=True)
    k = len(m)
    alive = np.zeros(k + 2)
    alive[0] = 1.0
    for i in range(k):
        nxt = alive * (1.0 - p)
        nxt[1:] += alive[:-1] * p
        nxt[: m[i]] = 0.0
        alive = nxt
    return float(min(1.0, max(0.0, 1.0 - alive.sum())))


@dataclass(frozen=True)
class AlphaAdjustment:
    """Result of :func:`adjust_alpha`.

    Attributes:
        alpha: the requested family-wise significance.
        alpha_c: the adjusted per-prefix significance (largest with failure ≤ α).
        alpha_c_low: the table is the same for every ``α_c`` in ``(alpha_c_low, alpha_c]``.
        mtable: the adjusted table.
        failure_probability: its exact failure probability (≤ α).
    """

    alpha: float
    alpha_c: float
    alpha_c_low: float
    mtable: np.ndarray
    failure_probability: float


def adjust_alpha(k: int, p: float, alpha: float) -> AlphaAdjustment:
    """Largest ``α_c`` whose exact failure probability is ``≤ α`` (FA*IR correction; 35.9).

    Bisection over the sorted distinct breakpoints ``b = CDF(m; i, p) < 1``: the table is
    constant on each interval ``(b_j, b_{j+1}]`` and the failure probability is
    non-decreasing in ``α_c``.
    """
    k, p, alpha = check_params(k, p, alpha)
    cdfs = _cdf_rows(k, p)
    points = np.unique(np.concatenate(cdfs))
    points = points[(points > 0.0) & (points < 1.0)]

    def fail_at(a: float) -> float:
        return failure_probability(_table(cdfs, a), p)

    # α_c = points[0] gives the all-zero table, which never fails: the invariant
    # fail(points[lo]) <= α < fail(points[hi]) holds from the start of the bisection
    lo, hi = 0, len(points) - 1
    if fail_at(points[hi]) <= alpha:
        best = hi
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fail_at(points[mid]) <= alpha:
                lo = mid
            else:
                hi = mid
        best = lo
    alpha_c = float(points[best])
    low = float(points[best - 1]) if best > 0 else 0.0
    # beyond the last breakpoint the table no longer changes: any α_c in (b_M, 1) qualifies
    if best == len(points) - 1 and alpha > alpha_c and fail_at(alpha) <= alpha:
        low, alpha_c = alpha_c, alpha
    table = _table(cdfs, alpha_c)
    return AlphaAdjustment(alpha=alpha, alpha_c=alpha_c, alpha_c_low=low, mtable=table,
                           failure_probability=failure_probability(table, p))


# --------------------------------------------------------------------------------------------
# re-ranking and checking
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FairRanking:
    """Output of :func:`fair_rerank`.

    Attributes:
        order: chosen row indices, position by position (``min(k, N)`` of them).
        mtable: the table enforced (for ``len(order)`` prefixes).
        alpha_used: the per-prefix significance behind ``mtable`` (``α_c`` when adjusted).
        satisfied: every prefix meets its minimum.
        shortfall_at: first 1-based prefix that could not be satisfied (too few protected
            candidates), else ``None``.
    """

    order: np.ndarray
    mtable: np.ndarray
    alpha_used: float
    satisfied: bool
    shortfall_at: int | None


def _table_for(k: int, p: float, alpha: float, adjust: bool) -> tuple[np.ndarray, float]:
    if adjust:
        adj = adjust_alpha(k, p, alpha)
        return adj.mtable, adj.alpha_c
    return mtable(k, p, alpha), alpha


def fair_rerank(scores: np.ndarray, protected: np.ndarray, k: int, p: float, alpha: float,
                *, adjust: bool = True) -> FairRanking:
    """FA*IR greedy top-k (Zehlike et al. 2017, Algorithm 2; chapter 35.9).

    Two queues sorted by score (ties by row order): protected and non-protected. At prefix
    ``i``, if fewer than ``m(i)`` protected items are placed, take the best protected one;
    otherwise take the better head of the two queues (ties to the lower row index). If the
    protected queue is empty when needed, the best non-protected item is placed and the
    ranking is reported ``satisfied=False`` with the first failing prefix (declared policy:
    no error, since too few protected candidates is a property of the pool).
    ``k`` is capped at ``N``; the table is built for the capped length.
    """
    s = as_vector("scores", scores)
    prot = as_flags("protected", protected)
    if prot.shape != s.shape:
        raise ValueError(f"protected: expected {len(s)} flags (one per score), got shape "
                         f"{prot.shape}")
    k, p, alpha = check_params(k, p, alpha)
    adjust = check_bool("adjust", adjust)
    kk = min(k, len(s))
    if kk == 0:
        return FairRanking(order=np.zeros(0, np.int64), mtable=np.zeros(0, np.int64),
                           alpha_used=alpha, satisfied=True, shortfall_at=None)
    table, used = _table_for(kk, p, alpha, adjust)
    by_score = np.argsort(-s, kind="stable")
    queue_p = [int(i) for i in by_score if prot[i]]
    queue_n = [int(i) for i in by_score if not prot[i]]
    qp = qn = 0
    placed_p = 0
    order: list[int] = []
    shortfall: int | None = None
    for i in range(kk):
        need = placed_p < table[i]
        if need and qp < len(queue_p):
            take_p = True
        elif need:
            take_p = False
            shortfall = shortfall or i + 1
        elif qp >= len(queue_p):
            take_p = False
        elif qn >= len(queue_n):
            take_p = True
        else:
            a, b = queue_p[qp], queue_n[qn]
            take_p = (s[a], -a) > (s[b], -b)
        if take_p:
            order.append(queue_p[qp])
            qp += 1
            placed_p += 1
        else:
            order.append(queue_n[qn])
            qn += 1
    return FairRanking(order=np.asarray(order, dtype=np.int64), mtable=table, alpha_used=used,
                       satisfied=shortfall is None, shortfall_at=shortfall)


@dataclass(frozen=True)
class FairnessCheck:
    """Output of :func:`check_ranking`.

    Attributes:
        fair: every prefix holds at least ``m(i)`` protected items.
        first_failure: first failing 1-based prefix, else ``None``.
        protected_counts: protected items in each prefix.
        mtable: the table checked against.
        alpha_used: significance behind the table.
    """

    fair: bool
    first_failure: int | None
    protected_counts: np.ndarray
    mtable: np.ndarray
    alpha_used: float


def check_ranking(protected_in_order: np.ndarray, p: float, alpha: float, *,
                  adjust: bool = True) -> FairnessCheck:
    """Is a ranking FA*IR-fair? Compare prefix protected counts with ``m(i)`` (35.9).

    ``protected_in_order[i]`` flags the item at position ``i + 1``; ``k`` is its length.
    """
    prot = as_flags("protected_in_order", protected_in_order)
    if prot.ndim != 1 or len(prot) == 0:
        raise ValueError(f"protected_in_order: expected a non-empty 1-d array of flags, got "
                         f"shape {prot.shape}")
    k, p, alpha = check_params(len(prot), p, alpha)
    adjust = check_bool("adjust", adjust)
    table, used = _table_for(k, p, alpha, adjust)
    counts = np.cumsum(prot).astype(np.int64)
    bad = np.flatnonzero(counts < table)
    return FairnessCheck(fair=len(bad) == 0,
                         first_failure=int(bad[0]) + 1 if len(bad) else None,
                         protected_counts=counts, mtable=table, alpha_used=used)
