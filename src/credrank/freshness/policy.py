"""The unknown-age policy (chapter 35.7): what an undated document weighs.

* ``neutral`` — the weight is a stated constant; by default the **median weight of the dated
  candidates** of the same query (``value=None``), or 0.5 when no candidate is dated
  (declared);
* ``penalty`` — the stated factor ``value`` (e.g. ``penalty:0.5``);
* ``exclude`` — the document is removed from the candidates (and reported).

An undated document never gets a fabricated boost: its weight is at most the policy's value,
and (the median of weights ≤ 1 being ≤ 1) never above that of an otherwise identical document
dated at ``T`` (weight 1). Parsed from ``neutral``, ``neutral:0.6``, ``penalty:0.5`` or
``exclude`` by :func:`parse_undated`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("neutral", "penalty", "exclude")
#: the neutral weight when no candidate of the query is dated
NO_DATED_NEUTRAL = 0.5


@dataclass(frozen=True)
class UnknownAge:
    """``kind`` in :data:`KINDS`; ``value`` the stated weight (``None`` with ``neutral``:
    the median of the dated candidates; required with ``penalty``)."""

    kind: str = "neutral"
    value: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"undated: expected one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == "penalty" and self.value is None:
            raise ValueError("undated: penalty needs a factor, e.g. penalty:0.5")
        if self.kind == "exclude" and self.value is not None:
            raise ValueError(f"undated: exclude takes no value, got {self.value!r}")
        if self.value is not None and not (0.0 <= float(self.value) <= 1.0):
            raise ValueError(f"undated: expected a weight in [0, 1], got {self.value!r}")

    def weight(self, dated_weights: np.ndarray) -> float | None:
        """The weight of an undated candidate given the weights of the dated ones (``None``
        for ``exclude``)."""
        if self.kind == "exclude":
            return None
        if self.value is not None:
            return float(self.value)
        dated = np.asarray(dated_weights, dtype=np.float64)
        return float(np.median(dated)) if dated.size else NO_DATED_NEUTRAL

    def describe(self) -> str:
        if self.kind == "exclude":
            return "exclude"
        if self.value is None:
            return f"neutral (median of dated candidates; {NO_DATED_NEUTRAL} if none)"
        return f"{self.kind}:{self.value:g}"


def parse_undated(text: str) -> UnknownAge:
    """``neutral`` | ``neutral:W`` | ``penalty:W`` | ``exclude`` → :class:`UnknownAge`."""
    kind, _, raw = str(text).strip().partition(":")
    value = None
    if raw:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"undated: expected a number after {kind}:, got {raw!r}") from None
    return UnknownAge(kind, value)
