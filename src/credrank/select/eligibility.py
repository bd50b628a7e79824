"""Eligibility before diversification (chapter 35.8: "diversify only over eligible,
sufficiently relevant evidence … unrelated entities should not be rewarded merely for
difference").

A candidate is eligible when its relevance, the retrieval score clipped at 0
``r(d) = max(retrieval_score(d), 0)``, is at least ``min_ratio`` times the pool's best
(``r(d) ≥ min_ratio · max_d' r(d')``). At least ``min_keep`` candidates are kept, the best by
relevance, so a selector downstream can still fill its list; the rest are dropped before MMR
or the coverage optimum can reward them merely for being different.

:func:`eligible_rows` is the one definition: the selectors ``mmr`` and ``coverage`` apply it
through their ``min_ratio`` parameter (``min_keep`` = their list length), at every door.
"""

from __future__ import annotations

import numpy as np

from credrank.core.validation import as_vector, check_int, check_probability

#: float slack at the boundary ``r = min_ratio · max r``
SLACK = 1e-12


def eligible_rows(relevance: np.ndarray, min_ratio: float, min_keep: int
                  ) -> tuple[np.ndarray, int]:
    """The rows (ascending) with ``max(r, 0) ≥ min_ratio · max max(r, 0)``, together with the
    ``min_keep`` best by relevance (ties by row order), and how many were eligible.

    ``min_ratio = 0`` keeps every row (the whole pool); a pool whose relevances are all ≤ 0
    has every row eligible (all tie at the zero top).
    """
    r = np.maximum(as_vector("relevance", relevance), 0.0)
    ratio = check_probability("min_ratio", min_ratio)
    keep_best = check_int("min_keep", min_keep, 0)
    if r.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    eligible = r >= ratio * r.max() - SLACK
    keep = eligible.copy()
    keep[np.argsort(-r, kind="stable")[:keep_best]] = True
    return np.flatnonzero(keep).astype(np.int64), int(eligible.sum())
