"""Pluralism measures and set selection (chapter 35.8).

* ``ILAD(L) = 2/(K(K−1)) Σ_{i<j} (1 − cos(e_i, e_j))`` for ``K = |L| ≥ 2`` and nonzero
  embeddings. **Policy for K < 2:** the term is omitted, i.e. ``ilad`` returns ``0.0``
  (there is no pair to average). **Zero vectors:** cosine is undefined, so a ``ValueError``
  names the row.
* ``coverage(L) = |∪_{d∈L} S_d| / |𝒮|`` over a declared, non-empty intent set ``𝒮`` given as
  a boolean membership matrix ``M[d, s] = (s ∈ S_d)`` (``S_d ⊆ 𝒮`` holds by construction).
* Combined objective for a fixed ``K``: ``F(L) = Σ_{d∈L} u(d) + λ1·ILAD(L) + λ2·coverage(L)``.
  :func:`best_set_milp` finds its exact maximum with a mixed-integer program solved by HiGHS
  (``scipy.optimize.milp``); :func:`best_set_exhaustive` enumerates every ``K``-set and is
  the test oracle only.
* MMR (Carbonell & Goldstein 1998) with ``diversity ∈ [0, 1]`` (1 = diverse), the Qdrant /
  pyversity convention: ``score(d) = (1 − diversity)·u(d) − diversity·max_{s∈sel} cos(d, s)``.

A chosen set is returned ordered by utility (descending; ties keep the input row order):
for non-negative, non-increasing position discounts that order maximises the separable
position-weighted utility of the set (chapter 35.8).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from credrank.core.maths import cosine_matrix
from credrank.core.validation import (
    as_flags,
    as_matrix,
    as_vector,
    check_int,
    check_nonnegative,
    check_nonzero_rows,
    check_positive,
    check_probability,
)

#: largest number of K-sets the exhaustive oracle agrees to enumerate
MAX_EXHAUSTIVE_SETS = 2_000_000


# --------------------------------------------------------------------------------------------
# measures
# --------------------------------------------------------------------------------------------
def cosine_similarity(vectors: np.ndarray) -> np.ndarray:
    """``cos(e_i, e_j) = e_i·e_j / (‖e_i‖ ‖e_j‖)`` for every pair (chapter 35.8), in [−1, 1].

    Raises ``ValueError`` for a zero (or non-finite) embedding: cosine is undefined there.
    The zero rows are checked here, then :func:`credrank.core.maths.cosine_matrix` computes
    the matrix (whose zero-row policy therefore never applies).
    """
    x = as_matrix("vectors", vectors)
    check_nonzero_rows("vectors", x, why="cosine similarity is undefined for a zero vector")
    return cosine_matrix(x)


def dissimilarity_from_similarity(similarity: np.ndarray) -> np.ndarray:
    """``D[i, j] = 1 − cos(e_i, e_j)`` clipped to [0, 2], zero diagonal (chapter 35.8), from a
    precomputed cosine matrix."""
    d = np.clip(1.0 - np.asarray(similarity, dtype=np.float64), 0.0, 2.0)
    np.fill_diagonal(d, 0.0)
    return d


def cosine_dissimilarity(vectors: np.ndarray) -> np.ndarray:
    """``D[i, j] = 1 − cos(e_i, e_j)`` ∈ [0, 2] (chapter 35.8); zero vectors raise ValueError."""
    return dissimilarity_from_similarity(cosine_similarity(vectors))


def check_dissimilarity(dissimilarity: np.ndarray, n: int | None = None) -> np.ndarray:
    """Validate a precomputed dissimilarity matrix: square, symmetric, finite, entries in [0, 2]."""
    d = as_matrix("dissimilarity", dissimilarity)
    if d.shape[0] != d.shape[1]:
        raise ValueError(f"dissimilarity: expected a square matrix, got shape {d.shape}")
    if n is not None and d.shape[0] != n:
        raise ValueError(f"dissimilarity: expected shape ({n}, {n}) (one row per candidate), "
                         f"got {d.shape}")
    if d.size and (d.min() < -1e-12 or d.max() > 2.0 + 1e-12):
        raise ValueError(f"dissimilarity: entries must lie in [0, 2] (1 − cosine); got values in "
                         f"[{d.min():.6g}, {d.max():.6g}]")
    if not np.allclose(d, d.T, atol=1e-12, rtol=0.0):
        raise ValueError("dissimilarity: expected a symmetric matrix")
    return d


def ilad_from_dissimilarity(dissimilarity: np.ndarray, indices: np.ndarray | None = None) -> float:
    """``ILAD(L) = 2/(K(K−1)) Σ_{i<j∈L} D[i, j]`` (chapter 35.8); ``0.0`` when ``K < 2`` (omitted).

    ``indices`` selects the list ``L`` (default: every row of ``dissimilarity``).
    """
    d = check_dissimilarity(dissimilarity)
    idx = np.arange(d.shape[0]) if indices is None else np.asarray(indices, dtype=np.int64)
    k = len(idx)
    if k < 2:
        return 0.0
    sub = d[np.ix_(idx, idx)]
    return float(sub[np.triu_indices(k, 1)].sum() * 2.0 / (k * (k - 1)))


def ilad(vectors: np.ndarray) -> float:
    """``ILAD(L) = 2/(K(K−1)) Σ_{i<j} (1 − cos(e_i, e_j))`` over the rows of ``vectors`` (35.8).

    Policy: ``K < 2`` returns ``0.0`` (the term is omitted); a zero vector raises ``ValueError``.
    """
    x = as_matrix("vectors", vectors)
    if x.shape[0] < 2:
        return 0.0
    return ilad_from_dissimilarity(cosine_dissimilarity(x))


def check_membership(membership: np.ndarray, n: int | None = None) -> np.ndarray:
    """Validate an intent membership matrix ``M[d, s] = (s ∈ S_d)``: boolean, ≥ 1 intent column."""
    m = as_flags("membership", membership)
    if m.ndim != 2:
        raise ValueError(f"membership: expected a 2-d (candidates × intents) matrix, "
                         f"got shape {m.shape}")
    if m.shape[1] == 0:
        raise ValueError("membership: the intent set is empty; coverage needs a declared, "
                         "non-empty intent set")
    if n is not None and m.shape[0] != n:
        raise ValueError(f"membership: expected {n} rows (one per candidate), got {m.shape[0]}")
    return m


def intent_coverage(membership: np.ndarray, indices: np.ndarray | None = None) -> float:
    """``coverage(L) = |∪_{d∈L} S_d| / |𝒮|`` ∈ [0, 1] (chapter 35.8).

    ``membership[d, s]`` is true when intent ``s`` belongs to ``S_d``; its columns are the
    declared intent set ``𝒮`` (non-empty, checked). The empty list covers nothing (0.0).
    """
    m = check_membership(membership)
    idx = np.arange(m.shape[0]) if indices is None else np.asarray(indices, dtype=np.int64)
    if len(idx) == 0:
        return 0.0
    return float(m[idx].any(axis=0).sum() / m.shape[1])


def set_objective(utilities: np.ndarray, indices: np.ndarray, *,
                  dissimilarity: np.ndarray | None = None,
                  membership: np.ndarray | None = None,
                  lambda_ilad: float = 0.0, lambda_coverage: float = 0.0) -> float:
    """``F(L) = Σ_{d∈L} u(d) + λ1·ILAD(L) + λ2·coverage(L)`` (chapter 35.8).

    A term whose weight is 0 needs no data; a positive weight needs its matrix.
    """
    u = as_vector("utilities", utilities)
    idx = np.asarray(indices, dtype=np.int64)
    lam1 = check_nonnegative("lambda_ilad", lambda_ilad)
    lam2 = check_nonnegative("lambda_coverage", lambda_coverage)
    value = float(u[idx].sum())
    if lam1 > 0:
        if dissimilarity is None:
            raise ValueError("dissimilarity: required when lambda_ilad > 0")
        value += lam1 * ilad_from_dissimilarity(dissimilarity, idx)
    if lam2 > 0:
        if membership is None:
            raise ValueError("membership: required when lambda_coverage > 0")
        value += lam2 * intent_coverage(membership, idx)
    return value


# --------------------------------------------------------------------------------------------
# exact set selection
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetSelection:
    """A chosen ``K``-set and its objective terms.

    Attributes:
        indices: chosen rows, ordered by utility (descending; ties by row order).
        objective: ``Σu + λ1·ILAD + λ2·coverage`` recomputed from the set.
        utility: ``Σ_{d∈L} u(d)``.
        ilad: ILAD of the set (``None`` when no dissimilarity was given).
        coverage: coverage of the set (``None`` when no intent membership was given).
        optimal: the solver proved optimality (always true for the exhaustive oracle).
        method: ``"milp"`` or ``"exhaustive"``.
        status: the solver's message.
        n_optimal: number of optimal sets found (exhaustive oracle only; ties within 1e-9).
        details: what a bounded search adds to the summary (pool, shortlist, steps, time
            limit hit; :func:`credrank.select.coverage.best_set_bounded`).
    """

    indices: np.ndarray
    objective: float
    utility: float
    ilad: float | None
    coverage: float | None
    optimal: bool
    method: str
    status: str
    n_optimal: int | None = None
    details: Mapping[str, object] = field(default_factory=dict)

    def as_info(self) -> dict[str, object]:
        """JSON-serialisable summary."""
        return {"objective": self.objective, "utility": self.utility, "ilad": self.ilad,
                "coverage": self.coverage, "optimal": self.optimal, "method": self.method,
                "status": self.status, **self.details}


def order_by_utility(utilities: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``indices`` sorted by descending utility, ties by ascending row index."""
    idx = np.sort(np.asarray(indices, dtype=np.int64))
    u = np.asarray(utilities, dtype=np.float64)
    return idx[np.argsort(-u[idx], kind="stable")]


def check_objective(utilities: np.ndarray, k: int, lambda_ilad: float,
                    lambda_coverage: float) -> tuple[np.ndarray, int, float, float]:
    """``(u, k, λ₁, λ₂)`` of the set objective, checked: ``k`` in ``[1, len(u)]`` and both
    weights ``>= 0`` (the exact and the anytime coverage selections share it)."""
    u = as_vector("utilities", utilities)
    n = len(u)
    k = check_int("k", k, 1)
    if k > n:
        raise ValueError(f"k: expected at most the number of candidates ({n}), got {k}")
    return (u, k, check_nonnegative("lambda_ilad", lambda_ilad),
            check_nonnegative("lambda_coverage", lambda_coverage))


def _prepare(utilities: np.ndarray, k: int, dissimilarity: np.ndarray | None,
             membership: np.ndarray | None, lambda_ilad: float, lambda_coverage: float,
             ) -> tuple[np.ndarray, int, np.ndarray | None, np.ndarray | None, float, float]:
    u, k, lam1, lam2 = check_objective(utilities, k, lambda_ilad, lambda_coverage)
    n = len(u)
    d = None if dissimilarity is None else check_dissimilarity(dissimilarity, n)
    m = None if membership is None else check_membership(membership, n)
    if lam1 > 0 and d is None:
        raise ValueError("dissimilarity: required when lambda_ilad > 0 (pass vectors or a "
                         "precomputed 1 − cosine matrix)")
    if lam2 > 0 and m is None:
        raise ValueError("membership: required when lambda_coverage > 0 (intent labels or "
                         "clusters)")
    return u, k, d, m, lam1, lam2


def _selection(u: np.ndarray, idx: np.ndarray, d: np.ndarray | None, m: np.ndarray | None,
               lam1: float, lam2: float, *, optimal: bool, method: str, status: str,
               n_optimal: int | None = None) -> SetSelection:
    idx = order_by_utility(u, idx)
    ilad_v = None if d is None else ilad_from_dissimilarity(d, idx)
    cov_v = None if m is None else intent_coverage(m, idx)
    obj = float(u[idx].sum()) + lam1 * (ilad_v or 0.0) + lam2 * (cov_v or 0.0)
    return SetSelection(indices=idx, objective=obj, utility=float(u[idx].sum()), ilad=ilad_v,
                        coverage=cov_v, optimal=optimal, method=method, status=status,
                        n_optimal=n_optimal)


def best_set_milp(utilities: np.ndarray, k: int, *,
                  dissimilarity: np.ndarray | None = None,
                  membership: np.ndarray | None = None,
                  lambda_ilad: float = 0.0, lambda_coverage: float = 0.0,
                  time_limit: float | None = 30.0) -> SetSelection:
    """Exact ``argmax_{|L|=K} Σu + λ1·ILAD + λ2·coverage`` (chapter 35.8) as a MILP (HiGHS).

    Variables: ``x_d ∈ {0,1}`` (chosen), ``y_ij ∈ [0,1]`` for ``i<j`` (both chosen) and
    ``z_s ∈ [0,1]`` (intent covered). Maximise
    ``Σ u_d x_d + λ1·2/(K(K−1))·Σ D_ij y_ij + λ2/|𝒮|·Σ z_s`` subject to ``Σ x = K``,
    ``y_ij ≤ x_i``, ``y_ij ≤ x_j``, ``Σ_{j≠i} y_ij = (K−1)·x_i`` (the product linearisation
    strengthened by the fixed cardinality; it forces ``y_ij = x_i x_j`` at integral ``x``) and
    ``z_s ≤ Σ_{d: s∈S_d} x_d``. The gap tolerance is 0, so the reported set is optimal when
    ``optimal`` is true; if ``time_limit`` (seconds) stops the search first, the best set
    incumbent, the top-K utility set or a greedy marginal-gain set — whichever scores
    highest — is returned with ``optimal=False`` and the status naming it.
    Ties between optimal sets are broken by the solver (deterministic for a given input).
    """
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp
    u, k, d, m, lam1, lam2 = _prepare(utilities, k, dissimilarity, membership,
                                      lambda_ilad, lambda_coverage)
    n = len(u)
    use_pairs = lam1 > 0 and k >= 2
    use_cover = lam2 > 0
    if not use_pairs and not use_cover:
        top = np.argsort(-u, kind="stable")[:k]
        return _selection(u, top, d, m, lam1, lam2, optimal=True, method="milp",
                          status="no diversity term: top-K by utility")
    pi, pj = np.triu_indices(n, 1) if use_pairs else (np.zeros(0, int), np.zeros(0, int))
    n_pairs = len(pi)
    # _prepare: a positive weight has its matrix (λ1 > 0: d, λ2 > 0: m); the `is not None`
    # tests below only tell the type checker so
    n_int = m.shape[1] if m is not None and use_cover else 0
    n_var = n + n_pairs + n_int
    oy, oz = n, n + n_pairs

    c = np.zeros(n_var)
    c[:n] = -u
    if use_pairs and d is not None:
        c[oy:oz] = -lam1 * 2.0 / (k * (k - 1)) * d[pi, pj]
    if use_cover:
        c[oz:] = -lam2 / n_int

    blocks: list[sparse.coo_matrix] = []
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    # Σ x = K
    blocks.append(sparse.coo_matrix((np.ones(n), (np.zeros(n, int), np.arange(n))),
                                    shape=(1, n_var)))
    lo.append(np.array([k]))
    hi.append(np.array([k]))
    if use_pairs:
        rows = np.arange(n_pairs)
        ycols = oy + rows
        for ends in (pi, pj):  # y_ij − x_end ≤ 0
            data = np.concatenate([np.ones(n_pairs), -np.ones(n_pairs)])
            blocks.append(sparse.coo_matrix(
                (data, (np.concatenate([rows, rows]), np.concatenate([ycols, ends]))),
                shape=(n_pairs, n_var)))
            lo.append(np.full(n_pairs, -np.inf))
            hi.append(np.zeros(n_pairs))
        # Σ_{j≠i} y_ij − (K−1) x_i = 0
        r = np.concatenate([pi, pj, np.arange(n)])
        cc = np.concatenate([ycols, ycols, np.arange(n)])
        data = np.concatenate([np.ones(2 * n_pairs), np.full(n, -(k - 1.0))])
        blocks.append(sparse.coo_matrix((data, (r, cc)), shape=(n, n_var)))
        lo.append(np.zeros(n))
        hi.append(np.zeros(n))
    if use_cover and m is not None:
        dd, ss = np.nonzero(m)
        r = np.concatenate([np.arange(n_int), ss])
        cc = np.concatenate([oz + np.arange(n_int), dd])
        data = np.concatenate([np.ones(n_int), -np.ones(len(dd))])
        blocks.append(sparse.coo_matrix((data, (r, cc)), shape=(n_int, n_var)))
        lo.append(np.full(n_int, -np.inf))
        hi.append(np.zeros(n_int))
    a = sparse.vstack(blocks).tocsr()
    integrality = np.zeros(n_var)
    integrality[:n] = 1
    options: dict[str, float] = {"mip_rel_gap": 0.0}
    if time_limit is not None:
        options["time_limit"] = check_positive("time_limit", time_limit)
    res = milp(c, constraints=LinearConstraint(a, np.concatenate(lo), np.concatenate(hi)),
               integrality=integrality, bounds=Bounds(0.0, 1.0), options=options)
    chosen = None if res.x is None else np.flatnonzero(res.x[:n] > 0.5)
    if chosen is not None and len(chosen) != k:
        raise RuntimeError(f"coverage MILP: solution selects {len(chosen)} items, expected {k} "
                           f"({res.message})")
    if res.status == 0 and chosen is not None:
        return _selection(u, chosen, d, m, lam1, lam2, optimal=True, method="milp",
                          status=str(res.message))
    if res.status != 1:
        raise RuntimeError(f"coverage MILP: HiGHS returned no solution ({res.message})")
    # time or node limit: keep the best of the incumbent, the top-K set and the greedy set
    options_sets = {"top-K by utility": np.argsort(-u, kind="stable")[:k],
                    "greedy": _greedy_set(u, k, d, m, lam1, lam2)}
    if chosen is not None:
        options_sets["solver incumbent"] = chosen
    picks = {name: _selection(u, idx, d, m, lam1, lam2, optimal=False, method="milp",
                              status=f"{res.message}; best of {', '.join(options_sets)}: {name}")
             for name, idx in options_sets.items()}
    return max(picks.values(), key=lambda sel: sel.objective)


def _greedy_set(u: np.ndarray, k: int, d: np.ndarray | None, m: np.ndarray | None,
                lam1: float, lam2: float) -> np.ndarray:
    """Greedy fallback: add the item with the largest exact marginal gain of the K-objective."""
    n = len(u)
    pair_w = lam1 * 2.0 / (k * (k - 1)) if (k >= 2 and d is not None) else 0.0
    cov_w = lam2 / m.shape[1] if m is not None else 0.0
    chosen: list[int] = []
    covered = np.zeros(0 if m is None else m.shape[1], dtype=bool)
    spread = np.zeros(n)
    free = np.ones(n, dtype=bool)
    for _ in range(k):
        gain = u + pair_w * spread
        if m is not None:
            gain = gain + cov_w * (m & ~covered).sum(axis=1)
        gain[~free] = -np.inf
        best = int(np.argmax(gain))
        chosen.append(best)
        free[best] = False
        if d is not None:
            spread = spread + d[best]
        if m is not None:
            covered = covered | m[best]
    return np.asarray(chosen, dtype=np.int64)


def _enumerate(u: np.ndarray, k: int, d: np.ndarray | None, m: np.ndarray | None,
               lam1: float, lam2: float) -> tuple[np.ndarray, np.ndarray]:
    n = len(u)
    total = math.comb(n, k)
    if total > MAX_EXHAUSTIVE_SETS:
        raise ValueError(f"k: C({n}, {k}) = {total} sets exceed the exhaustive oracle's limit "
                         f"of {MAX_EXHAUSTIVE_SETS}; use best_set_milp")
    combos = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), k)),
                         dtype=np.int64, count=total * k).reshape(total, k)
    values = u[combos].sum(axis=1)
    # _prepare: a positive weight has its matrix (λ1 > 0: d, λ2 > 0: m)
    if lam1 > 0 and k >= 2 and d is not None:
        ii, jj = np.triu_indices(k, 1)
        values = values + lam1 * 2.0 / (k * (k - 1)) * d[combos[:, ii], combos[:, jj]].sum(1)
    if lam2 > 0 and m is not None:
        values = values + lam2 * m[combos].any(axis=1).sum(axis=1) / m.shape[1]
    return combos, values


def best_set_exhaustive(utilities: np.ndarray, k: int, *,
                        dissimilarity: np.ndarray | None = None,
                        membership: np.ndarray | None = None,
                        lambda_ilad: float = 0.0, lambda_coverage: float = 0.0,
                        tie_tol: float = 1e-9) -> SetSelection:
    """Test oracle: evaluate ``Σu + λ1·ILAD + λ2·coverage`` (35.8) on every ``K``-set.

    Returns the lexicographically first optimal set; ``n_optimal`` counts the sets within
    ``tie_tol`` of the maximum. Refuses more than ``MAX_EXHAUSTIVE_SETS`` sets.
    """
    u, k, d, m, lam1, lam2 = _prepare(utilities, k, dissimilarity, membership,
                                      lambda_ilad, lambda_coverage)
    combos, values = _enumerate(u, k, d, m, lam1, lam2)
    winners = np.flatnonzero(values >= values.max() - tie_tol)
    return _selection(u, combos[winners[0]], d, m, lam1, lam2, optimal=True,
                      method="exhaustive", status=f"enumerated {len(combos)} sets",
                      n_optimal=len(winners))


def exhaustive_optimal_sets(utilities: np.ndarray, k: int, *,
                            dissimilarity: np.ndarray | None = None,
                            membership: np.ndarray | None = None,
                            lambda_ilad: float = 0.0, lambda_coverage: float = 0.0,
                            tie_tol: float = 1e-9) -> list[np.ndarray]:
    """Every ``K``-set within ``tie_tol`` of the optimum of the 35.8 objective (sorted rows)."""
    u, k, d, m, lam1, lam2 = _prepare(utilities, k, dissimilarity, membership,
                                      lambda_ilad, lambda_coverage)
    combos, values = _enumerate(u, k, d, m, lam1, lam2)
    return [combos[i] for i in np.flatnonzero(values >= values.max() - tie_tol)]


# --------------------------------------------------------------------------------------------
# MMR
# --------------------------------------------------------------------------------------------
def mmr(utilities: np.ndarray, k: int, diversity: float, *,
        vectors: np.ndarray | None = None,
        similarity: np.ndarray | None = None) -> np.ndarray:
    """Maximal marginal relevance (Carbonell & Goldstein 1998; chapter 35.8), greedy.

    At each step pick ``argmax_d (1 − diversity)·u(d) − diversity·max_{s∈sel} cos(d, s)``
    among unpicked rows; the max over an empty selection is 0. ``diversity ∈ [0, 1]``: 0 =
    pure utility order, 1 = pure novelty. Ties go to the higher utility, then the lower row
    index, so the first pick is the highest utility at every ``diversity`` (at 1 every first
    score is 0). The scores compare ``u`` with cosines in ``[−1, 1]``: pass utilities on that
    scale (the ``mmr`` stage divides them by the pool's largest by default). Returns the rows
    in pick order (``min(k, N)`` of them).
    Pass ``vectors`` (cosine is computed; zero vectors raise) or a precomputed ``similarity``.
    """
    return mmr_picks(utilities, k, diversity, vectors=vectors, similarity=similarity)[0]


def mmr_picks(utilities: np.ndarray, k: int, diversity: float, *,
              vectors: np.ndarray | None = None,
              similarity: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mmr`'s picks and the cosine rows of the picks, ``rows[t, d] = cos(pick_t, d)``
    (a ``K × N`` matrix, whence the gains and the ILAD of the set).

    With ``vectors`` the ``N × N`` matrix is never built: each step computes one row,
    ``cos(best, ·) = clip(ê · ê_best)`` over the unit vectors, ``O(K·N·dim)`` in all instead
    of ``O(N²·dim)``; the picks equal those of the full matrix (same formula and tie rule).
    """
    u = as_vector("utilities", utilities)
    k = check_int("k", k, 1)
    div = check_probability("diversity", diversity)
    n = len(u)
    if similarity is None:
        if vectors is None:
            raise ValueError("mmr: pass vectors (embeddings) or a precomputed similarity matrix")
        x = as_matrix("vectors", vectors)
        if x.shape[0] != n:
            raise ValueError(f"vectors: expected {n} rows (one per utility), got {x.shape[0]}")
        check_nonzero_rows("vectors", x, why="cosine similarity is undefined for a zero vector")
        unit = x / np.linalg.norm(x, axis=1)[:, None]

        def row(i: int) -> np.ndarray:
            return np.clip(unit @ unit[i], -1.0, 1.0)
    else:
        sim = as_matrix("similarity", similarity)
        if sim.shape != (n, n):
            raise ValueError(f"similarity: expected shape ({n}, {n}), got {sim.shape}")

        def row(i: int) -> np.ndarray:
            return sim[i]
    picked: list[int] = []
    rows: list[np.ndarray] = []
    available = np.ones(n, dtype=bool)
    max_sim = np.zeros(n)
    for _ in range(min(k, n)):
        score = (1.0 - div) * u - div * max_sim
        score[~available] = -np.inf
        tied = np.flatnonzero(score == score.max())
        best = int(tied[np.argmax(u[tied])])  # the higher utility, then the lower row
        picked.append(best)
        available[best] = False
        rows.append(row(best))
        max_sim = rows[-1] if len(picked) == 1 else np.maximum(max_sim, rows[-1])
    return (np.asarray(picked, dtype=np.int64),
            np.asarray(rows, dtype=np.float64).reshape(len(picked), n))
