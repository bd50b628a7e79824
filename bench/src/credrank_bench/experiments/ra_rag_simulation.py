"""Simulated calibration answers, following the RA-RAG protocol (chapter 35.3).

Each honest source has a reliability ``r_s ~ Beta(2q/(1−q), 2)`` (mean ``q``); on each
question it abstains with probability ``abstain``, else answers the truth with probability
``r_s`` and otherwise one of ``n_wrong`` wrong answers uniformly. Class ids are shuffled per
question, so the tie rule (lowest id) favours no particular answer. Adversarial variants add
sources of reliability 0.1:

* ``adversarial``: ``n_adv`` independent 0.1-sources (random wrong answers);
* ``copies``: ``n_copies`` identical identities replaying **one** 0.1-source's answer sheet,
  whose wrong answer is always the same designated wrong class (a Sybil attack).

:func:`run_simulation` reports the correlation of estimated and true reliability, and the
vote accuracy of plain majority, IWMV (paper weights), IWMV with clipped weights, IWMV after
collapsing detected copies, and oracle weights ``v_s = S·r_s − 1`` from the true ``r``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from credrank.core.validation import check_int, check_probability
from credrank.evaluate.tables import Cell, Column, ResultTable, Row
from credrank.reliability.dependence import collapse, detect_dependence
from credrank.reliability.estimate import EncodedAnswers, iterate_weighted_majority
from credrank.reliability.vote import majority_matrix, paper_weights, vote_matrix


@dataclass(frozen=True)
class SimulatedAnswers:
    """Simulated ``(S, Q)`` class matrix with the truth and the true reliabilities."""

    classes: np.ndarray
    truth: np.ndarray
    reliability: np.ndarray
    adversarial: np.ndarray

    def encoded(self) -> EncodedAnswers:
        n_s, n_q = self.classes.shape
        n_c = int(self.classes.max(initial=-1)) + 1
        labels = tuple(tuple(str(c) for c in range(n_c)) for _ in range(n_q))
        return EncodedAnswers(tuple(f"s{i}" for i in range(n_s)),
                              tuple(f"q{j}" for j in range(n_q)), self.classes, labels)


def beta_reliabilities(q: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``r_s ~ Beta(2q/(1−q), 2)``, mean ``q`` (the RA-RAG simulation prior, chapter 35.3)."""
    check_probability("q", q, open_low=True, open_high=True)
    return rng.beta(2.0 * q / (1.0 - q), 2.0, size=n)


def simulate_answers(
    n_sources: int = 20, n_questions: int = 200, q: float = 0.7, *, n_wrong: int = 4,
    abstain: float = 0.1, variant: str = "honest", n_adv: int = 3, n_copies: int = 8,
    adv_reliability: float = 0.1, seed: int | np.random.Generator = 0,
) -> SimulatedAnswers:
    """Draw one simulated calibration set (see module docstring for the protocol)."""
    if variant not in ("honest", "adversarial", "copies"):
        raise ValueError(f"variant: expected 'honest', 'adversarial' or 'copies', got {variant!r}")
    check_int("n_wrong", n_wrong, 1)
    check_probability("abstain", abstain, open_high=True)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    r = beta_reliabilities(q, n_sources, rng)
    n_classes = n_wrong + 1

    def sheet(rel: np.ndarray, fixed_wrong: bool) -> np.ndarray:
        # semantic answers: 0 = truth, 1..n_wrong = wrong answers
        correct = rng.random((len(rel), n_questions)) < rel[:, None]
        if fixed_wrong:
            wrong = np.ones((len(rel), n_questions), dtype=np.int64)
        else:
            wrong = rng.integers(1, n_classes, size=(len(rel), n_questions))
        ans = np.where(correct, 0, wrong)
        return np.where(rng.random(ans.shape) < abstain, -1, ans)

    rows = [sheet(r, False)]
    adv = np.zeros(n_sources, dtype=bool)
    if variant == "adversarial":
        rows.append(sheet(np.full(n_adv, adv_reliability), False))
        r = np.concatenate([r, np.full(n_adv, adv_reliability)])
        adv = np.concatenate([adv, np.ones(n_adv, dtype=bool)])
    elif variant == "copies":
        one = sheet(np.array([adv_reliability]), True)
        rows.append(np.repeat(one, n_copies, axis=0))
        r = np.concatenate([r, np.full(n_copies, adv_reliability)])
        adv = np.concatenate([adv, np.ones(n_copies, dtype=bool)])
    semantic = np.vstack(rows)
    perm = np.argsort(rng.random((n_questions, n_classes)), axis=1)   # class id of answer a
    classes = np.where(semantic >= 0,
                       perm[np.arange(n_questions)[None, :], np.maximum(semantic, 0)], -1)
    truth = perm[:, 0]
    return SimulatedAnswers(classes.astype(np.int64), truth.astype(np.int64), r, adv)


def _corr(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """(Pearson, Spearman); ``None`` when undefined (fewer than 3 points or constant input)."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None, None
    return float(stats.pearsonr(x, y)[0]), float(stats.spearmanr(x, y)[0])


def evaluate_simulation(sim: SimulatedAnswers) -> dict[str, Any]:
    """Scores of one simulated set: reliability correlations and vote accuracies."""
    m, truth = sim.classes, sim.truth
    n_s = m.shape[0]
    fit = iterate_weighted_majority(m)
    known = fit["known"]
    pearson, spearman = _corr(fit["reliability"][known], sim.reliability[known])
    fit_clip = iterate_weighted_majority(m, clip=True)
    oracle, _ = vote_matrix(m, paper_weights(sim.reliability, n_s))
    report = detect_dependence(sim.encoded())
    collapsed = collapse(sim.encoded(), report.groups())
    fit_coll = iterate_weighted_majority(collapsed.classes)
    return {
        "pearson": pearson, "spearman": spearman,
        "acc_majority": float(np.mean(majority_matrix(m, rule="all") == truth)),
        "acc_iwmv": float(np.mean(fit["consensus"] == truth)),
        "acc_iwmv_clip": float(np.mean(fit_clip["consensus"] == truth)),
        "acc_iwmv_collapsed": float(np.mean(fit_coll["consensus"] == truth)),
        "acc_oracle": float(np.mean(oracle == truth)),
        "n_iter": int(fit["n_iter"]), "converged": bool(fit["converged"]),
        "n_clusters": len(report.clusters),
        "adversaries_clustered": int(sum(
            sim.adversarial[int(s[1:])] for c in report.clusters for s in c)),
    }


SCENARIOS: tuple[tuple[str, float], ...] = tuple(
    (v, q) for v in ("honest", "adversarial", "copies") for q in (0.5, 0.6, 0.7, 0.8))


def run_simulation(seed: int = 0, *, n_sources: int = 10, n_questions: int = 200,
                   repeats: int = 5, scenarios: tuple[tuple[str, float], ...] = SCENARIOS,
                   n_adv: int = 3, n_copies: int = 6) -> dict[str, Any]:
    """Run every ``(variant, q)`` scenario ``repeats`` times; mean scores per scenario.

    Returns ``{"rows": [...], "settings": {...}, "seconds": float}`` (JSON data;
    :func:`simulation_tables` turns it into the report's tables); correlations average over
    the repeats where they are defined (``None`` if never).
    """
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    rows = []
    # per table, system and measure: the value of each simulated set ("repeat i"), the units
    # the tables average over, for --out's per_query.csv (not the JSON)
    per_unit: dict[str, dict[str, dict[str, dict[str, float]]]] = {
        "vote_accuracy": {}, "reliability_estimates": {}}
    for variant, q in scenarios:
        runs = [evaluate_simulation(simulate_answers(
            n_sources, n_questions, q, variant=variant, n_adv=n_adv, n_copies=n_copies,
            seed=rng)) for _ in range(repeats)]
        scenario = _scenario({"variant": variant, "q": q})
        for name, (key, _) in VOTES.items():
            per_unit["vote_accuracy"].setdefault(name, {})[scenario] = {
                f"repeat {i + 1}": float(r[key]) for i, r in enumerate(runs)}
        per_unit["reliability_estimates"][scenario] = {
            measure: {f"repeat {i + 1}": float(r[key]) for i, r in enumerate(runs)
                      if r[key] is not None}
            for measure, key in (("Pearson", "pearson"), ("Spearman", "spearman"))}
        row: dict[str, Any] = {"variant": variant, "q": q}
        for key in runs[0]:
            values = [r[key] for r in runs if r[key] is not None]
            if key == "converged":
                row[key] = sum(values) / len(runs)
            else:
                row[key] = float(np.mean(values)) if values else None
        rows.append(row)
    return {"rows": rows,
            "settings": {"seed": seed, "n_sources": n_sources, "n_questions": n_questions,
                         "repeats": repeats, "n_adv": n_adv, "n_copies": n_copies,
                         "n_wrong": 4, "abstain": 0.1, "adv_reliability": 0.1},
            "per_unit": per_unit, "seconds": time.perf_counter() - start}


#: the vote methods compared: (row key of :func:`run_simulation`, reads the true reliabilities)
VOTES: dict[str, tuple[str, bool]] = {
    "majority": ("acc_majority", False),
    "IWMV (paper weights)": ("acc_iwmv", False),
    "IWMV clipped": ("acc_iwmv_clip", False),
    "IWMV after collapsing detected copies": ("acc_iwmv_collapsed", False),
    "oracle weights v = S·r − 1 (true r)": ("acc_oracle", True),
}


def _scenario(row: dict[str, Any]) -> str:
    return f"{row['variant']}, q={row['q']:.1f}"


def simulation_tables(res: dict[str, Any]) -> list[ResultTable]:
    """The tables of :func:`run_simulation`'s result: vote accuracy per method and scenario
    (the oracle reads the simulated true reliabilities: ``reads_labels``), and per scenario
    how well IWMV's estimated reliability tracks the true one."""
    rows = res["rows"]
    cols = [Column(_scenario(r), "accuracy") for r in rows]
    votes = ResultTable(
        "vote_accuracy", "RA-RAG simulation: vote accuracy", cols,
        [Row(name, reads, {_scenario(r): Cell(r[key]) for r in rows})
         for name, (key, reads) in VOTES.items()], baseline="majority",
        notes=[f"Mean over {res['settings']['repeats']} simulated sets per scenario "
               f"({res['settings']['n_sources']} honest sources, "
               f"{res['settings']['n_questions']} questions, seed {res['settings']['seed']}); "
               "columns are (variant, mean reliability q)."])
    corr_cols = [Column("Pearson", "Pearson"), Column("Spearman", "Spearman")]
    estimates = ResultTable(
        "reliability_estimates", "RA-RAG simulation: IWMV reliability vs the true one",
        corr_cols,
        [Row(_scenario(r), None, {"Pearson": Cell(r["pearson"]),
                                  "Spearman": Cell(r["spearman"])},
             params={"clusters": r["n_clusters"],
                     "adversaries_clustered": r["adversaries_clustered"],
                     "converged_share": r["converged"]})
         for r in rows], kind="descriptive", row_header="scenario",
        notes=["Correlation of IWMV's estimated r with the simulated r (mean over the repeats "
               "where it is defined; — if never); dependence clusters found and adversarial "
               "copies among them (means over repeats)."])
    return [votes, estimates]
