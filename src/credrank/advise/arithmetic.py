"""The chapter's numbers as pure functions: CrAM's attention arithmetic (35.5) and the cost
arithmetic of the feasibility check (35.6, with RA-RAG's offline cost of 35.3).

**Attention reweighting (35.5).** For one selected head ``h`` and query-token row ``i`` with
normalised post-softmax attention ``α_j ≥ 0`` on the allowed key positions and prepared token
multipliers ``c_j ∈ [0, 1]`` (non-document tokens get ``c_j = 1``)::

    α'_j = c_j · α_j / Z,        Z = Σ_{k allowed} c_k · α_k

* full-row share of a document D = ``Σ_{j ∈ D} α'_j`` (its share of the whole row);
* conditional share of A among a set M = ``c_A·α_A / Σ_{m ∈ M} c_m·α_m`` (not A's total share);
* odds A:B = ``c_A·α_A : c_B·α_B``.

The chapter's toy: A = 0.30 × 0.8, B = 0.20 × 0.1, the rest 0.50 × 1 → scaled 0.24, 0.02,
0.50, ``Z = 0.76``; full-row shares 0.24/0.76 ≈ 31.578947% and 0.02/0.76 ≈ 2.631579%; A among
A and B 0.24/0.26 = 12/13 ≈ 92.307692% (60% before); odds 12:1.

Declared zero-denominator policy (``Z = 0``, every allowed mass scaled to zero): the original
row is kept unchanged and the result is flagged ``fallback=True`` for escalation — never NaN
(35.5: "use an explicitly chosen safe fallback, such as preserving the original valid row and
escalating"). A conditional share or odds with a zero denominator raises :class:`ValueError`.

**Head fractions (35.5).** ``layers × heads_per_layer`` heads (32 × 32 = 1,024); selecting
``n`` of them changes ``n / heads`` of the heads (100–300 of 1,024 = 9.765625%–29.296875%;
70.703125%–90.234375% unselected). This counts heads, not FLOPs, parameters or behaviour.

**Calibration cost (35.6).** CrAM ranks heads with one head-modified pass per calibration
example and head: ``passes = examples × heads`` (100 × 1,024 = 102,400); reusing one unmodified
baseline pass per example adds ``examples`` (102,500). Serial service time = ``passes ×
seconds_per_pass`` (50 ms: 5,120 s = 85.333333 min; 5,125 s = 85.416667 min with baselines).
The seconds are those of one *single-example* pass; a batched-pass time must not be combined
with a single-example pass count. RA-RAG (35.3, 35.6) needs up to ``sources × questions``
calibration source-query answers (1,000 × 200 = 200,000) before scoring or iteration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "ReweightedRow",
    "conditional_share",
    "cram_calibration_passes",
    "cram_calibration_seconds",
    "head_count",
    "head_fraction",
    "odds",
    "ra_rag_calibration_answers",
    "reweight_row",
    "unselected_head_fraction",
]


def _check_nonnegative(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a finite number ≥ 0, got {value!r}")
    return float(value)


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name}: expected an integer ≥ 0, got {value!r}")
    return value


def _scaled(masses: Sequence[float], multipliers: Sequence[float]) -> list[float]:
    if len(masses) != len(multipliers):
        raise ValueError(f"masses and multipliers: expected equal lengths, got {len(masses)} "
                         f"and {len(multipliers)}")
    if not masses:
        raise ValueError("masses: expected at least one allowed position")
    out = []
    for j, (alpha, c) in enumerate(zip(masses, multipliers, strict=True)):
        alpha = _check_nonnegative(f"masses[{j}]", alpha)
        c = _check_nonnegative(f"multipliers[{j}]", c)
        out.append(c * alpha)
    total = sum(float(a) for a in masses)
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ValueError(f"masses: a normalised attention row sums to 1, got {total!r}")
    return out


@dataclass(frozen=True)
class ReweightedRow:
    """One query-token row after CrAM's reweighting (35.5).

    ``shares[j] = c_j·α_j / Z`` (full-row shares, summing to 1), ``denominator`` = ``Z``;
    ``fallback`` is true when ``Z = 0`` and the original row was kept (escalate)."""

    shares: tuple[float, ...]
    denominator: float
    fallback: bool


def reweight_row(masses: Sequence[float], multipliers: Sequence[float]) -> ReweightedRow:
    """``α'_j = c_j·α_j / Σ_k c_k·α_k`` over the allowed positions of one row (35.5).

    ``masses`` is the normalised post-softmax row (nonnegative, summing to 1; masked positions
    are simply not listed), ``multipliers`` the prepared ``c_j ≥ 0``. ``Z = 0`` keeps the
    original row and sets ``fallback`` (the declared policy of the module docstring).

    >>> [round(100 * s, 6) for s in reweight_row([0.30, 0.20, 0.50], [0.8, 0.1, 1.0]).shares]
    [31.578947, 2.631579, 65.789474]
    """
    scaled = _scaled(masses, multipliers)
    z = sum(scaled)
    if z == 0.0:
        return ReweightedRow(tuple(float(a) for a in masses), 0.0, True)
    return ReweightedRow(tuple(s / z for s in scaled), z, False)


def conditional_share(masses: Sequence[float], multipliers: Sequence[float], of: int,
                      among: Sequence[int]) -> float:
    """A document's share among a subset ``M`` after scaling (35.5):
    ``c_of·α_of / Σ_{m ∈ M} c_m·α_m`` — e.g. A among A and B, 0.24/0.26 ≈ 92.307692%. It is not
    the document's total (full-row) share. Raises :class:`ValueError` when the subset's scaled
    mass is zero or ``of`` is not in ``among``."""
    scaled = _scaled(masses, multipliers)
    if of not in among:
        raise ValueError(f"of: position {of} is not among {list(among)}")
    for m in among:
        if not 0 <= m < len(scaled):
            raise ValueError(f"among: position {m} is outside the row of {len(scaled)}")
    denominator = sum(scaled[m] for m in set(among))
    if denominator == 0.0:
        raise ValueError("conditional share: the subset's scaled mass is zero (undefined)")
    return scaled[of] / denominator


def odds(mass_a: float, multiplier_a: float, mass_b: float, multiplier_b: float) -> Fraction:
    """The A:B odds after scaling, ``c_A·α_A : c_B·α_B``, as an exact ratio of the printed
    decimals (35.5): ``odds(0.30, 0.8, 0.20, 0.1) == Fraction(12, 1)``, i.e. 12:1. Each
    number is read through its shortest decimal form (``repr``), so 0.30 × 0.8 is exactly 6/25.
    Raises :class:`ValueError` when B's scaled mass is zero."""
    values = [_check_nonnegative(name, v) for name, v in
              (("mass_a", mass_a), ("multiplier_a", multiplier_a),
               ("mass_b", mass_b), ("multiplier_b", multiplier_b))]
    a_m, a_c, b_m, b_c = (Fraction(repr(v)) for v in values)
    if b_m * b_c == 0:
        raise ValueError("odds: B's scaled mass is zero (undefined)")
    return (a_m * a_c) / (b_m * b_c)


def head_count(layers: int, heads_per_layer: int) -> int:
    """Attention heads of a model: ``layers × heads_per_layer`` (32 × 32 = 1,024; 35.5)."""
    return _check_count("layers", layers) * _check_count("heads_per_layer", heads_per_layer)


def head_fraction(selected: int, heads: int) -> float:
    """The fraction of heads a selection changes, ``selected / heads`` (35.5): 100/1,024 =
    9.765625%, 300/1,024 = 29.296875%. Counts heads, not FLOPs or behaviour."""
    selected, heads = _check_count("selected", selected), _check_count("heads", heads)
    if heads == 0:
        raise ValueError("heads: expected at least one head")
    if selected > heads:
        raise ValueError(f"selected: expected at most heads = {heads}, got {selected}")
    return selected / heads


def unselected_head_fraction(selected: int, heads: int) -> float:
    """``1 − selected / heads`` (35.5): 300 of 1,024 leave 70.703125% unselected, 100 leave
    90.234375%."""
    head_fraction(selected, heads)  # validates
    return (heads - selected) / heads


def cram_calibration_passes(examples: int, heads: int, baselines: bool = False) -> int:
    """CrAM head-ranking forward passes (35.6): ``examples × heads`` head-modified passes
    (100 × 1,024 = 102,400), plus ``examples`` unmodified baseline passes when ``baselines``
    (one reused per example: 102,500). Validation, head-count search and scoring are not
    counted."""
    examples, heads = _check_count("examples", examples), _check_count("heads", heads)
    return examples * heads + (examples if baselines else 0)


def cram_calibration_seconds(passes: int, seconds_per_pass: float) -> float:
    """Serial service time ``passes × seconds_per_pass`` (35.6): 102,400 × 0.05 s = 5,120 s;
    102,500 × 0.05 s = 5,125 s. ``seconds_per_pass`` is a stipulated single-example pass time,
    not a hardware benchmark; never pair it with a batched pass count."""
    passes = _check_count("passes", passes)
    seconds = _check_nonnegative("seconds_per_pass", seconds_per_pass)
    return passes * seconds


def ra_rag_calibration_answers(sources: int, questions: int) -> int:
    """RA-RAG's offline calibration answers, up to ``S × Q`` source-query answers (35.3,
    35.6): 1,000 sources × 200 questions = 200,000, before scoring and iteration (cached
    answers are reused across weight iterations, not multiplied by them)."""
    return _check_count("sources", sources) * _check_count("questions", questions)
