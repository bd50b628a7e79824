"""Comparing two rankings up to float ties (the pushdown ≡ Python-path checks, issue 15).

Two paths that score the same documents can order near-equal scores differently: the engine
returns float32 scores, Python multiplies in float64. :func:`compare_rankings` tells such
float ties from a real divergence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

#: scores closer than this are a tie (float32 engine scores vs float64 products: ~1e-8)
TIE_TOLERANCE = 1e-6


def tie_groups(doc_ids: Iterable[Any], scores: Iterable[float],
               tol: float = TIE_TOLERANCE) -> list[set[str]]:
    """Consecutive documents whose scores are within ``tol`` of their group's first score, as
    sets of ids, in rank order."""
    groups: list[tuple[float, set[str]]] = []
    for doc, score in zip(doc_ids, scores, strict=True):
        if groups and abs(float(score) - groups[-1][0]) <= tol:
            groups[-1][1].add(str(doc))
        else:
            groups.append((float(score), {str(doc)}))
    return [g for _, g in groups]


def compare_rankings(a: Any, b: Any, tol: float = TIE_TOLERANCE
                     ) -> Literal["same", "ties", "real"]:
    """``same`` (identical ids in order), ``ties`` (the differences are float ties: the
    scores agree rank by rank within ``tol`` and every tie group but the last — which a top-k
    cut may split differently — holds the same documents) or ``real`` (a divergence).
    ``a`` and ``b`` are :class:`~credrank.core.candidates.Candidates` (``doc_ids``, ``score``)."""
    if list(a.doc_ids) == list(b.doc_ids):
        return "same"
    if (len(a.doc_ids) == len(b.doc_ids)
            and np.allclose(a.score, b.score, rtol=0, atol=tol)
            and tie_groups(a.doc_ids, a.score, tol)[:-1]
            == tie_groups(b.doc_ids, b.score, tol)[:-1]):
        return "ties"
    return "real"
