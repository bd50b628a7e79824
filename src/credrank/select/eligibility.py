"""Eligibility before diversification (chapter 35.8: "diversify only over eligible,
sufficiently relevant evidence").

A candidate is eligible when its retrieval score is at least ``min_ratio`` times the best
retrieval score of the batch (scores clipped at 0). At least ``min_keep`` candidates are kept,
the best by retrieval score, so a selector downstream can still fill its list; the rest are
dropped before MMR or the coverage optimum can reward them merely for being different.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage
from credrank.core.validation import check_int, check_probability


class EligibilityFilter(Stage):
    """Keep candidates with ``max(sim, 0) ≥ min_ratio · max_batch max(sim, 0)`` (≥ ``min_keep``)."""

    name = "eligibility"

    def __init__(self, min_ratio: float = 0.9, min_keep: int = 5):
        self.min_ratio = check_probability("min_ratio", min_ratio)
        self.min_keep = check_int("min_keep", min_keep, 0)

    def transform(self, batch: Candidates) -> Candidates:
        if len(batch) == 0:
            return batch
        sim = np.maximum(batch.retrieval_score, 0.0)
        eligible = sim >= self.min_ratio * sim.max() - 1e-12  # float slack at the boundary
        order = np.argsort(-sim, kind="stable")
        keep = np.zeros(len(batch), dtype=bool)
        keep[order[: self.min_keep]] = True
        rows = np.flatnonzero(eligible | keep)
        out = batch.take(rows)
        return out.with_info(eligibility={"min_ratio": self.min_ratio, "kept": len(rows),
                                          "eligible": int(eligible.sum())})

    def config(self) -> dict[str, Any]:
        return {"min_ratio": self.min_ratio, "min_keep": self.min_keep}
