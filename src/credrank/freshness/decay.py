"""Half-life decay and citation-chain distortion (chapter 35.7), pure math.

* **Weight** ``w(T, t) = 2^(−(T − t)/τ)``: evidence loses half its weight every half-life
  ``τ`` (:func:`half_life_weight`; ``T − t`` and ``τ`` in the same unit). Chapter example with
  ``T = 2026`` and ``τ = 1`` year: a 2023 wrapper has ``2^−3 = 0.125``, its 2020 origin
  ``2^−6 = 0.015625``.
* **Distortion** of a wrapper dated ``t_n`` that repeats an origin observed at ``t_0``:
  ``ρ = w(T, t_n) / w(T, t_0) = 2^((t_n − t_0)/τ)`` (:func:`distortion_ratio`): the factor by
  which decaying on the wrapper's date over-weights the evidence (8 for the 2023 wrapper, 32
  for a 2025 one). Along a chain ``t_0 → t_1 → … → t_n`` the hop factors
  ``w(T, t_i)/w(T, t_{i−1})`` **telescope** to the same ``ρ`` (:func:`chain_ratio`): more hops
  with the same final date do not change it.
* **Bound**: a wrapper cannot be dated after ``T``, so ``ρ ≤ 2^((T − t_0)/τ)``
  (:func:`distortion_bound`; 64 for ``t_0 = 2020``, ``T = 2026``, ``τ = 1`` year).

``τ`` must be positive and finite (``ValueError`` otherwise: a half-life of 0 or less has no
meaning); elapsed times must be finite and ``≥ 0`` (a date after ``T`` is clamped upstream,
:mod:`credrank.freshness.dates`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def check_half_life(tau: float, name: str = "half_life") -> float:
    """``τ`` as a positive finite float, else ``ValueError`` naming ``name``."""
    try:
        value = float(tau)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a positive number, got {tau!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive, finite half-life, got {tau!r} (a "
                         "half-life of 0 or below has no meaning; omit freshness to switch "
                         "decay off)")
    return value


def half_life_weight(elapsed: float | np.ndarray, tau: float) -> np.ndarray:
    """``w = 2^(−elapsed/τ)`` element-wise, in ``(0, 1]`` (``ValueError`` for a negative or
    non-finite elapsed time)."""
    tau = check_half_life(tau)
    e = np.asarray(elapsed, dtype=np.float64)
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("elapsed: expected finite times >= 0 (clamp dates after T to T "
                         "first; unknown ages need the unknown-age policy)")
    return np.exp2(-e / tau)


def distortion_ratio(t_n: float, t_0: float, tau: float) -> float:
    """``ρ = w(T, t_n)/w(T, t_0) = 2^((t_n − t_0)/τ)`` (independent of ``T``)."""
    tau = check_half_life(tau)
    return float(2.0 ** ((float(t_n) - float(t_0)) / tau))


def chain_ratio(dates: Sequence[float], now: float, tau: float) -> float:
    """The product of the hop factors ``w(T, t_i)/w(T, t_{i−1})`` along ``t_0, …, t_n``
    (telescopes to :func:`distortion_ratio` of the ends); 1 for a single date."""
    tau = check_half_life(tau)
    if not dates:
        raise ValueError("dates: expected at least the origin's date")
    w = half_life_weight(np.maximum(float(now) - np.asarray(dates, dtype=np.float64), 0.0),
                         tau)
    return float(np.prod(w[1:] / w[:-1])) if len(w) > 1 else 1.0


def distortion_bound(t_0: float, now: float, tau: float) -> float:
    """``2^((T − t_0)/τ)``: the largest ``ρ`` a wrapper dated at most ``T`` can reach."""
    tau = check_half_life(tau)
    return float(2.0 ** (max(float(now) - float(t_0), 0.0) / tau))
