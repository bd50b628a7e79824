"""Side-by-side experiments (in the manner of PyTerrier's ``pt.Experiment``).

One retriever fills each query's candidate pool once; every system is a chain of post-retrieval
stages (signals, combine, select) applied to that same pool, so differences between systems come
from the reranking alone. Each run is evaluated per query and compared with the baseline by a
bootstrap interval on the paired difference, a paired randomisation test and a win/loss/tie
count (:mod:`credrank.evaluate.stats`) in the direction of each measure
(:func:`~credrank.evaluate.metrics.measure_direction`). The result is a
:class:`~credrank.evaluate.tables.ResultTable` plus the per-query values and runs behind it.

A :class:`System` says, where it is defined, whether its stages read evaluation labels
(``reads_labels``); the flag travels into every table row. A system that is a plain credrank
search is described by its pipeline spec (:meth:`System.of_spec`): its stages are built from
the spec by the one builder (:func:`credrank.pipeline.compile.build_stages`), so the bench
measures exactly what ``credrank search --pipeline`` runs on the same pool, and the spec goes
into the row (``"pipeline"`` of the bench JSON). A system with a research-only part (an
oracle, a reference defence, types assigned by the experimenter) is that part as a ``before``
stage followed by its spec (``System.of_spec(spec, before=[stage], reads_labels=…)``). Systems
that no spec can hold (a model fitted in memory, a per-query evaluation time) keep a
hand-built stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Pipeline, Stage
from credrank.core.progress import Counter
from credrank.core.validation import check_bool
from credrank.evaluate.metrics import Run, evaluate, mean, run_from_batches
from credrank.evaluate.stats import bootstrap_ci, compare
from credrank.evaluate.tables import Cell, Column, Kind, ResultTable, Row
from credrank.pipeline.compile import build_stages, context
from credrank.pipeline.spec import PipelineSpec

PerQuery = dict[str, dict[str, dict[str, float]]]  # system -> measure -> qid -> value


@dataclass(frozen=True)
class System:
    """One system of an experiment.

    ``stage`` reranks a pool (``None`` when the caller evaluates the system itself and passes
    per-query values to :func:`compare_systems`); ``reads_labels`` is ``True`` when the stages
    read evaluation labels of the items they are scored on — directly, or through priors
    assigned from those labels even with noise added; ``notes`` and ``params`` go to the
    table row; ``spec`` is the pipeline the system is (:meth:`of_spec`), ``None`` for a
    system that is not one.
    """

    stage: Stage | None
    reads_labels: bool
    notes: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    spec: PipelineSpec | None = None

    def __post_init__(self) -> None:
        check_bool("System.reads_labels", self.reads_labels)

    @classmethod
    def of_spec(cls, spec: PipelineSpec | Mapping[str, Any], *, before: Sequence[Stage] = (),
                notes: Sequence[str] = (), params: Mapping[str, Any] | None = None,
                reads_labels: bool = False) -> System:
        """The system that is the pipeline ``spec`` (a :class:`PipelineSpec` or its dict):
        the spec's stages after retrieval (prior, signals, combine, selector), built as
        ``credrank search`` builds them, applied to the bench's pool.

        ``before``: the bench's own stages, run on the pool before the spec's — the part of
        the system that is research, not product (source types assigned from the labels, a
        reference re-implementation of a published defence, an oracle that drops labelled
        documents, a score shipped with the data). The row's ``pipeline`` is the spec alone;
        its ``stages`` describe both. A pipeline reads no evaluation label: ``reads_labels``
        says whether the ``before`` stages (or the pool's columns) were made from them."""
        spec = spec if isinstance(spec, PipelineSpec) else PipelineSpec.from_dict(spec)
        stages = [*before, *build_stages(spec, context())]
        return cls(Pipeline(stages), reads_labels, tuple(notes), dict(params or {}), spec=spec)


@dataclass
class ExperimentResult:
    """A table of systems with the per-query values and the runs behind it."""

    table: ResultTable
    per_query: PerQuery
    runs: dict[str, Run] = field(default_factory=dict)

    @property
    def measures(self) -> list[str]:
        return [c.name for c in self.table.columns]

    @property
    def baseline(self) -> str | None:
        return self.table.baseline

    @property
    def rows(self) -> list[Row]:
        return self.table.rows

    def mean(self, system: str, measure: str) -> float:
        """Mean over queries of ``measure`` for ``system`` (:func:`metrics.mean`)."""
        return mean(self.per_query[system][measure])


def retrieve_pools(retriever: Stage, queries: Sequence[tuple[str, str]]) -> dict[str, Candidates]:
    """``qid -> batch``: the retriever run once per query."""
    return {qid: retriever.search(text) for qid, text in queries}


def compare_systems(
    per_query: PerQuery,
    systems: Mapping[str, System],
    columns: Sequence[Column],
    *,
    key: str,
    title: str,
    baseline: str | None = None,
    runs: Mapping[str, Run] | None = None,
    kind: Kind = "systems",
    parameter: str | None = None,
    notes: Sequence[str] = (),
    n_resamples: int = 10_000,
    seed: int = 0,
) -> ExperimentResult:
    """The table of ``systems`` from their per-query values (``per_query[system][column]``).

    Each cell: the mean (:func:`~credrank.evaluate.metrics.mean`, the one mean over queries)
    with its percentile-bootstrap interval over queries, and for every
    system but ``baseline`` (default: the first) the paired difference with its bootstrap
    interval, the two-sided randomisation p-value and wins/losses/ties in the column's
    direction. A column with no query (``n = 0``) has ``mean = None``.
    """
    names = list(systems)
    if not names:
        raise ValueError("compare_systems: expected at least one system")
    baseline = baseline or names[0]
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not among the systems {names}")
    missing = [(s, c.name) for s in names for c in columns
               if c.name not in per_query.get(s, {})]
    if missing:
        raise ValueError(f"per_query: no values for (system, measure) {missing[:3]}; expected "
                         "one mapping qid -> value per system and column")
    rows = []
    for name in names:
        metrics = {}
        for col in columns:
            values = per_query[name][col.name]
            ci = bootstrap_ci(values, n_resamples=n_resamples, seed=seed)
            cell: dict[str, Any] = {"mean": mean(values) if ci.n else None, "n": ci.n}
            if ci.n:
                cell.update(ci_low=ci.low, ci_high=ci.high)
            if name != baseline:
                cmp = compare(per_query[baseline][col.name], values, n_resamples=n_resamples,
                              seed=seed, direction=col.direction)
                cell.update(delta=cmp.diff, delta_ci_low=cmp.ci_low, delta_ci_high=cmp.ci_high,
                            p_value=cmp.p_value, wins=cmp.wins, losses=cmp.losses,
                            ties=cmp.ties, test=cmp.test)
            metrics[col.name] = Cell(**cell)
        system = systems[name]
        rows.append(Row(name, system.reads_labels, metrics, notes=list(system.notes),
                        params=dict(system.params),
                        stages=system.stage.describe() if system.stage is not None else None,
                        pipeline=system.spec.to_dict() if system.spec is not None else None))
    table = ResultTable(key, title, list(columns), rows, kind=kind, baseline=baseline,
                        parameter=parameter, notes=list(notes))
    return ExperimentResult(table, per_query, dict(runs or {}))


def run_experiment(
    pools: Mapping[str, Candidates],
    systems: Mapping[str, System],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
    *,
    bad: Mapping[str, set[str]] | None = None,
    baseline: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    custom: Mapping[str, Callable[[dict[str, dict[str, float]]], dict[str, float]]] | None = None,
    key: str = "results",
    title: str = "Results",
    kind: Kind = "systems",
    parameter: str | None = None,
    notes: Sequence[str] = (),
    on_progress: Callable[[int, int], None] | None = None,
) -> ExperimentResult:
    """Apply every system to every pool, evaluate and compare with ``baseline``.

    ``baseline`` defaults to the first system. Each measure's direction comes from the
    measure registry (:func:`~credrank.evaluate.metrics.measure_direction`): the table shows
    raw differences, and wins/losses follow the direction. ``custom`` adds measures computed
    by a function of the run (``{qid: {doc: score}}`` → ``{qid: value}``); their names must be
    registered measures too. ``on_progress(done, total)``: (system, pool) pairs reranked of
    ``len(systems) · len(pools)``, after each.
    """
    names = list(systems)
    if not names:
        raise ValueError("run_experiment: expected at least one system")
    for name, system in systems.items():
        if not isinstance(system, System) or system.stage is None:
            raise ValueError(f"systems[{name!r}]: expected a System with a stage; got "
                             f"{system!r}")
    custom = dict(custom or {})
    columns = [Column.of(m) for m in [*measures, *custom]]
    runs, per_query = {}, {}
    tick = Counter(on_progress, len(systems) * len(pools))
    for name, system in systems.items():
        assert system.stage is not None
        batches = {}
        for qid, batch in pools.items():
            batches[qid] = system.stage(batch)
            tick.add()
        runs[name] = run_from_batches(batches)
        per_query[name] = evaluate(qrels, runs[name], list(measures), bad=bad)
        for label, fn in custom.items():
            per_query[name][label] = fn(runs[name])
    return compare_systems(per_query, systems, columns, key=key, title=title,
                           baseline=baseline, runs=runs, kind=kind, parameter=parameter,
                           notes=notes, n_resamples=n_resamples, seed=seed)
