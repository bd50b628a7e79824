"""One-hop neighbour smoothing of the source prior (seed 004, "one-hop smoothing").

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

from dataclasses import replace
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.maths import cosine_matrix
from credrank.core.pipeline import Stage
from credrank.core.schema import Field, Integer, Number, Table
from credrank.core.validation import as_matrix, as_vector, check_int, check_probability, check_str


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


class NeighbourSmoothing(Stage):
    """Replace the factor ``source_factor`` by its one-hop smoothed value under ``name``.

    Seed 004's optional smoothing, ``λ'(d) = (1 − β)·λ(d) + β·mean λ(N_m(d))`` (see
    :func:`smooth_priors`). The factor ``source_factor`` (the prior from
    :class:`~credrank.signals.prior.SourcePrior`) is removed from the ledger and ``name`` takes
    its place, so ``multiply`` still scores ``sim × λ'``. ``batch.info["smoothing"]`` records
    β, m, the m actually used and how many candidates moved (|λ' − λ| > 1e-12).

    Needs ``batch.vectors``: retrieve with ``with_vectors=True``. A batch with fewer than 2
    candidates passes unchanged (only the factor is renamed when ``name`` differs), vectors or
    not; a missing ``source_factor`` is a configuration error and always raises.
    """

    reads = frozenset({"vectors"})
    SPEC = Table({"m": Field(Integer(1), default=5), "beta": Field(Number(0.0, 1.0), default=0.3)})

    def formula_term(self) -> str:
        return "needs the Python path (it reads the candidates' vectors)"

    def __init__(self, m: int = 5, beta: float = 0.3, *, source_factor: str = "prior",
                 name: str = "prior"):
        self.m = check_int("smoothing m", m, 1)
        self.beta = check_probability("smoothing beta", beta)
        self.source_factor = check_str("smoothing source_factor", source_factor)
        self.name = check_str("smoothing name", name)

    def _replace_factor(self, batch: Candidates, values: np.ndarray) -> Candidates:
        """``source_factor`` removed, ``name`` set to ``values`` at its place in the ledger."""
        factors: dict[str, np.ndarray] = {}
        for key, arr in batch.factors.items():
            if key == self.source_factor:
                factors[self.name] = values
            elif key != self.name:  # a factor already called ``name`` is overwritten
                factors[key] = arr
        return replace(batch, factors=factors).with_factor(self.name, values, low=0.0, high=1.0)

    def transform(self, batch: Candidates) -> Candidates:
        if self.source_factor not in batch.factors:
            raise StageError(
                f"NeighbourSmoothing: factor {self.source_factor!r} is not in the batch "
                f"(factors: {list(batch.factors) or 'none'}); add a prior stage such as "
                "SourcePrior before smoothing")
        lam = batch.factors[self.source_factor]
        info: dict[str, Any] = {"beta": self.beta, "m": self.m, "source_factor":
                                self.source_factor, "name": self.name}
        if len(batch) < 2:
            info.update(applied=False, m_effective=0, moved=0,
                        reason="fewer than 2 candidates: no neighbours")
            return self._replace_factor(batch, lam).with_info(smoothing=info)
        if batch.vectors is None:
            raise StageError(
                "NeighbourSmoothing: the batch has no embedding vectors; retrieve with vectors "
                "(with_vectors=True on the retriever; a spec's smoothing stage asks for "
                "them itself)")
        smoothed = smooth_priors(lam, batch.vectors, self.m, self.beta)
        moved = int(np.count_nonzero(np.abs(smoothed - lam) > 1e-12))
        info.update(applied=True, m_effective=min(self.m, len(batch) - 1), moved=moved)
        return self._replace_factor(batch, smoothed).with_info(smoothing=info)

    def config(self) -> dict[str, Any]:
        return {"m": self.m, "beta": self.beta, "source_factor": self.source_factor}
