"""Paired statistics over queries: win/loss/tie, bootstrap intervals, randomisation and
Wilcoxon tests, and :func:`compare`, which bundles them for one system against a baseline.

Chapter 35.1 asks for uncertainty next to every component metric, and 35.2 for paired
accounting (which queries changed, in which direction) rather than net averages alone; seed
004 reports per-query wins and losses and names the lack of significance tests as a limit.

Declared policies:

* pairing is by qid; the two inputs must hold the same qids (a mismatch raises), values
  must be finite (NaN or infinity raises);
* ``n = 0`` or ``n = 1``: no spread can be measured. Results are flagged ``defined=False``,
  the interval equals the point (``0.0`` when ``n = 0``) and the p-value is ``1.0``;
* a difference with ``|d| <= tie_tol`` is a tie and counts as an exact zero in the tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from credrank.core.validation import (
    check_choice,
    check_int,
    check_nonnegative,
    check_probability,
)
from credrank.evaluate.metrics import Direction

#: largest n whose 2**n sign patterns are enumerated exactly
EXACT_MAX_N = 16
#: cap on the size of one block of resampled indices (rows x n), to bound memory
_BLOCK_CELLS = 2_000_000

Values = Mapping[str, float] | Sequence[float] | np.ndarray
Seed = int | np.random.Generator
TestKind = Literal["randomization", "wilcoxon"]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile-bootstrap interval."""

    point: float
    low: float
    high: float
    n: int
    confidence: float
    defined: bool
    note: str = ""


@dataclass(frozen=True)
class PairedTest:
    """A two-sided paired test on differences ``d_i = system_i - baseline_i``."""

    statistic: float
    p_value: float
    method: str
    n: int
    defined: bool
    note: str = ""


@dataclass(frozen=True)
class WinLossTie:
    """Per-query outcome: ``per_query[qid]`` is +1 (win), -1 (loss) or 0 (tie)."""

    wins: int
    losses: int
    ties: int
    per_query: dict[str, int]


@dataclass(frozen=True)
class Comparison:
    """One system against a baseline on paired per-query values."""

    mean_base: float
    mean_sys: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    wins: int
    losses: int
    ties: int
    n: int
    test: str
    confidence: float
    defined: bool
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-serialisable) for reports."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


# ---------------------------------------------------------------- input handling


def _as_array(values: Values, name: str) -> np.ndarray:
    raw = list(values.values()) if isinstance(values, Mapping) else values
    try:
        arr = np.asarray(raw, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers; got {values!r}") from None
    if arr.size and not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: value at position {bad} is {arr[bad]!r}; expected finite")
    return arr


def paired_arrays(baseline: Mapping[str, float], system: Mapping[str, float]
                  ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Align two per-query mappings by qid (sorted); the qid sets must be equal."""
    for name, values in (("baseline", baseline), ("system", system)):
        if not isinstance(values, Mapping):
            raise ValueError(f"{name}: expected a mapping qid -> value; got "
                             f"{type(values).__name__}")
    only_base = sorted(set(baseline) - set(system))
    only_sys = sorted(set(system) - set(baseline))
    if only_base or only_sys:
        raise ValueError(
            "baseline/system: paired values need the same qids; only in baseline: "
            f"{only_base[:5]}{'...' if len(only_base) > 5 else ''} ({len(only_base)}), "
            f"only in system: {only_sys[:5]}{'...' if len(only_sys) > 5 else ''} "
            f"({len(only_sys)})")
    qids = sorted(baseline)
    base = np.empty(len(qids))
    sys_ = np.empty(len(qids))
    for i, q in enumerate(qids):
        for name, src, dst in (("baseline", baseline, base), ("system", system, sys_)):
            try:
                v = float(src[q])
            except (TypeError, ValueError):
                raise ValueError(f"{name}[{q!r}]: expected a number; got {src[q]!r}") from None
            if not math.isfinite(v):
                raise ValueError(f"{name}[{q!r}]: value {v!r} is not finite")
            dst[i] = v
    return qids, base, sys_


def _rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed: expected an int or numpy Generator; got {seed!r}")
    return np.random.default_rng(int(seed))


def _zero_ties(d: np.ndarray, tie_tol: float) -> np.ndarray:
    tie_tol = check_nonnegative("tie_tol", tie_tol)
    return np.where(np.abs(d) <= tie_tol, 0.0, d)


# ---------------------------------------------------------------- win / loss / tie


def win_loss_tie(baseline: Mapping[str, float], system: Mapping[str, float],
                 tie_tol: float = 1e-9, direction: Direction = "higher") -> WinLossTie:
    """Per-query wins, losses and ties of ``system`` over ``baseline`` (seed 004; chapter 35.2
    paired accounting).

    With ``d_q = system_q - baseline_q``: for a ``direction="higher"`` measure a win is
    ``d_q > tie_tol`` and a loss ``d_q < -tie_tol``; for ``"lower"`` (harmful@k; see
    :func:`~credrank.evaluate.metrics.measure_direction`) a win is a decrease. Tie otherwise.
    """
    check_choice("direction", direction, ("higher", "lower"))
    qids, base, sys_ = paired_arrays(baseline, system)
    d = _zero_ties(sys_ - base, tie_tol)
    sign = np.sign(d).astype(int) * (1 if direction == "higher" else -1)
    return WinLossTie(wins=int(np.sum(sign > 0)), losses=int(np.sum(sign < 0)),
                      ties=int(np.sum(sign == 0)),
                      per_query={q: int(s) for q, s in zip(qids, sign, strict=True)})


# ---------------------------------------------------------------- bootstrap


def _bootstrap_means(v: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    n = v.size
    rows = max(1, _BLOCK_CELLS // n)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, rows):
        stop = min(n_resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = v[idx].mean(axis=1)
    return out


def bootstrap_ci(values: Values, *, n_resamples: int = 10_000, confidence: float = 0.95,
                 seed: Seed = 0) -> Interval:
    """Percentile-bootstrap interval for the mean over queries (chapter 35.1: report
    uncertainty).

    ``B`` resamples of the ``n`` values drawn with replacement give means
    ``m*_b = (1/n) Σ_i v[I_bi]``; the interval is the ``(1-c)/2`` and ``(1+c)/2`` quantiles of
    ``m*``. Seeded: the same ``seed`` gives the same interval. ``n <= 1``: see module policy.
    """
    v = _as_array(values, "values")
    n_resamples = check_int("n_resamples", n_resamples, 1)
    confidence = check_probability("confidence", confidence, open_low=True, open_high=True)
    rng = _rng(seed)
    n = int(v.size)
    if n == 0:
        return Interval(0.0, 0.0, 0.0, 0, confidence, False,
                        "n = 0: no values; point and interval are placeholders (0.0)")
    point = float(v.mean())
    if n == 1:
        return Interval(point, point, point, 1, confidence, False,
                        "n = 1: no spread can be estimated; interval = point")
    means = _bootstrap_means(v, n_resamples, rng)
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(point, float(low), float(high), n, confidence, True)


def bootstrap_ci_diff(baseline: Mapping[str, float], system: Mapping[str, float], *,
                      n_resamples: int = 10_000, confidence: float = 0.95,
                      seed: Seed = 0) -> Interval:
    """Paired percentile-bootstrap interval for ``mean(system - baseline)``: queries are
    resampled as pairs, i.e. :func:`bootstrap_ci` on ``d_q = system_q - baseline_q``.
    """
    _, base, sys_ = paired_arrays(baseline, system)
    return bootstrap_ci(sys_ - base, n_resamples=n_resamples, confidence=confidence,
                        seed=seed)


# ---------------------------------------------------------------- tests


def randomization_test(differences: Values, *, n_resamples: int = 10_000, seed: Seed = 0,
                       exact_max_n: int = EXACT_MAX_N) -> PairedTest:
    """Two-sided paired randomisation (sign-flip) test of ``mean(d) = 0``.

    Under the null each ``d_i`` is equally likely to carry either sign. With
    ``T(s) = |Σ_i s_i d_i|``: ``p = #{s : T(s) >= T(1)} / 2^n`` over all ``2^n`` sign vectors
    when ``n <= exact_max_n`` (exact); otherwise Monte Carlo with ``B`` random sign vectors,
    ``p = (1 + #{b : T(s_b) >= T(1)}) / (1 + B)`` (never 0). Comparisons allow a relative
    float slack of 1e-12. ``n <= 1``: p = 1.0, ``defined=False``.
    """
    d = _as_array(differences, "differences")
    n_resamples = check_int("n_resamples", n_resamples, 1)
    n = int(d.size)
    if n <= 1:
        return PairedTest(float(d.mean()) if n else 0.0, 1.0, "randomization", n, False,
                          f"n = {n}: no test possible; p-value set to 1.0")
    observed = abs(float(d.sum()))
    slack = 1e-12 * max(1.0, float(np.abs(d).sum()))
    if n <= exact_max_n:
        patterns = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        signs = 1.0 - 2.0 * (patterns & 1)
        extreme = int(np.sum(np.abs(signs @ d) >= observed - slack))
        p = extreme / 2**n
        method = "randomization-exact"
    else:
        rng = _rng(seed)
        rows = max(1, _BLOCK_CELLS // n)
        extreme = 0
        for start in range(0, n_resamples, rows):
            stop = min(n_resamples, start + rows)
            signs = 1.0 - 2.0 * rng.integers(0, 2, size=(stop - start, n))
            extreme += int(np.sum(np.abs(signs @ d) >= observed - slack))
        p = (1 + extreme) / (1 + n_resamples)
        method = "randomization-montecarlo"
    return PairedTest(float(d.mean()), float(min(1.0, p)), method, n, True)


def wilcoxon_test(differences: Values) -> PairedTest:
    """Two-sided Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, zero differences
    dropped, ``zero_method='wilcox'``): ``W = Σ_{d_i>0} rank(|d_i|)``.

    Policies: ``n <= 1`` → p = 1.0, ``defined=False``; every difference zero → p = 1.0
    (nothing to rank; the exact sign-flip test gives 1.0 too), ``defined=True``.
    """
    d = _as_array(differences, "differences")
    n = int(d.size)
    nonzero = d[d != 0.0]
    if n <= 1:
        return PairedTest(0.0, 1.0, "wilcoxon", n, False,
                          f"n = {n}: no test possible; p-value set to 1.0")
    if nonzero.size == 0:
        return PairedTest(0.0, 1.0, "wilcoxon", n, True,
                          "all differences are ties: no evidence of a difference, p = 1.0")
    # imported here: scipy.stats takes ≈ 0.5 s to import, and every process that imports this
    # module (`credrank audit`, the experiments of `credrank bench`) paid it before it needed a
    # test
    from scipy.stats import wilcoxon

    res = wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided")
    stat, p = float(res.statistic), float(res.pvalue)
    if not (math.isfinite(stat) and math.isfinite(p)):
        return PairedTest(0.0, 1.0, "wilcoxon", n, False,
                          "scipy returned a non-finite result; p-value set to 1.0")
    return PairedTest(stat, min(1.0, p), "wilcoxon", n, True)


# ---------------------------------------------------------------- compare


def compare(baseline: Mapping[str, float], system: Mapping[str, float], *,
            test: TestKind = "randomization", tie_tol: float = 1e-9,
            n_resamples: int = 10_000, confidence: float = 0.95,
            seed: Seed = 0, direction: Direction = "higher") -> Comparison:
    """One system against the baseline on paired per-query values (seed 004 evaluation;
    chapter 35.1 uncertainty, 35.2 paired accounting).

    ``diff = mean(system) - mean(baseline) = mean(d)``; ``[ci_low, ci_high]`` is the paired
    percentile bootstrap of ``mean(d)`` (:func:`bootstrap_ci_diff`); ``p_value`` is the
    two-sided :func:`randomization_test` (default) or :func:`wilcoxon_test`; wins, losses
    and ties as in :func:`win_loss_tie` with the measure's ``direction`` (a win is an
    improvement). Policies for ``n <= 1`` are the module's. ``diff`` is always the raw
    difference: for a lower-is-better measure (harmful@k) a negative ``diff`` is the
    improvement.
    """
    if test not in ("randomization", "wilcoxon"):
        raise ValueError(f"test: expected 'randomization' or 'wilcoxon'; got {test!r}")
    qids, base, sys_ = paired_arrays(baseline, system)
    wlt = win_loss_tie(baseline, system, tie_tol, direction)
    d = _zero_ties(sys_ - base, tie_tol)
    n = len(qids)
    ci = bootstrap_ci(sys_ - base, n_resamples=n_resamples, confidence=confidence, seed=seed)
    if test == "randomization":
        result = randomization_test(d, n_resamples=n_resamples, seed=seed)
    else:
        result = wilcoxon_test(d)
    notes = tuple(note for note in (ci.note, result.note) if note)
    mean_base = float(base.mean()) if n else 0.0
    mean_sys = float(sys_.mean()) if n else 0.0
    return Comparison(mean_base=mean_base, mean_sys=mean_sys, diff=ci.point,
                      ci_low=ci.low, ci_high=ci.high, p_value=result.p_value,
                      wins=wlt.wins, losses=wlt.losses, ties=wlt.ties, n=n,
                      test=result.method, confidence=ci.confidence,
                      defined=ci.defined and result.defined, notes=notes)


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (95% at the default
    ``z``); ``(0, 1)`` when ``n = 0`` (declared: no observation, no information)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
