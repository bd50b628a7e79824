"""Side-by-side experiments (in the manner of PyTerrier's ``pt.Experiment``).

One retriever fills each query's candidate pool once; every system is a chain of post-retrieval
stages (signals, combine, select) applied to that same pool, so differences between systems come
from the reranking alone. Each run is evaluated per query and compared with the baseline by a
bootstrap interval on the paired difference, a paired randomisation test and a win/loss/tie
count (:mod:`credrank.evaluate.stats`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage
from credrank.evaluate.metrics import evaluate, mean, run_from_batches
from credrank.evaluate.stats import bootstrap_ci, compare


@dataclass
class ExperimentResult:
    """Per-query values and comparisons of several systems on one query set."""

    measures: list[str]
    baseline: str
    per_query: dict[str, dict[str, dict[str, float]]]  # system -> measure -> qid -> value
    runs: dict[str, dict[str, dict[str, float]]]  # system -> TREC-style run
    rows: list[dict[str, Any]] = field(default_factory=list)

    def mean(self, system: str, measure: str) -> float:
        return mean(self.per_query[system][measure])

    def to_json(self) -> dict[str, Any]:
        return {"measures": self.measures, "baseline": self.baseline, "systems": self.rows}

    def markdown(self) -> str:
        """One row per system: mean [95% CI] per measure, and Δ vs baseline with p-value."""
        head = "| system | " + " | ".join(self.measures) + " |"
        sep = "|---|" + "---|" * len(self.measures)
        lines = [head, sep]
        for row in self.rows:
            cells = []
            for m in self.measures:
                c = row["metrics"][m]
                cell = f"{c['mean']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}]"
                if row["system"] != self.baseline:
                    d = c["vs_baseline"]
                    cell += (f"<br>Δ {d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
                             f", p={d['p_value']:.3g}, W/L/T {d['wins']}/{d['losses']}/"
                             f"{d['ties']}")
                cells.append(cell)
            lines.append(f"| {row['system']} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def retrieve_pools(retriever: Stage, queries: Sequence[tuple[str, str]]) -> dict[str, Candidates]:
    """``qid -> batch``: the retriever run once per query."""
    return {qid: retriever.search(text) for qid, text in queries}


def run_experiment(
    pools: Mapping[str, Candidates],
    systems: Mapping[str, Stage],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
    *,
    bad: Mapping[str, set[str]] | None = None,
    baseline: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    custom: Mapping[str, Callable[[dict[str, dict[str, float]]], dict[str, float]]] | None = None,
) -> ExperimentResult:
    """Apply every system to every pool, evaluate and compare with ``baseline``.

    ``baseline`` defaults to the first system. Higher is better for every measure except
    ``harmful@k``, where a negative difference is the improvement (the table shows raw
    differences; wins/losses follow the measure's direction). ``custom`` adds measures computed
    by a function of the run (``{qid: {doc: score}}`` → ``{qid: value}``).
    """
    names = list(systems)
    if not names:
        raise ValueError("run_experiment: expected at least one system")
    baseline = baseline or names[0]
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not among the systems {names}")
    custom = dict(custom or {})
    runs, per_query = {}, {}
    for name, stage in systems.items():
        batches = {qid: stage(batch) for qid, batch in pools.items()}
        runs[name] = run_from_batches(batches)
        per_query[name] = evaluate(qrels, runs[name], list(measures), bad=bad)
        for label, fn in custom.items():
            per_query[name][label] = fn(runs[name])
    measures = [*measures, *custom]
    result = ExperimentResult(list(measures), baseline, per_query, runs)
    for name in names:
        metrics = {}
        for m in measures:
            values = per_query[name][m]
            ci = bootstrap_ci(values, n_resamples=n_resamples, seed=seed)
            entry: dict[str, Any] = {"mean": ci.point, "ci_low": ci.low, "ci_high": ci.high,
                                     "n": ci.n}
            if name != baseline:
                lower_is_better = m.startswith("harmful@")
                cmp = compare(per_query[baseline][m], values, n_resamples=n_resamples,
                              seed=seed)
                wins, losses = (cmp.losses, cmp.wins) if lower_is_better else (cmp.wins,
                                                                                cmp.losses)
                entry["vs_baseline"] = {"diff": cmp.diff, "ci_low": cmp.ci_low,
                                        "ci_high": cmp.ci_high, "p_value": cmp.p_value,
                                        "wins": wins, "losses": losses, "ties": cmp.ties,
                                        "test": cmp.test}
            metrics[m] = entry
        result.rows.append({"system": name, "stages": systems[name].describe(),
                            "metrics": metrics})
    return result
