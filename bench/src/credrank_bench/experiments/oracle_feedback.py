"""Seed 004's oracle feedback experiment: after each query, the true labels of its top k
update the type priors. An oracle is not deployable feedback; this bounds what feedback could
do and reproduces the seed, nothing more."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage
from credrank.core.validation import check_int
from credrank.documents.schema import SOURCE_TYPES
from credrank.evaluate.experiment import ExperimentResult, System, compare_systems
from credrank.evaluate.metrics import evaluate, run_from_batches
from credrank.evaluate.tables import Column
from credrank.signals.feedback import FeedbackPriors, check_step
from credrank.signals.prior import preset
from credrank.stages.feedback_prior import FeedbackPrior
from credrank_bench.datasets import EvalSet
from credrank_bench.experiments.bench import prior_system


def simulate_oracle_feedback(
    ranked_batches: Iterable[tuple[str, Candidates]] | Mapping[str, Candidates],
    qrels: Mapping[str, Mapping[str, int]],
    store: FeedbackPriors,
    step: float = 0.1,
    *,
    k: int = 5,
    rescore: Stage | None = None,
    author: str = "oracle-simulation",
) -> dict[str, Any]:
    """Seed 004's oracle experiment: after each query, the true labels of its top k feed back.

    For each ``(qid, batch)`` in order: the batch is rescored with the store's current priors
    (``FeedbackPrior(store) >> rescore``, ``rescore`` defaulting to ``Combine("multiply")``) and
    sorted; the top ``k`` are judged from ``qrels`` (gain > 0 relevant; a document absent from
    the judgements is non-relevant, the TREC convention); those labels go to
    :meth:`FeedbackPriors.update` with the document's ``source_type`` (None → ``unknown``) and
    ``source_id``. So query i is ranked with what queries 1 … i−1 taught.

    **An oracle is not deployable feedback.** The labels here are ground truth, which no
    deployed system has; real user feedback is noisy, sparse, biased by position and open to
    manipulation. Use this to reproduce the seed and to bound what feedback could do, not as
    evidence that feedback works in production.

    Returns ``{"queries": [{qid, version_used, version_after, top_k, relevant_in_top_k,
    precision_at_k}], "run": {qid: {doc_id: score}}, "final_version": int}``.
    """
    eta = check_step(step)
    check_int("k", k, 1)
    pairs = list(ranked_batches.items()) if isinstance(ranked_batches, Mapping) else list(
        ranked_batches)
    rescore = rescore if rescore is not None else Combine("multiply")
    queries: list[dict[str, Any]] = []
    run: dict[str, dict[str, float]] = {}
    for qid, batch in pairs:
        if qid not in qrels:
            raise ValueError(f"qrels: no judgements for query {qid!r}")
        used = store.current
        ranked = (FeedbackPrior(store) >> rescore)(batch).sorted_by_score()
        run[qid] = {str(d): float(s) for d, s in zip(ranked.doc_ids, ranked.score, strict=True)}
        top = ranked.take(np.arange(min(k, len(ranked))))
        judged = qrels[qid]
        labels = [judged.get(str(d), 0) > 0 for d in top.doc_ids]
        types = [t if isinstance(t, str) and t in SOURCE_TYPES else "unknown"
                 for t in top.column("source_type")]
        sids = [s if isinstance(s, str) and s else None for s in top.column("source_id")]
        after = store.update(list(zip(types, sids, labels, strict=True)), eta, author=author,
                             reason=f"oracle labels of the top {k} for query {qid}")
        queries.append({
            "qid": qid, "version_used": used, "version_after": after,
            "top_k": [str(d) for d in top.doc_ids], "relevant_in_top_k": int(sum(labels)),
            "precision_at_k": sum(labels) / k,
        })
    return {"queries": queries, "run": run, "final_version": store.current}


STATIC = "current priors (static)"
#: the feedback steps tried (the seed's bounded step sizes)
STEPS = (0.1, 0.3)


def oracle_feedback_experiment(pools: Mapping[str, Candidates], evalset: EvalSet, top_k: int,
                               measures: Sequence[str], fetch_k: int | None = None,
                               seed: int = 0) -> ExperimentResult:
    """Seed 004's oracle experiment: queries in order, the true labels of each top-k fed back
    into the type priors before the next query (bounded steps, versioned store), against the
    static current priors (a pipeline spec of the bench's ``fetch_k`` pool, default
    3 × ``top_k``). The feedback systems read the relevance labels of the evaluated
    queries (``reads_labels``): an oracle bounds what feedback could do, it is not a result.
    """
    systems = {STATIC: prior_system("current", top_k, 3 * top_k if fetch_k is None else fetch_k)}
    static = systems[STATIC].stage
    assert static is not None
    runs = {STATIC: run_from_batches({qid: static(b) for qid, b in pools.items()})}
    for step in STEPS:
        name = f"current + oracle feedback, step {step}"
        with tempfile.TemporaryDirectory(prefix="credrank-feedback-") as tmp:
            store = FeedbackPriors(Path(tmp) / "store", preset("current"))
            runs[name] = simulate_oracle_feedback(pools, evalset.qrels, store, step,
                                                  k=top_k)["run"]
            final = store.table()
        systems[name] = System(None, reads_labels=True, params={
            "step": step, "final_priors": {t: final[t] for t in SOURCE_TYPES}})
    per_query = {name: evaluate(evalset.qrels, run, list(measures), bad=evalset.bad)
                 for name, run in runs.items()}
    return compare_systems(
        per_query, systems, [Column.of(m) for m in measures], key="oracle_feedback",
        title="Oracle feedback", baseline=STATIC, runs=runs, seed=seed, notes=[
            "Oracle feedback: after each query (in file order) the true relevance of its top-k "
            "updates the type priors (bounded step, max change 0.05 per update, clipped to "
            "[0.01, 1], every update a new version). An oracle is not deployable feedback; "
            "this reproduces the seed's experiment and bounds what feedback could do."])
