"""Birkhoff–von Neumann decomposition, sampling and exposure monitoring (chapter 35.9).

A square doubly stochastic ``P̄`` is written as ``P̄ = Σ_ℓ α_ℓ Π_ℓ`` with ``α_ℓ ≥ 0``,
``Σ α_ℓ = 1`` and permutation matrices ``Π_ℓ``. The greedy algorithm: find a perfect matching
on the support of the remainder (``scipy.optimize.linear_sum_assignment`` on cost
``−log P̄`` where ``P̄ > tol`` and a prohibitive penalty elsewhere), subtract the smallest
entry along it, repeat. Each step empties at least one entry and moves the remainder to a
strictly smaller face of the Birkhoff polytope, so at most ``(N−1)² + 1`` terms arise
(Marcus–Ree). The residual ``max |P̄ − Σ α_ℓ Π_ℓ|`` is reported, never hidden.

Serving (:func:`decompose_ranking`) decomposes a rectangular ranking policy ``P`` (``N × K``)
without the dense uniform tail of :func:`credrank.select.exposure.complete_square`: rows that
are never displayed are left out (they always sit below the cut), and the remaining rows are
completed with a sparse staircase tail (north-west-corner rule). Any completion whose extra
columns carry zero attention yields the same displayed marginals; the sparse one needs far
fewer terms. One permutation is then sampled per request (:func:`sample_ranking`), and
:class:`ExposureMonitor` compares realised with target exposure over a stream of requests
(expectation is not a per-query floor).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.validation import as_matrix
from credrank.select.exposure import check_discounts, check_ranking_policy

_FORBIDDEN = 1e9  # cost of a zero entry; any matching that needs one is not on the support


@dataclass(frozen=True)
class BvNDecomposition:
    """``P̄ ≈ Σ_ℓ weights[ℓ] · Π_ℓ`` with ``Π_ℓ[i, permutations[ℓ, i]] = 1``.

    Attributes:
        weights: ``α_ℓ`` (non-negative; they sum to 1 up to ``residual``).
        permutations: ``(terms, N)`` int array, row ``i`` → column ``permutations[ℓ, i]``.
        residual: ``max |P̄ − Σ α_ℓ Π_ℓ|``.
    """

    weights: np.ndarray
    permutations: np.ndarray
    residual: float

    @property
    def n_terms(self) -> int:
        return len(self.weights)

    def matrix(self) -> np.ndarray:
        """``Σ_ℓ α_ℓ Π_ℓ``."""
        n = self.permutations.shape[1] if self.permutations.size else 0
        out = np.zeros((n, n))
        rows = np.arange(n)
        for w, perm in zip(self.weights, self.permutations, strict=True):
            out[rows, perm] += w
        return out


def check_doubly_stochastic(s: np.ndarray, *, tol: float = 1e-9) -> np.ndarray:
    """Validate a square, non-negative matrix whose rows and columns each sum to 1."""
    m = as_matrix("P", s)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"P: expected a square matrix (complete a rectangular ranking first), "
                         f"got shape {m.shape}")
    if m.size and m.min() < -tol:
        raise ValueError(f"P: expected non-negative entries, got {m.min():.6g}")
    for axis, what in ((1, "row"), (0, "column")):
        sums = m.sum(axis=axis)
        if np.any(np.abs(sums - 1.0) > tol):
            i = int(np.argmax(np.abs(sums - 1.0)))
            raise ValueError(f"P: {what} {i} sums to {sums[i]:.12g}; expected 1 (doubly "
                             "stochastic)")
    return m


def birkhoff_von_neumann(s: np.ndarray, *, tol: float = 1e-12,
                         check_tol: float = 1e-9) -> BvNDecomposition:
    """Birkhoff–von Neumann decomposition ``P̄ = Σ_ℓ α_ℓ Π_ℓ`` (chapter 35.9), greedy.

    Entries ``≤ tol`` count as zero. Stops when the remaining mass ``1 − Σ α`` is ``≤ tol`` or
    when round-off leaves no perfect matching on the support; ``residual`` says how far the
    reconstruction is from ``P̄``. At most ``(N−1)² + 1`` terms.
    """
    from scipy.optimize import linear_sum_assignment
    m = check_doubly_stochastic(s, tol=check_tol)
    n = m.shape[0]
    clean = np.where(m > tol, m, 0.0)
    # a row whose only entry is its whole mass maps to that column in every term: fix it and
    # decompose only the remaining block (exact; saves O(N²) work per term on sparse input)
    single = (np.count_nonzero(clean, axis=1) == 1) if n else np.zeros(0, dtype=bool)
    fixed_rows = np.flatnonzero(single)
    fixed_cols = np.argmax(clean[fixed_rows], axis=1) if len(fixed_rows) else np.zeros(0, int)
    free_rows = np.flatnonzero(~single)
    free_cols = np.setdiff1d(np.arange(n), fixed_cols)
    if len(free_rows) != len(free_cols):  # only possible for a non-stochastic support
        free_rows, free_cols = np.arange(n), np.arange(n)
        fixed_rows = fixed_cols = np.zeros(0, dtype=np.int64)
    rest = clean[np.ix_(free_rows, free_cols)]
    nf = len(free_rows)
    weights: list[float] = []
    perms: list[np.ndarray] = []
    rows = np.arange(nf)
    remaining = 1.0
    max_terms = (n - 1) ** 2 + 1
    while n and remaining > tol and len(weights) < max_terms:
        if nf == 0:  # every row fixed: P̄ is a permutation matrix
            weights.append(1.0)
            perms.append(np.zeros(0, dtype=np.int64))
            break
        support = rest > tol
        with np.errstate(divide="ignore"):
            cost = np.where(support, -np.log(np.where(support, rest, 1.0)), _FORBIDDEN)
        _, cols = linear_sum_assignment(cost)
        along = rest[rows, cols]
        if not np.all(along > tol):
            break  # round-off: no perfect matching on what is left
        w = float(along.min())
        weights.append(w)
        perms.append(cols.astype(np.int64))
        rest[rows, cols] = along - w
        j = int(np.argmin(along))
        rest[j, cols[j]] = 0.0  # the minimum entry empties exactly
        rest[rows, cols] = np.where(rest[rows, cols] <= tol, 0.0, rest[rows, cols])
        remaining -= w
    full_perms = np.empty((len(perms), n), dtype=np.int64)
    full_perms[:, fixed_rows] = fixed_cols
    for t, cols in enumerate(perms):
        full_perms[t, free_rows] = free_cols[cols]
    dec = BvNDecomposition(weights=np.asarray(weights), permutations=full_perms, residual=0.0)
    residual = float(np.abs(m - dec.matrix()).max()) if n else 0.0
    return BvNDecomposition(weights=dec.weights, permutations=dec.permutations,
                            residual=residual)


# --------------------------------------------------------------------------------------------
# serving: rectangular policy → sampled displayed lists
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankingDecomposition:
    """A ranking policy as a lottery over displayed lists.

    Attributes:
        weights: probability of each list (sums to 1).
        rankings: ``(terms, K)`` document indices, position by position.
        n_docs: ``N``.
        residual: ``max |P − Σ_ℓ α_ℓ Π_ℓ[:, :K]|`` over the displayed marginals.
    """

    weights: np.ndarray
    rankings: np.ndarray
    n_docs: int
    residual: float

    @property
    def n_terms(self) -> int:
        return len(self.weights)

    def marginals(self) -> np.ndarray:
        """Displayed marginals ``Σ_ℓ α_ℓ [rankings[ℓ, k] = d]`` as an ``N × K`` matrix."""
        k = self.rankings.shape[1]
        out = np.zeros((self.n_docs, k))
        for w, ranking in zip(self.weights, self.rankings, strict=True):
            out[ranking, np.arange(k)] += w
        return out


def staircase_completion(p: np.ndarray) -> np.ndarray:
    """A sparse square completion of ``P`` (rows with display mass only need apply).

    Row ``d``'s slack ``1 − Σ_k P[d, k]`` is poured into the ``N − K`` zero-attention columns
    in order (north-west-corner rule), never-shown rows first so that each fills one column;
    the result is doubly stochastic with at most ``2N − K − 1`` tail entries instead of
    ``N·(N − K)``.
    """
    pm = as_matrix("P", p)
    n, k = pm.shape
    extra = n - k
    slack = np.clip(1.0 - pm.sum(axis=1), 0.0, 1.0)
    tail = np.zeros((n, extra))
    if extra:
        # never-shown rows (slack exactly 1) first, one whole column each, so that they stay
        # single-entry rows; then the partly shown rows, split at the column boundaries
        whole = np.flatnonzero(slack >= 1.0)
        part = np.flatnonzero((slack > 0.0) & (slack < 1.0))
        order = np.concatenate([whole, part])
        hi = np.cumsum(slack[order])
        hi[-1] = float(extra)  # absorb round-off so the last column closes exactly
        lo = np.concatenate([[0.0], hi[:-1]])
        for d, a, b in zip(order, lo, np.minimum(hi, float(extra)), strict=True):
            col = int(a)
            while a < b - 1e-15 and col < extra:
                upto = min(b, col + 1.0)
                tail[d, col] += upto - a
                a, col = upto, col + 1
    return np.hstack([pm, tail])


def decompose_ranking(p: np.ndarray, *, tol: float = 1e-12,
                      check_tol: float = 1e-9) -> RankingDecomposition:
    """Decompose a ranking policy ``P`` (``N × K``) into weighted displayed lists (35.9).

    Rows with no display mass are dropped (never shown); the rest are completed square with
    :func:`staircase_completion` and decomposed by :func:`birkhoff_von_neumann`. The weights
    are renormalised to sum to exactly 1; ``residual`` is the largest deviation of the
    lottery's displayed marginals from ``P``.
    """
    pm = as_matrix("P", p)
    check_ranking_policy(pm, tol=check_tol)
    n, k = pm.shape
    shown = np.flatnonzero(pm.sum(axis=1) > tol)
    sub = pm[shown]
    # exact unit columns: spread the (tiny) column defect over the column's entries
    sub = sub / sub.sum(axis=0, keepdims=True)
    over = sub.sum(axis=1)
    if np.any(over > 1.0):
        sub = sub / np.maximum(over, 1.0)[:, None]
    square = staircase_completion(sub)
    dec = birkhoff_von_neumann(square, tol=tol, check_tol=check_tol)
    weights = dec.weights / dec.weights.sum()
    rankings = shown[np.argsort(dec.permutations, axis=1)[:, :k]]
    out = RankingDecomposition(weights=weights, rankings=rankings, n_docs=n, residual=0.0)
    residual = float(np.abs(out.marginals() - pm).max())
    return RankingDecomposition(weights=weights, rankings=rankings, n_docs=n, residual=residual)


def sample_ranking(decomposition: RankingDecomposition | BvNDecomposition,
                   rng: np.random.Generator, k: int | None = None) -> np.ndarray:
    """Draw one displayed list with probability ``α_ℓ`` (chapter 35.9: one per request).

    For a :class:`RankingDecomposition` returns its ``K`` document indices by position; for
    a square :class:`BvNDecomposition` returns the documents at positions ``1..k`` (all
    ``N`` when ``k`` is ``None``). ``rng`` is a seedable ``numpy.random.Generator``.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    w = np.asarray(decomposition.weights, dtype=np.float64)
    if len(w) == 0:
        raise ValueError("decomposition: no terms to sample from")
    idx = int(rng.choice(len(w), p=w / w.sum()))
    if isinstance(decomposition, RankingDecomposition):
        return decomposition.rankings[idx].copy()
    order = np.argsort(decomposition.permutations[idx])  # position → document
    return order if k is None else order[:k]


def realised_exposure(ranking: np.ndarray, n_docs: int, discounts: np.ndarray) -> np.ndarray:
    """Exposure each document received from one displayed list (chapter 35.9): ``v(k)`` at
    position ``k``."""
    v = check_discounts(discounts)
    r = np.asarray(ranking, dtype=np.int64)
    if len(r) > len(v):
        raise ValueError(f"ranking: {len(r)} positions but only {len(v)} discounts")
    e = np.zeros(n_docs)
    e[r] = v[: len(r)]
    return e


# --------------------------------------------------------------------------------------------
# monitoring
# --------------------------------------------------------------------------------------------
@dataclass
class ExposureMonitor:
    """Realised vs target exposure per group over a stream of requests (chapter 35.9).

    Each :meth:`record` adds, per group present in the request, the group's size, the
    exposure its members actually received (``Σ v(k)`` over its displayed documents) and the
    exposure its target promised (``|G|·E_G``). Averages are per document-request, so the
    accounting is amortised across queries with different candidates (a declared choice).
    A service records and reads it from several threads at once: both hold its lock (an
    update read-modify-writes the sums; a summary iterated them while another request added
    a group).
    """

    docs: dict[str, int] = field(default_factory=dict)
    realised: dict[str, float] = field(default_factory=dict)
    target: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles get a lock of their own
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def record(self, ranking: np.ndarray, groups: Sequence[Any] | np.ndarray,
               discounts: np.ndarray, targets: Mapping[str, float] | None = None) -> None:
        """Add one request: displayed ``ranking`` (document indices), all ``groups``, ``v``."""
        labels = [str(g) for g in groups]
        e = realised_exposure(ranking, len(labels), discounts)
        with self._lock:
            for name in sorted(set(labels)):
                members = np.array([lab == name for lab in labels])
                size = int(members.sum())
                self.docs[name] = self.docs.get(name, 0) + size
                self.realised[name] = self.realised.get(name, 0.0) + float(e[members].sum())
                if targets is not None and name in targets:
                    self.target[name] = (self.target.get(name, 0.0)
                                         + size * float(targets[name]))
            self.requests += 1

    def summary(self) -> dict[str, Any]:
        """Per group: document-requests, realised and target average exposure, and the gap."""
        with self._lock:
            groups = {}
            for name, count in sorted(self.docs.items()):
                realised = self.realised[name] / count
                target = self.target[name] / count if name in self.target else None
                groups[name] = {"doc_requests": count, "realised": realised, "target": target,
                                "gap": None if target is None else realised - target}
            return {"requests": self.requests, "groups": groups}


def empirical_marginals(rankings: Sequence[np.ndarray], n_docs: int) -> np.ndarray:
    """Share of sampled lists that put document ``d`` at position ``k`` (``N × K``)."""
    arr = np.asarray(rankings, dtype=np.int64)
    if arr.ndim != 2 or len(arr) == 0:
        raise ValueError(f"rankings: expected a non-empty (samples, K) array, got {arr.shape}")
    out = np.zeros((n_docs, arr.shape[1]))
    for k in range(arr.shape[1]):
        out[:, k] = np.bincount(arr[:, k], minlength=n_docs) / len(arr)
    return out

