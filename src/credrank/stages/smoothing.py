"""``NeighbourSmoothing``: the catalog stage ``smoothing``, one-hop neighbour smoothing of the
source prior (seed 004).

The formula, its declared policies and its caveat are those of
:func:`~credrank.signals.smoothing.smooth_priors` (:mod:`credrank.signals.smoothing`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.params import parameters
from credrank.core.pipeline import Stage
from credrank.core.schema import Integer, Number
from credrank.core.validation import check_str
from credrank.signals.smoothing import smooth_priors

#: the most neighbours ``m`` a spec may ask for: the largest pool any door fetches (the
#: service's ``MAX_FETCH_K``); the work is ``O(N²)`` whatever ``m`` (the N × N cosine matrix)
MAX_M = 10_000


class NeighbourSmoothing(Stage):
    """Replace the factor ``source_factor`` by its one-hop smoothed value under ``name``.

    Seed 004's optional smoothing, ``λ'(d) = (1 − β)·λ(d) + β·mean λ(N_m(d))`` (see
    :func:`smooth_priors`). The factor ``source_factor`` (the prior from
    :class:`~credrank.stages.prior.SourcePrior`) is removed from the ledger and ``name`` takes
    its place, so ``multiply`` still scores ``sim × λ'``. ``batch.info["smoothing"]`` records
    β, m, the m actually used and how many candidates moved (|λ' − λ| > 1e-12).

    Needs ``batch.vectors``: retrieve with ``with_vectors=True``. A batch with fewer than 2
    candidates passes unchanged (only the factor is renamed when ``name`` differs), vectors or
    not; a missing ``source_factor`` is a configuration error and always raises.
    """

    reads = frozenset({"vectors"})
    #: neighbours are other documents (a page's own passages are not its neighbours)
    counts_documents = True

    def formula_term(self) -> str:
        return "needs the Python path (it reads the candidates' vectors)"

    # m is bounded by the largest pool (MAX_M): more neighbours than candidates is n − 1
    @parameters(m=Integer(1, MAX_M), beta=Number(0.0, 1.0))
    def __init__(self, m: int = 5, beta: float = 0.3, *, source_factor: str = "prior",
                 name: str = "prior"):
        self.m, self.beta = m, beta
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
        return {**super().config(), "source_factor": self.source_factor}
