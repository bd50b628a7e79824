"""Combination of the retrieval score with the credibility factors (seed 004, DESIGN.md §3).

Modes (the credibility ``c(d)`` is the product of every factor in the batch's ledger, e.g. the
prior λ(s_d), or λ × smoothing × freshness):

* ``multiply`` (default): ``score = max(sim, 0) × c(d)`` — seed 004's ``sim(q,d) × λ(s_d)``.
  **Scale requirement:** the similarity must be non-negative for the product to rank sensibly
  (a negative cosine times a small prior would rise *above* the same cosine times a large
  prior). Cosine is therefore clipped at 0 before multiplying; BM25 is already ≥ 0. The product
  is invariant to any positive rescaling of ``sim``, so no normalisation is needed.
* ``linear``: ``score = α · ŝ + (1 − α) · c(d)`` with ``ŝ = max(sim, 0) / max_batch(max(sim, 0))``
  so both terms live in [0, 1]; a batch whose similarities are all ≤ 0 has ``ŝ = 0`` (declared
  zero-division policy).
* ``rrf``: reciprocal rank fusion of the similarity ranking and the credibility ranking,
  ``score = 1/(k + rank_sim) + 1/(k + rank_c)``, ranks 1-based, ties in ``c`` broken by
  similarity order; scale-free.
"""

from __future__ import annotations

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.params import parameters
from credrank.core.pipeline import FormulaTerm, Stage
from credrank.core.schema import Number, Text

MODES = ("multiply", "linear", "rrf")


def credibility(batch: Candidates) -> np.ndarray:
    """``c(d)``: the product of all factors (1 when the ledger is empty)."""
    c = np.ones(len(batch))
    for values in batch.factors.values():
        c = c * values
    return c


def combine_multiply(sim: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``max(sim, 0) × c`` (seed 004's score_SA with cosine clipped at 0)."""
    return np.maximum(sim, 0.0) * c


def combine_linear(sim: np.ndarray, c: np.ndarray, alpha: float) -> np.ndarray:
    """``α·ŝ + (1−α)·c`` with ``ŝ`` the non-negative similarity divided by its batch maximum."""
    pos = np.maximum(sim, 0.0)
    top = pos.max() if pos.size else 0.0
    s_hat = pos / top if top > 0 else np.zeros_like(pos)
    return alpha * s_hat + (1.0 - alpha) * c


def _ranks(order_keys: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """1-based ranks by descending key, ties by descending tiebreak, then row order."""
    order = np.lexsort((np.arange(len(order_keys)), -tiebreak, -order_keys))
    ranks = np.empty(len(order_keys), dtype=np.float64)
    ranks[order] = np.arange(1, len(order_keys) + 1)
    return ranks


#: the largest ``rrf_k`` (a larger constant flattens every rank to ~``2/k``: scores of 1e-308)
MAX_RRF_K = 1e6


def combine_rrf(sim: np.ndarray, c: np.ndarray, k: float) -> np.ndarray:
    """``1/(k + rank_sim) + 1/(k + rank_c)`` (reciprocal rank fusion, Cormack et al. 2009)."""
    return 1.0 / (k + _ranks(sim, c)) + 1.0 / (k + _ranks(c, sim))


class Combine(Stage):
    """Compute ``score`` from ``retrieval_score`` and the factor ledger (see module docstring)."""

    name = "combine"
    combines = True

    def formula_term(self) -> FormulaTerm | str:
        """``multiply`` is the engine's formula (``max(s, 0) × Π factors``); the rank-based
        and linear combinations need the whole pool in Python."""
        if self.mode != "multiply":
            return f"mode {self.mode!r} needs the Python path (the engine multiplies)"
        return FormulaTerm("multiply", self)

    @parameters(mode=Text(choices=MODES), alpha=Number(0.0, 1.0),
                rrf_k=Number(0.0, MAX_RRF_K, open_low=True))
    def __init__(self, mode: str = "multiply", *, alpha: float = 0.5, rrf_k: float = 60.0):
        self.mode, self.alpha, self.rrf_k = mode, alpha, rrf_k

    def transform(self, batch: Candidates) -> Candidates:
        sim, c = batch.retrieval_score, credibility(batch)
        if self.mode == "multiply":
            score = combine_multiply(sim, c)
        elif self.mode == "linear":
            score = combine_linear(sim, c, self.alpha)
        else:
            score = combine_rrf(sim, c, self.rrf_k)
        return batch.with_score(score)

