"""Fair exposure: the rectangular ranking LP and its group constraints (chapter 35.9).

For ``N`` candidates and ``K ≤ N`` displayed positions, ``P[d, k]`` is the probability that
document ``d`` occupies position ``k``; ``v(k) ≥ 0`` are non-increasing attention discounts.

* exposure ``e_d = Σ_{k≤K} P[d, k]·v(k)``; group average ``E_G = |G|⁻¹ Σ_{d∈G} e_d``
  (group *total* exposure is ``|G|·E_G``, a different quantity);
* feasible ranking policies: ``P ≥ 0``, every column sums to 1, every row sums to at most 1,
  so the total exposure handed out is always ``V = Σ_k v(k)``;
* the LP maximises the expected utility ``Σ_d u(d)·e_d`` under those constraints plus one
  declared rule:
  - ``"parity"`` (demographic parity): ``E_G`` equal for every group (hence ``V/N`` each);
  - ``"proportional"`` (utility-proportional, the paper's "disparate treatment"):
    ``E_G / ū_G`` equal for every group (hence ``E_G = t·ū_G`` with ``t = V / Σ_d u(d)``).
    **Zero-division policy:** utilities must be ``≥ 0`` and every group's average utility
    ``ū_G > 0`` ("for nonempty groups with positive average utility"); a group of zero
    utilities raises ``ValueError`` naming it (no merit ratio is defined there);
  - ``"targets"``: explicit average exposures per group, ``E_G = target_G``;
  - ``None``: no group constraint (the hard top-K ranking is an optimum).
* :func:`check_exposure_targets` says whether targets can be met at all, and which one
  cannot and why: total mass must equal ``V`` and the per-document target vector (uniform
  inside each group) must be majorised by ``(v(1), …, v(K), 0, …, 0)`` — the exact condition
  for ``e = P̄ v`` with ``P̄`` doubly stochastic (Hardy–Littlewood–Pólya).
* :func:`complete_square` adds the ``N − K`` unshown, zero-attention columns, each entry
  ``(1 − Σ_{k≤K} P[d, k]) / (N − K)``, giving the square doubly stochastic matrix that
  Birkhoff–von Neumann decomposes (:mod:`credrank.select.bvn`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.validation import (
    as_matrix,
    as_vector,
    check_bounds,
    check_choice,
    check_int,
    check_real,
)

RULES = ("parity", "proportional", "targets")


class ExposureInfeasible(ValueError):
    """The requested exposure targets lie outside the ranking polytope."""


# --------------------------------------------------------------------------------------------
# discounts, groups, exposure
# --------------------------------------------------------------------------------------------
def log_discounts(k: int) -> np.ndarray:
    """``v(k) = 1 / log2(1 + k)`` for ``k = 1..K`` (the NDCG-like default; chapter 35.8/35.9)."""
    k = check_int("k", k, 1)
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def check_discounts(discounts: Sequence[float] | np.ndarray) -> np.ndarray:
    """Validate ``v``: at least one finite value, all ``≥ 0``, non-increasing (chapter 35.9),
    with a finite sum (the exposures and utilities it weighs must not overflow)."""
    v = as_vector("discounts", discounts, min_len=1, low=0.0)
    with np.errstate(over="ignore"):
        total = float(v.sum())
    if not np.isfinite(total):
        raise ValueError(f"discounts: expected values with a finite sum, got {len(v)} values "
                         f"summing to {total} (the largest is {float(v.max()):g})")
    if np.any(np.diff(v) > 0):
        k = int(np.flatnonzero(np.diff(v) > 0)[0])
        raise ValueError(f"discounts: expected non-increasing values, but v({k + 2}) = "
                         f"{float(v[k + 1]):g} > v({k + 1}) = {float(v[k]):g}")
    return v


def group_codes(groups: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer code per candidate and the group names (``str`` of each label, sorted).

    ``None`` labels raise ``ValueError``: give missing groups an explicit name first.
    """
    labels = list(groups)
    for i, g in enumerate(labels):
        if g is None:
            raise ValueError(f"groups: row {i} has no group (None); name missing groups "
                             "explicitly")
    names, codes = np.unique(np.array([str(g) for g in labels], dtype=object).astype(str),
                             return_inverse=True)
    return codes.astype(np.int64), tuple(str(n) for n in names)


def exposures(p: np.ndarray, discounts: np.ndarray) -> np.ndarray:
    """``e_d = Σ_{k≤K} P[d, k]·v(k)`` (chapter 35.9)."""
    pm = as_matrix("P", p)
    v = as_vector("discounts", discounts)
    if pm.shape[1] != len(v):
        raise ValueError(f"P has {pm.shape[1]} columns; expected one per discount ({len(v)})")
    return pm @ v


def group_means(values: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """A group's mean of chapter 35.9, ``|G|⁻¹ Σ_{d∈G} values[d]`` per group (every group
    non-empty by construction)."""
    sizes = np.bincount(codes, minlength=n_groups).astype(np.float64)
    return np.bincount(codes, weights=values, minlength=n_groups) / sizes


def hard_ranking(utilities: np.ndarray, k: int) -> np.ndarray:
    """The deterministic top-K ranking of chapter 35.9 as an ``N × K`` 0/1 matrix (ties by row
    order): the policy the exposure LP is compared with."""
    u = as_vector("utilities", utilities)
    k = check_int("k", k, 1)
    if k > len(u):
        raise ValueError(f"k: expected at most the number of candidates ({len(u)}), got {k}")
    p = np.zeros((len(u), k))
    p[np.argsort(-u, kind="stable")[:k], np.arange(k)] = 1.0
    return p


# --------------------------------------------------------------------------------------------
# targets and feasibility
# --------------------------------------------------------------------------------------------
def exposure_targets(utilities: np.ndarray, groups: Sequence[Any] | np.ndarray,
                     discounts: np.ndarray, rule: str) -> dict[str, float]:
    """Average exposure per group that a rule implies, given ``V = Σ_k v(k)`` (chapter 35.9).

    * ``parity``: ``E_G = V / N`` for every group;
    * ``proportional``: ``E_G = t·ū_G`` with ``t = V / Σ_d u(d)`` (mass conservation
      ``Σ_G |G|·t·ū_G = V``); utilities ``≥ 0`` and every ``ū_G > 0`` (declared
      zero-division policy: a group of zero utilities raises ``ValueError`` naming it). The
      ratio ``ū_G / Σ u`` is computed on ``u / max u`` (the same value), so that utilities of
      any scale give finite targets.
    """
    u = as_vector("utilities", utilities, min_len=1)
    v = check_discounts(discounts)
    codes, names = group_codes(groups)
    if len(codes) != len(u):
        raise ValueError(f"groups: expected {len(u)} labels (one per candidate), got {len(codes)}")
    total = float(v.sum())
    check_choice("rule", rule, ("parity", "proportional"))
    if rule == "parity":
        return {name: total / len(u) for name in names}
    check_bounds("utilities", u, 0.0,
                 why="the proportional rule's exposure is proportional to utility")
    un = u / u.max() if u.max() > 0 else u
    means = group_means(un, codes, len(names))
    if np.any(means <= 0):
        g = int(np.flatnonzero(means <= 0)[0])
        raise ValueError(f"utilities: the proportional rule divides by each group's average "
                         f"utility, but group {names[g]!r} has average utility 0 (all of its "
                         f"{int(np.sum(codes == g))} utilities are 0); use rule='parity'")
    t = total / float(un.sum())
    return {name: t * float(means[g]) for g, name in enumerate(names)}


@dataclass(frozen=True)
class FeasibilityReport:
    """Whether per-group average exposure targets can be met by some ranking policy.

    Attributes:
        feasible: all targets can be met simultaneously.
        problems: one sentence per unmet condition, naming the target and the reason.
        total_target: ``Σ_G |G|·E_G``.
        total_available: ``V = Σ_k v(k)``.
    """

    feasible: bool
    problems: tuple[str, ...]
    total_target: float
    total_available: float

    def as_info(self) -> dict[str, Any]:
        return {"feasible": self.feasible, "problems": list(self.problems),
                "total_target": self.total_target, "total_available": self.total_available}


def check_exposure_targets(groups: Sequence[Any] | np.ndarray, targets: Mapping[str, float],
                           discounts: np.ndarray, *, tol: float = 1e-9) -> FeasibilityReport:
    """Feasibility of average-exposure targets ``E_G`` (chapter 35.9).

    Conditions (necessary and sufficient): every target ``≥ 0``; total mass
    ``Σ_G |G|·E_G = V`` (every policy hands out exactly ``V``; renormalising totals cannot
    fix a target outside the polytope); and, with each document given its group's target,
    for every ``m`` the ``m`` largest targets sum to at most ``v(1)+…+v(min(m, K))`` (a
    single document can never get more than ``v(1)``, two more than ``v(1)+v(2)``, …).
    """
    v = check_discounts(discounts)
    codes, names = group_codes(groups)
    n, k = len(codes), len(v)
    if k > n:
        raise ValueError(f"discounts: {k} positions but only {n} candidates; expected K <= N")
    missing = [g for g in names if g not in targets]
    if missing:
        raise ValueError(f"targets: no target for group(s) {missing}; expected one per group")
    t = np.array([check_real(f"targets[{g!r}]", targets[g]) for g in names])
    sizes = np.bincount(codes, minlength=len(names))
    problems: list[str] = []
    for g, name in enumerate(names):
        if t[g] < -tol:
            problems.append(f"group {name!r}: target {t[g]:.6g} is negative; exposure never is")
    total = float(sizes @ t)
    avail = float(v.sum())
    if abs(total - avail) > tol * max(1.0, avail):
        problems.append(
            f"total target exposure Σ|G|·E_G = {total:.6g} but every ranking hands out exactly "
            f"V = Σv(k) = {avail:.6g}; the targets must be rescaled to that mass")
    per_doc = np.sort(np.repeat(t, sizes))[::-1]
    supply = np.concatenate([np.cumsum(v), np.full(n - k, avail)])
    excess = np.cumsum(per_doc) - supply
    if np.any(excess > tol * max(1.0, avail)):
        m = int(np.flatnonzero(excess > tol * max(1.0, avail))[0]) + 1
        order = np.argsort(-t, kind="stable")
        need, cum = m, []
        for g in order:
            if need == 0:
                break
            take = min(int(sizes[g]), need)
            cum.append(f"{take} of group {names[g]!r} at {t[g]:.6g}")
            need -= take
        if m == 1:
            problems.append(
                f"group {names[order[0]]!r}: average target {t[order[0]]:.6g} per document "
                f"exceeds v(1) = {v[0]:.6g}, the most one document can receive per request")
        else:
            problems.append(
                f"the {m} documents with the highest targets ({'; '.join(cum)}) need "
                f"{np.cumsum(per_doc)[m - 1]:.6g} of attention per request, but the best {m} "
                f"positions supply at most {supply[m - 1]:.6g}")
    return FeasibilityReport(feasible=not problems, problems=tuple(problems),
                             total_target=total, total_available=avail)


# --------------------------------------------------------------------------------------------
# the LP
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExposurePolicy:
    """Solution of the exposure LP (chapter 35.9).

    Attributes:
        P: ``N × K`` marginal rank matrix.
        discounts: ``v(1..K)``.
        exposure: ``e_d`` per document.
        group_names: groups in code order; ``codes`` maps each document to its group.
        group_exposure: ``E_G`` achieved by ``P``.
        targets: ``E_G`` the rule asks for (empty when no rule).
        expected_utility: ``Σ_d u(d)·e_d``.
        hard_utility: the same for the unconstrained top-K ranking (the utility the rule costs).
        rule: the rule applied, or ``None``.
        status: the solver message.
    """

    P: np.ndarray
    discounts: np.ndarray
    exposure: np.ndarray
    codes: np.ndarray
    group_names: tuple[str, ...]
    group_exposure: np.ndarray
    targets: dict[str, float]
    expected_utility: float
    hard_utility: float
    rule: str | None
    status: str
    hard_group_exposure: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def as_info(self) -> dict[str, Any]:
        """JSON-serialisable summary (per group: target, expected, hard-ranking exposure)."""
        return {
            "rule": self.rule,
            "discounts": [float(x) for x in self.discounts],
            "expected_utility": self.expected_utility,
            "hard_ranking_utility": self.hard_utility,
            "groups": {
                name: {"size": int(np.sum(self.codes == g)),
                       "target": self.targets.get(name),
                       "expected": float(self.group_exposure[g]),
                       "hard_ranking": float(self.hard_group_exposure[g])
                       if len(self.hard_group_exposure) else None}
                for g, name in enumerate(self.group_names)},
            "status": self.status,
        }


def _clean(p: np.ndarray) -> np.ndarray:
    """Remove solver round-off: clip to [0, 1] and drop entries below 1e-12."""
    p = np.clip(p, 0.0, 1.0)
    p[p < 1e-12] = 0.0
    return p


def _candidate_rows(u: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """Rows that can carry display mass in some optimum: each group's ``K`` best (stable)."""
    order = np.lexsort((np.arange(len(u)), -u, codes))
    sorted_codes = codes[order]
    first = np.searchsorted(sorted_codes, sorted_codes, side="left")
    rank = np.arange(len(u)) - first
    return np.sort(order[rank < k])


def exposure_lp(utilities: np.ndarray, groups: Sequence[Any] | np.ndarray,
                discounts: np.ndarray, *, rule: str | None = "parity",
                targets: Mapping[str, float] | None = None,
                reduce: bool = True) -> ExposurePolicy:
    """``max_P Σ_d u(d)·Σ_k P[d,k] v(k)`` over ranking policies with a group rule (35.9).

    Constraints: ``P ≥ 0``; ``Σ_d P[d, k] = 1`` for each displayed position; ``Σ_k P[d, k] ≤ 1``
    for each document; and the rule's linear group equalities (see the module docstring),
    written relative to the first group: ``w_G·Σ_{d∈G} e_d − w_{G0}·Σ_{d∈G0} e_d = 0`` with
    ``w_G = 1/|G|`` (parity) or ``1/(|G|·ū_G)`` (proportional), or ``E_G = target_G``.
    ``K = len(discounts)`` must not exceed ``N``. The constraint matrix is sparse (HiGHS via
    ``scipy.optimize.linprog``). Targets are checked first with
    :func:`check_exposure_targets`; unmeetable ones raise :class:`ExposureInfeasible` naming
    the target and the reason.

    Exact size reduction (``reduce=True``): every constraint treats the documents of one
    group alike, so moving display mass from a document to a better one of the same group
    with row slack keeps feasibility and never lowers the objective; as a group holds at most
    ``K`` units of mass, some optimum uses only each group's ``K`` highest-utility documents.
    The LP is solved on those rows (at most ``K·#groups``) and the others get ``P = 0``.
    ``reduce=False`` solves the full ``N × K`` program (same optimal value).
    """
    from scipy import sparse
    from scipy.optimize import linprog
    u = as_vector("utilities", utilities, min_len=1)
    v = check_discounts(discounts)
    codes, names = group_codes(groups)
    n, k, n_groups = len(u), len(v), len(names)
    if len(codes) != n:
        raise ValueError(f"groups: expected {n} labels (one per candidate), got {len(codes)}")
    if k > n:
        raise ValueError(f"discounts: {k} displayed positions but only {n} candidates; "
                         "expected K <= N")
    sizes = np.bincount(codes, minlength=n_groups).astype(np.float64)
    check_choice("rule", rule, (*RULES, None))
    goal: dict[str, float] = {}
    if rule is None:
        if targets is not None:
            raise ValueError("targets: only used with rule='targets'")
    elif rule in ("parity", "proportional"):
        if targets is not None:
            raise ValueError("targets: only used with rule='targets'")
        goal = exposure_targets(u, groups, v, rule)
    elif rule == "targets":
        if targets is None:
            raise ValueError("targets: rule='targets' needs a mapping group -> average exposure")
        goal = {str(g): check_real(f"targets[{g!r}]", x) for g, x in targets.items()}
        unknown = sorted(set(goal) - set(names))
        if unknown:
            raise ValueError(f"targets: group(s) {unknown} do not occur among the candidates "
                             f"(groups: {list(names)})")
    if goal:
        report = check_exposure_targets([names[c] for c in codes], goal, v)
        if not report.feasible:
            raise ExposureInfeasible("exposure targets cannot be met: "
                                     + " | ".join(report.problems))

    keep = _candidate_rows(u, codes, k) if reduce else np.arange(n)
    # the program on utilities and discounts scaled to at most 1 in magnitude: its optimum is
    # the same policy (the objective is linear in u and v, the group equalities homogeneous
    # in v, a target scaled alike), and HiGHS finds it whatever their scale (utilities of
    # 1e100 left it "Unknown"; discounts of 1e-9 fell under its feasibility tolerance and
    # the group equalities were "met" 21 % off)
    scale = float(np.max(np.abs(u)))
    un = u / scale if scale > 0 else u
    v_scale = float(v.max())
    v = v / v_scale if v_scale > 0 else v
    uk, ck = un[keep], codes[keep]
    nr = len(keep)
    nv = nr * k
    cost = -np.outer(uk, v).ravel()  # variable r*K + k for kept row r
    r_idx = np.repeat(np.arange(nr), k)
    k_idx = np.tile(np.arange(k), nr)
    # column sums = 1
    a_eq_parts = [sparse.csr_matrix((np.ones(nv), (k_idx, np.arange(nv))), shape=(k, nv))]
    b_eq_parts = [np.ones(k)]
    if rule in ("parity", "proportional") and n_groups > 1:
        # group weights use the full groups (|G| and ū_G over every candidate)
        if rule == "parity":
            w = 1.0 / sizes
        else:
            w = 1.0 / (sizes * group_means(un, codes, n_groups))
        ref = ck == 0
        rows, cols, vals = [], [], []
        for g in range(1, n_groups):
            members = np.flatnonzero((ck == g) | ref)
            sign = np.where(ck[members] == g, 1.0, -1.0)
            rows.append(np.full(len(members) * k, g - 1))
            cols.append((members[:, None] * k + np.arange(k)[None, :]).ravel())
            vals.append(((sign * w[ck[members]])[:, None] * v[None, :]).ravel())
        a_eq_parts.append(sparse.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(n_groups - 1, nv)))
        b_eq_parts.append(np.zeros(n_groups - 1))
    elif rule == "targets":
        gs = [g for g, name in enumerate(names) if name in goal]
        group_rows = [np.flatnonzero(ck == g) for g in gs]
        t_rows = np.concatenate([np.full(len(m) * k, r) for r, m in enumerate(group_rows)])
        t_cols = np.concatenate([(m[:, None] * k + np.arange(k)[None, :]).ravel()
                                 for m in group_rows])
        t_vals = np.concatenate([np.tile(v / sizes[g], len(m))
                                 for g, m in zip(gs, group_rows, strict=True)])
        a_eq_parts.append(sparse.csr_matrix((t_vals, (t_rows, t_cols)), shape=(len(gs), nv)))
        b_eq_parts.append(np.array([goal[names[g]] for g in gs]) / (v_scale or 1.0))
    a_ub = sparse.csr_matrix((np.ones(nv), (r_idx, np.arange(nv))), shape=(nr, nv))
    res = linprog(cost, A_ub=a_ub, b_ub=np.ones(nr), A_eq=sparse.vstack(a_eq_parts).tocsr(),
                  b_eq=np.concatenate(b_eq_parts), bounds=(0.0, 1.0), method="highs")
    if res.status != 0 or res.x is None:
        raise ExposureInfeasible(f"exposure LP ({rule}): HiGHS found no optimum: {res.message}")
    p = np.zeros((n, k))
    p[keep] = _clean(res.x.reshape(nr, k))
    v = v * v_scale if v_scale > 0 else v
    e = p @ v
    _check_met(group_means(e, codes, n_groups), names, goal, v, rule)
    hard = hard_ranking(u, k) @ v
    return ExposurePolicy(
        P=p, discounts=v, exposure=e, codes=codes, group_names=names,
        group_exposure=group_means(e, codes, n_groups), targets=goal,
        expected_utility=float(u @ e), hard_utility=float(u @ hard), rule=rule,
        status=str(res.message), hard_group_exposure=group_means(hard, codes, n_groups))


#: how far (a share of the first discount) a solved group exposure may lie from its target
TARGET_TOLERANCE = 1e-6


def _check_met(group_exposure: np.ndarray, names: Sequence[str], goal: Mapping[str, float],
               v: np.ndarray, rule: str | None) -> None:
    """:class:`ExposureInfeasible` when the solver's policy misses a group's target by more
    than :data:`TARGET_TOLERANCE` × ``v(1)``: a policy is returned only if it meets the rule
    it was asked for (the solver's "Optimal" is within its own tolerance, not ours)."""
    tol = TARGET_TOLERANCE * max(float(v.max()), np.finfo(float).tiny)
    misses = {name: (float(got), float(goal[name]))
              for name, got in zip(names, group_exposure, strict=True)
              if name in goal and abs(float(got) - float(goal[name])) > tol}
    if misses:
        said = "; ".join(f"{g!r}: {got:.6g} against {want:.6g}"
                         for g, (got, want) in misses.items())
        raise ExposureInfeasible(f"exposure LP ({rule}): the solved policy misses the group "
                                 f"targets beyond {TARGET_TOLERANCE:g} of v(1): {said}")


def check_ranking_policy(p: np.ndarray, *, tol: float = 1e-9) -> None:
    """Raise ``ValueError`` unless ``P ≥ 0``, columns sum to 1 and rows sum to ≤ 1 (35.9)."""
    pm = as_matrix("P", p)
    n, k = pm.shape
    if k > n:
        raise ValueError(f"P: {k} positions but {n} documents; expected K <= N")
    if pm.size and pm.min() < -tol:
        raise ValueError(f"P: expected non-negative entries, got {pm.min():.6g}")
    cols = pm.sum(axis=0)
    if np.any(np.abs(cols - 1.0) > tol):
        j = int(np.argmax(np.abs(cols - 1.0)))
        raise ValueError(f"P: column {j} sums to {cols[j]:.12g}; expected 1 (one document per "
                         "displayed position)")
    rows = pm.sum(axis=1)
    if np.any(rows > 1.0 + tol):
        i = int(np.argmax(rows))
        raise ValueError(f"P: row {i} sums to {rows[i]:.12g}; expected at most 1")


def complete_square(p: np.ndarray, *, tol: float = 1e-9) -> np.ndarray:
    """Square doubly stochastic completion of a rectangular ranking policy (chapter 35.9).

    Appends ``N − K`` unshown, zero-attention columns with every entry
    ``(1 − Σ_{k≤K} P[d, k]) / (N − K)``; each extra column then sums to
    ``(N − Σ_{d,k} P[d,k]) / (N − K) = 1`` and each row to 1. When ``K = N`` the constraints
    already force unit row sums and ``P`` is returned unchanged (a copy).
    """
    pm = as_matrix("P", p)
    check_ranking_policy(pm, tol=tol)
    n, k = pm.shape
    if k == n:
        return pm.copy()
    slack = np.clip(1.0 - pm.sum(axis=1), 0.0, 1.0)
    return np.hstack([pm, np.repeat((slack / (n - k))[:, None], n - k, axis=1)])
