"""One-hop neighbour smoothing of the source prior (seed 004, "one-hop smoothing"); the stage
is :class:`~credrank.stages.smoothing.NeighbourSmoothing`.

Seed 004's optional extension adjusts each document's reliability by its nearest neighbours:

    λ'(d) = (1 − β) · λ(d) + β · mean_{d' ∈ N_m(d)} λ(d')

where ``N_m(d)`` are the ``m`` other candidates of the same batch closest to ``d`` in embedding
space (cosine on ``batch.vectors``). β = 0 leaves the priors unchanged; β = 1 replaces each prior
by its neighbours' mean. λ' is a convex combination of priors, so it stays in their range.

**Declared policies.**

* Neighbours are other candidates only (a document is never its own neighbour). When
  ``m > n − 1`` every other candidate is a neighbour (``m_effective = n − 1``).
* Ties in cosine are broken by row order: the earlier row (the better retrieval rank, since a
  retriever emits rows by descending score) wins, so the result is deterministic.
* A zero vector has cosine 0 with every vector (no division by zero); its neighbours are then
  the first rows by the tie rule, unless some cosine is positive.
* A batch with fewer than 2 candidates is left unchanged (there is no neighbour).

**Caveat (the seed's q006/q010 failure mode).** Smoothing moves reliability along semantic
proximity, not along provenance. A clean, low-prior document (a sound blog post) whose nearest
neighbours are low-prior adversarial texts written to resemble it is pulled further down, and can
drop below documents it outranked before; conversely a spoofed high-prior text among low-prior
fakes is pulled down, which helps. Whether it helps depends on the topic structure of the corpus;
measure it on held-out queries before enabling it.
"""

from __future__ import annotations

import numpy as np

from credrank.core.maths import cosine_matrix
from credrank.core.validation import as_matrix, as_vector, check_int, check_probability


def neighbour_mask(vectors: np.ndarray, m: int) -> np.ndarray:
    """Boolean ``(n, n)`` matrix: row ``i`` marks the ``min(m, n−1)`` nearest other rows.

    Nearest by cosine (:func:`credrank.core.maths.cosine_matrix`: a zero row has cosine 0 with
    every row, itself included); ties broken by lower row index. The selection uses
    ``np.partition`` (the k-th largest cosine per row) instead of a full sort: rows strictly above
    the threshold are taken, then tied rows at the threshold in row order until ``m`` are taken.
    """
    m = check_int("smoothing m", m, 1)
    n = len(vectors)
    if n < 2:
        return np.zeros((n, n), dtype=bool)
    k = min(m, n - 1)
    sims = cosine_matrix(vectors)
    np.fill_diagonal(sims, -np.inf)
    # k-th largest value of each row (the self entry, −inf, is never among the k largest)
    threshold = -np.partition(-sims, k - 1, axis=1)[:, k - 1]
    above = sims > threshold[:, None]
    at = sims == threshold[:, None]
    still_needed = k - above.sum(axis=1)
    tied_rank = np.cumsum(at, axis=1)  # 1-based rank of each tied entry in row order
    return above | (at & (tied_rank <= still_needed[:, None]))


def smooth_priors(priors: np.ndarray, vectors: np.ndarray, m: int, beta: float) -> np.ndarray:
    """One-hop neighbour smoothing, seed 004: ``λ' = (1 − β)·λ + β·mean λ(N_m)``.

    ``priors``: ``(n,)`` finite values; ``vectors``: ``(n, dim)`` finite embeddings;
    ``m``: neighbours per document (integer ≥ 1; ``n − 1`` are used when ``m > n − 1``);
    ``beta``: weight of the neighbour mean, in [0, 1]. Neighbours by cosine, ties by row order,
    zero vectors have cosine 0 (see the module docstring). With ``n < 2`` the priors are
    returned unchanged (a copy). Vectorised: one matrix product and one partition.
    """
    m, beta = check_int("smoothing m", m, 1), check_probability("smoothing beta", beta)
    lam = as_vector("smoothing priors", np.reshape(priors, -1))
    vec = as_matrix("smoothing vectors", vectors)
    if vec.shape[0] != len(lam):
        raise ValueError(f"smoothing vectors: expected shape ({len(lam)}, dim) (one row per "
                         f"prior), got {vec.shape}")
    if len(lam) < 2:
        return lam.copy()
    mask = neighbour_mask(vec, m)
    neighbour_mean = (mask @ lam) / mask.sum(axis=1)
    return (1.0 - beta) * lam + beta * neighbour_mean
