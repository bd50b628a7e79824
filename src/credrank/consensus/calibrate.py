"""Choose the ``contested`` threshold on a development split (calibrated abstention).

On each development query the consensus has a top answer with share ``s*_q`` that is either
correct (equivalent to a gold answer) or wrong; a query without answers has no top answer.
With threshold ``τ`` the consensus *commits* on query ``q`` when ``s*_q > τ`` and abstains
(``contested``) otherwise. The utility of ``τ`` is

``U(τ) = (#{q: s*_q > τ, correct} − #{q: s*_q > τ, wrong}) / N``

(a committed wrong answer costs as much as a committed right one gains; abstaining costs
nothing; ``N`` = all development queries, so ``U ∈ [−1, 1]``). The candidates are ``τ = 0``
(commit whenever there is an answer), every observed ``s*`` (commit above it) and ``τ = 1``
(never commit, ``U = 0``): together every achievable set of committed queries. The chosen
``τ`` maximises ``U``; ties go to the smallest ``τ`` (abstain as little as the data allows),
so ``τ = 1`` is chosen only when every other threshold loses. No development query →
:class:`ValueError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.validation import as_vector
from credrank.reliability.equivalence import equivalence_normalize


@dataclass(frozen=True)
class ThresholdChoice:
    """The chosen threshold, its utility and coverage on the development queries."""

    threshold: float
    utility: float
    committed: int
    committed_correct: int
    n: int
    curve: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "utility": self.utility,
                "committed": self.committed, "committed_correct": self.committed_correct,
                "n": self.n, "rule": "max (#committed correct − #committed wrong) / N; ties: "
                                     "smallest threshold", "curve": self.curve}


def choose_threshold(shares: Sequence[float | None], correct: Sequence[bool | None]
                     ) -> ThresholdChoice:
    """The ``τ`` of the module docstring from per-query top shares (``None``: no answers) and
    whether each top answer is correct (``None`` where there is no top answer)."""
    n = len(shares)
    if n == 0:
        raise ValueError("choose_threshold: no development queries; expected at least one")
    if len(correct) != n:
        raise ValueError(f"correct: expected {n} entries (one per query), got {len(correct)}")
    has = np.array([s is not None for s in shares])
    s = as_vector("shares", np.array([0.0 if v is None else float(v) for v in shares]),
                  low=0.0, high=1.0)
    right = np.array([bool(c) for c in correct]) & has
    wrong = has & ~right
    candidates = sorted({0.0, 1.0, *s[has].tolist()})
    curve: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for tau in candidates:
        commit = has & (s > tau)
        utility = float((np.count_nonzero(commit & right) - np.count_nonzero(commit & wrong))
                        / n)
        row: dict[str, Any] = {"threshold": float(tau), "utility": utility,
                               "committed": int(np.count_nonzero(commit)),
                               "committed_correct": int(np.count_nonzero(commit & right))}
        curve.append(row)
        if best is None or utility > best["utility"]:
            best = row
    assert best is not None
    return ThresholdChoice(best["threshold"], best["utility"], best["committed"],
                           best["committed_correct"], n, curve)


def answer_matches(answer: str | None, gold: Sequence[str]) -> bool:
    """Whether an extracted answer counts as correct: some gold answer occurs in it as whole
    tokens after :func:`~credrank.reliability.equivalence.equivalence_normalize` (an
    extractive span is often longer than the gold string; the rule is lenient and declared).
    ``None`` (no answer) is never correct."""
    if answer is None:
        return False
    padded = f" {equivalence_normalize(answer)} "
    return any((g := equivalence_normalize(str(a))) and f" {g} " in padded for a in gold)
