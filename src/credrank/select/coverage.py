"""Coverage selection within a time limit, at any pool size (chapter 35.8; anytime).

:func:`~credrank.select.diversity.best_set_milp` is exact, but its program has one variable per
pair of candidates, ``N(N−1)/2``: 435 at ``N = 30``, 499,500 at ``N = 1,000``, where building
the program alone outlasts any sensible time limit. :func:`best_set_bounded` keeps the exact
optimum where it is affordable and says plainly when it is not:

* ``N <= exact_pool`` (default :data:`EXACT_POOL`): the exact MILP with the time left of
  ``time_limit``; ``optimal`` is true when HiGHS proves it (unchanged from
  :func:`~credrank.select.diversity.best_set_milp`).
* ``N > exact_pool``: an anytime search whose every step keeps the best set found so far —

  1. *greedy*: add the row of largest exact marginal gain of
     ``F(L) = Σu + λ1·ILAD(L) + λ2·coverage(L)`` (``K`` steps), or the top-``K`` utility set
     where that scores higher;
  2. *swaps*: best-improving exchanges of one chosen row for one unchosen row, over the whole
     pool, while ``F`` rises (each round ``O(K·N·(|𝒮| + 1))``, at most
     :data:`MAX_SWAP_ROUNDS` rounds);
  3. *shortlist MILP*: the exact optimum over a shortlist of ``exact_pool`` rows — the current
     set, the best-utility row of every intent, then the rows of largest marginal gain to the
     current set — with the time left;
  4. *swaps* again from the better set, over the whole pool.

  The answer is ``optimal = false`` (no proof over the whole pool), ``method = "anytime"``, and
  ``details`` name the steps that ran and whether the time limit cut the search.

The clock is checked between steps and between swap rounds; the MILP gets the time left as
HiGHS' own limit. Cosines are computed as rows ``K × N`` from the unit vectors, never as the
``N × N`` matrix, so memory stays ``O(exact_pool² + K·N)``. ``clock`` is injectable (a
function returning seconds), so a test can make the limit bite deterministically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from credrank.core.checkpoint import checkpoint
from credrank.core.validation import (
    as_matrix,
    check_int,
    check_nonzero_rows,
    check_positive,
)
from credrank.select.diversity import (
    SetSelection,
    best_set_milp,
    check_membership,
    check_objective,
    cosine_dissimilarity,
    ilad_from_dissimilarity,
    intent_coverage,
    order_by_utility,
)

#: largest pool solved exactly (435 pair variables at 30, 1,225 at 50)
EXACT_POOL = 50
#: bound on the rounds of each swap phase (every round strictly improves ``F``)
MAX_SWAP_ROUNDS = 100
#: the MILP is skipped when less time than this is left (seconds)
MIN_SOLVE_SECONDS = 0.05
#: an exchange must raise ``F`` by more than this to count (no cycling on rounding)
IMPROVEMENT_TOL = 1e-12


class _Problem:
    """``F`` and its pieces over unit vectors (cosine rows on demand) and intents."""

    def __init__(self, u: np.ndarray, k: int, unit: np.ndarray | None,
                 m: np.ndarray | None, lam1: float, lam2: float,
                 solver: Callable[..., SetSelection]):
        self.u, self.k, self.unit, self.m, self.solver = u, k, unit, m, solver
        self.lam1, self.lam2 = lam1, lam2
        self.pair_w = lam1 * 2.0 / (k * (k - 1)) if (k >= 2 and unit is not None) else 0.0
        self.cov_w = lam2 / m.shape[1] if m is not None else 0.0

    def dist_rows(self, idx: np.ndarray) -> np.ndarray:
        """``D[idx, :] = clip(1 − cos, 0, 2)``, zero at each row's own column."""
        n = len(self.u)
        if self.unit is None or self.pair_w == 0.0:
            return np.zeros((len(idx), n))
        sim = np.clip(self.unit[idx] @ self.unit.T, -1.0, 1.0)
        d = np.clip(1.0 - sim, 0.0, 2.0)
        d[np.arange(len(idx)), idx] = 0.0
        return d

    def dissimilarity(self, idx: np.ndarray) -> np.ndarray | None:
        """The ``|idx| × |idx|`` matrix ``1 − cos`` (``None`` without vectors)."""
        return None if self.unit is None else cosine_dissimilarity(self.unit[idx])

    def selection(self, idx: np.ndarray, *, status: str,
                  details: dict[str, object]) -> SetSelection:
        idx = order_by_utility(self.u, idx)
        d = self.dissimilarity(idx)
        ilad_v = None if d is None else ilad_from_dissimilarity(d)
        cov_v = None if self.m is None else intent_coverage(self.m, idx)
        utility = float(self.u[idx].sum())
        obj = utility + self.lam1 * (ilad_v or 0.0) + self.lam2 * (cov_v or 0.0)
        return SetSelection(indices=idx, objective=obj, utility=utility, ilad=ilad_v,
                            coverage=cov_v, optimal=False, method="anytime", status=status,
                            details=details)

    def greedy(self) -> np.ndarray:
        """``K`` steps of the largest exact marginal gain of ``F`` (ties: lowest row)."""
        n = len(self.u)
        chosen: list[int] = []
        covered = np.zeros(0 if self.m is None else self.m.shape[1], dtype=bool)
        spread = np.zeros(n)
        free = np.ones(n, dtype=bool)
        for _ in range(self.k):
            checkpoint("coverage")
            gain = self.u + self.pair_w * spread
            if self.m is not None:
                gain = gain + self.cov_w * (self.m & ~covered).sum(axis=1)
            gain[~free] = -np.inf
            best = int(np.argmax(gain))
            chosen.append(best)
            free[best] = False
            spread = spread + self.dist_rows(np.array([best]))[0]
            if self.m is not None:
                covered = covered | self.m[best]
        return np.asarray(chosen, dtype=np.int64)

    def marginal_gains(self, chosen: np.ndarray) -> np.ndarray:
        """Gain of adding each row to ``chosen`` (``−inf`` for the chosen rows)."""
        gain = self.u + self.pair_w * self.dist_rows(chosen).sum(axis=0)
        if self.m is not None:
            covered = self.m[chosen].any(axis=0)
            gain = gain + self.cov_w * (self.m & ~covered).sum(axis=1)
        gain[chosen] = -np.inf
        return gain

    def best_swap(self, chosen: np.ndarray) -> tuple[float, int, int]:
        """The exchange (position in ``chosen``, row out of it) that raises ``F`` most, and
        by how much: ``Δ = u_b − u_a + w·(spread_b − D(b,a) − spread_a) + c·Δcoverage``."""
        rows = self.dist_rows(chosen)  # K × N
        spread = rows.sum(axis=0)
        inside = np.zeros(len(self.u), dtype=bool)
        inside[chosen] = True
        counts = None if self.m is None else self.m[chosen].sum(axis=0)
        best = (0.0, -1, -1)
        for pos, a in enumerate(chosen):
            delta = self.u - self.u[a] + self.pair_w * (spread - rows[pos] - spread[a])
            if self.m is not None:
                lost = self.m[a] & (counts == 1)  # intents only a covers
                still = (counts - self.m[a]) > 0
                delta = delta + self.cov_w * ((self.m & ~still).sum(axis=1) - lost.sum())
            delta[inside] = -np.inf
            b = int(np.argmax(delta))
            if delta[b] > best[0]:
                best = (float(delta[b]), pos, b)
        return best

    def shortlist(self, chosen: np.ndarray, size: int) -> np.ndarray:
        """``chosen``, the best-utility row of each intent, then the rows of largest marginal
        gain to ``chosen``: ``size`` distinct rows at most (sorted)."""
        picked = list(dict.fromkeys(chosen.tolist()))
        if self.m is not None:
            for s in range(self.m.shape[1]):
                members = np.flatnonzero(self.m[:, s])
                if len(members):
                    picked.append(int(members[np.argmax(self.u[members])]))
        picked = list(dict.fromkeys(picked))[:size]
        gain = self.marginal_gains(np.asarray(picked, dtype=np.int64))
        gain[picked] = -np.inf
        extra = [int(r) for r in np.argsort(-gain, kind="stable")[:size - len(picked)]
                 if np.isfinite(gain[r])]
        return np.sort(np.asarray(picked + extra, dtype=np.int64))

    def objective(self, idx: np.ndarray) -> float:
        return self.selection(idx, status="", details={}).objective


def best_set_bounded(utilities: np.ndarray, k: int, *,
                     vectors: np.ndarray | None = None,
                     membership: np.ndarray | None = None,
                     lambda_ilad: float = 0.0, lambda_coverage: float = 0.0,
                     time_limit: float = 10.0, exact_pool: int = EXACT_POOL,
                     clock: Callable[[], float] = time.perf_counter,
                     started: float | None = None,
                     solver: Callable[..., SetSelection] = best_set_milp) -> SetSelection:
    """``argmax_{|L|=K} Σu + λ1·ILAD + λ2·coverage`` (chapter 35.8) within ``time_limit``
    seconds counted from ``started`` (default: now, by ``clock``): exact up to
    ``exact_pool`` candidates, anytime above (module docstring). ``vectors`` give the
    cosine dissimilarity (needed when ``lambda_ilad > 0``; zero vectors raise).

    The result's ``details`` hold ``pool``, ``exact_pool``, ``time_limit``,
    ``time_limit_hit``, ``steps`` and (anytime) ``shortlist``. ``solver`` is the exact
    solver (:func:`~credrank.select.diversity.best_set_milp`, called with ``time_limit`` =
    the time left).
    """
    u, k, lam1, lam2 = check_objective(utilities, k, lambda_ilad, lambda_coverage)
    n = len(u)
    limit = check_positive("time_limit", time_limit)
    exact_pool = check_int("exact_pool", exact_pool, 1)
    start = clock() if started is None else float(started)
    deadline = start + limit
    unit = None
    if vectors is not None:
        x = as_matrix("vectors", vectors)
        if x.shape[0] != n:
            raise ValueError(f"vectors: expected {n} rows (one per candidate), got {x.shape[0]}")
        check_nonzero_rows("vectors", x, why="cosine similarity is undefined for a zero vector")
        unit = x / np.linalg.norm(x, axis=1)[:, None]
    elif lam1 > 0:
        raise ValueError("vectors: required when lambda_ilad > 0 (the ILAD term needs the "
                         "candidate embeddings)")
    m = None if membership is None else check_membership(membership, n)
    if lam2 > 0 and m is None:
        raise ValueError("membership: required when lambda_coverage > 0 (intent labels or "
                         "clusters)")
    problem = _Problem(u, k, unit, m, lam1, lam2, solver)
    details: dict[str, object] = {"pool": n, "exact_pool": exact_pool, "time_limit": limit}
    if n <= exact_pool:
        return _exact(problem, clock, deadline, details)
    return _anytime(problem, clock, deadline, details, exact_pool)


def _exact(problem: _Problem, clock: Callable[[], float], deadline: float,
           details: dict[str, object]) -> SetSelection:
    """The whole pool through the exact MILP with the time left."""
    everything = np.arange(len(problem.u))
    left = deadline - clock()
    if left <= 0:
        sel = max((problem.selection(idx, status="", details={})
                   for idx in (np.argsort(-problem.u, kind="stable")[:problem.k],
                               problem.greedy())), key=lambda s: s.objective)
        return replace(sel, method="milp",
                       status="time limit reached before the exact solve: best of top-K by "
                              "utility and greedy",
                       details={**details, "time_limit_hit": True, "steps": ["greedy"]})
    sel = problem.solver(problem.u, problem.k, dissimilarity=problem.dissimilarity(everything),
                        membership=problem.m, lambda_ilad=problem.lam1,
                        lambda_coverage=problem.lam2, time_limit=left)
    return replace(sel, details={**details, "time_limit_hit": not sel.optimal,
                                 "steps": ["milp"]})


def _anytime(problem: _Problem, clock: Callable[[], float], deadline: float,
             details: dict[str, object], exact_pool: int) -> SetSelection:
    """Greedy, swaps, the shortlist MILP, swaps: the best set so far at every step."""
    steps: list[str] = []
    top = np.argsort(-problem.u, kind="stable")[:problem.k]
    greedy = problem.greedy()
    best, best_value = max(((idx, problem.objective(idx)) for idx in (greedy, top)),
                           key=lambda pair: pair[1])  # ties: the greedy set
    steps.append("greedy")
    hit = False
    shortlist_size = None

    def swaps(chosen: np.ndarray, value: float) -> tuple[np.ndarray, float, bool]:
        rounds = 0
        while rounds < MAX_SWAP_ROUNDS:
            checkpoint("coverage")  # a cancelled request stops between swap rounds
            if clock() >= deadline:
                steps.append(f"swaps: {rounds} (time limit)")
                return chosen, value, True
            gain, pos, row = problem.best_swap(chosen)
            if gain <= IMPROVEMENT_TOL:
                break
            chosen = chosen.copy()
            chosen[pos] = row
            value = problem.objective(chosen)
            rounds += 1
        steps.append(f"swaps: {rounds}")
        return chosen, value, False

    best, best_value, hit = swaps(best, best_value)
    if not hit:
        left = deadline - clock()
        if left < MIN_SOLVE_SECONDS:
            hit = True
            steps.append("shortlist milp: skipped (time limit)")
        elif exact_pool <= problem.k:
            steps.append("shortlist milp: skipped (exact_pool <= K: nothing to choose)")
        else:
            checkpoint("coverage")
            rows = problem.shortlist(best, exact_pool)
            shortlist_size = len(rows)
            sel = problem.solver(problem.u[rows], problem.k,
                                dissimilarity=problem.dissimilarity(rows),
                                membership=None if problem.m is None else problem.m[rows],
                                lambda_ilad=problem.lam1, lambda_coverage=problem.lam2,
                                time_limit=left)
            steps.append("shortlist milp: " + ("optimal" if sel.optimal else
                                               "stopped (time limit)"))
            hit = hit or not sel.optimal
            found = rows[sel.indices]
            value = problem.objective(found)
            if value > best_value:
                best, best_value = found, value
            if not hit:
                best, best_value, hit = swaps(best, best_value)
    n = len(problem.u)
    status = (f"pool of {n} > exact_pool {exact_pool}: greedy and swaps over all {n}"
              + (f", exact MILP over a shortlist of {shortlist_size}" if shortlist_size else "")
              + ("; time limit reached" if hit else "")
              + "; not proven optimal over the pool")
    return problem.selection(best, status=status,
                             details={**details, "time_limit_hit": hit, "steps": steps,
                                      "shortlist": shortlist_size})
