"""A stand-in for the machine-text scorer, for tests (not a test file).

:class:`StandInScorer` answers what :class:`~credrank.machine_text.scorer.FastDetectScorer`
answers — ``key`` and ``score(texts)`` (also callable, as a ``ScoreJob`` scorer is) — without a
model: a subclass sets ``key`` and ``value(text)``. It records every text it scored
(``scored``) and raises :class:`Injected` on its call number ``fail_at`` (0-based), so that a
test can interrupt a scoring run where it likes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Injected(RuntimeError):
    """The failure a stand-in raises on purpose."""


class StandInScorer:
    """Subclass and set ``key`` and ``value`` (module docstring)."""

    key = "stand-in"

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at, self.calls = fail_at, 0
        self.scored: list[str] = []

    @staticmethod
    def value(text: str) -> float:
        raise NotImplementedError

    def score(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_at is not None and self.calls == self.fail_at:
            raise Injected(f"injected failure at call {self.calls}")
        self.calls += 1
        self.scored += list(texts)
        return np.array([self.value(t) for t in texts], dtype=np.float64)

    __call__ = score
