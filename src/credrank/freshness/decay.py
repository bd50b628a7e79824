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
meaning); elapsed times must be finite and ``≥ 0`` (a date after ``T`` never reaches them: an
unknown age for the ranking, age 0 in the lineage audit; :mod:`credrank.freshness.dates`).

**Range policy** (no ``OverflowError``, NaN or infinity leaves a function): a weight
``2^(−x)`` that underflows — or would be a denormal below ``2.2e-308`` — is ``0.0`` (stated,
finite). A ratio ``2^x`` can exceed the largest
float (``x ≥ 1024``, e.g. ``t_n − t_0`` of 8,000 years with ``τ = 1`` year, or any gap with
``τ = 1e-10`` days): the exponents are given by :func:`log2_distortion_ratio`,
:func:`log2_chain_ratio` and :func:`log2_distortion_bound` (finite whenever the inputs and
``τ`` are: ``ValueError`` otherwise), and :func:`exp2_declared` returns ``2^x`` or ``None``
for "overflows" — what reports print. :func:`distortion_ratio`, :func:`chain_ratio` and
:func:`distortion_bound` return floats and raise ``ValueError`` (never ``OverflowError``) for a
ratio beyond the float range. The chain product is summed in the log domain, so weights that
underflow to 0 never give ``0/0``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def check_half_life(tau: float, name: str = "half_life",
                    off: str = "omit freshness to switch decay off") -> float:
    """``τ`` as a positive finite float, else ``ValueError`` naming ``name`` (``off``: how the
    caller's door turns what ``τ`` drives off)."""
    try:
        value = float(tau)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a positive number, got {tau!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive, finite half-life, got {tau!r} (a "
                         f"half-life of 0 or below has no meaning; {off})")
    return value


def half_life_weight(elapsed: float | np.ndarray, tau: float) -> np.ndarray:
    """The half-life weight of chapter 35.7, ``w = 2^(−elapsed/τ)`` element-wise, in
    ``(0, 1]`` (``ValueError`` for a negative or non-finite elapsed time)."""
    tau = check_half_life(tau)
    e = np.asarray(elapsed, dtype=np.float64)
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("elapsed: expected finite times >= 0 (a date after T has no usable "
                         "age: unknown ages, after T included, need the unknown-age policy)")
    w = np.exp2(-e / tau)
    return np.where(w < np.finfo(np.float64).tiny, 0.0, w)  # a denormal weight is 0


def exp2_declared(x: float) -> float | None:
    """``2^x`` as a float, ``0.0`` where it underflows, ``None`` where it exceeds the largest
    float (``x ≥ 1024``: the declared overflow of a ratio; report ``x`` itself beside it);
    ``ValueError`` for NaN."""
    value = float(x)
    if math.isnan(value):
        raise ValueError(f"x: expected a number (a log2 ratio), got {x!r}")
    if value >= 1024.0:
        return None
    return float(2.0 ** value) if value > -1075.0 else 0.0


def _finite_log2(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite exponent, got {value!r} (the time span "
                         "divided by the half-life leaves the float range: use a longer "
                         "half-life)")
    return value


def _ratio(log2: float, name: str) -> float:
    got = exp2_declared(log2)
    if got is None:
        raise ValueError(f"{name}: expected a ratio within the float range, got 2^{log2:g} "
                         f"(use the log2_ form, or exp2_declared for the declared overflow)")
    return got


def log2_distortion_ratio(t_n: float, t_0: float, tau: float) -> float:
    """``log2 ρ = (t_n − t_0)/τ`` (35.7), finite (``ValueError`` otherwise)."""
    tau = check_half_life(tau)
    return _finite_log2((float(t_n) - float(t_0)) / tau, "log2_ratio")


def distortion_ratio(t_n: float, t_0: float, tau: float) -> float:
    """``ρ = w(T, t_n)/w(T, t_0) = 2^((t_n − t_0)/τ)`` (independent of ``T``; 35.7);
    ``ValueError`` when it exceeds the float range (see :func:`log2_distortion_ratio`)."""
    return _ratio(log2_distortion_ratio(t_n, t_0, tau), "ratio")


def log2_chain_ratio(dates: Sequence[float], now: float, tau: float) -> float:
    """``Σ_i log2(w(T, t_i)/w(T, t_{i−1})) = Σ_i (e_{i−1} − e_i)/τ`` with ``e_i = max(T − t_i,
    0)`` along ``t_0, …, t_n`` (35.7: telescopes to :func:`log2_distortion_ratio` of the
    ends); 0 for a single date; finite (``ValueError`` otherwise)."""
    tau = check_half_life(tau)
    if not dates:
        raise ValueError("dates: expected at least the origin's date")
    e = np.maximum(float(now) - np.asarray(dates, dtype=np.float64), 0.0)
    if not np.all(np.isfinite(e)):
        raise ValueError("dates: expected finite times")
    return _finite_log2(float(np.sum((e[:-1] - e[1:]) / tau)) if len(e) > 1 else 0.0,
                        "log2_chain_ratio")


def chain_ratio(dates: Sequence[float], now: float, tau: float) -> float:
    """The product of the hop factors ``w(T, t_i)/w(T, t_{i−1})`` along ``t_0, …, t_n``
    (telescopes to :func:`distortion_ratio` of the ends; 35.7), summed as
    :func:`log2_chain_ratio`; 1 for a single date; ``ValueError`` beyond the float range."""
    return _ratio(log2_chain_ratio(dates, now, tau), "chain_ratio")


def log2_distortion_bound(t_0: float, now: float, tau: float) -> float:
    """``log2`` of the bound: ``max(T − t_0, 0)/τ`` (35.7), finite (``ValueError`` otherwise)."""
    tau = check_half_life(tau)
    return _finite_log2(max(float(now) - float(t_0), 0.0) / tau, "log2_bound")


def distortion_bound(t_0: float, now: float, tau: float) -> float:
    """``2^((T − t_0)/τ)``: the largest ``ρ`` a wrapper dated at most ``T`` can reach (35.7);
    ``ValueError`` beyond the float range (see :func:`log2_distortion_bound`)."""
    return _ratio(log2_distortion_bound(t_0, now, tau), "bound")
