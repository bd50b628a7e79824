"""The planted-evidence defences as bench rows (PoisonedRAG, CrAM NQ, NewsPolluted, stress).

Each row is a pipeline spec with the ``planted`` stage in one of its modes
(:mod:`credrank.stages.planted`), so a bench row is exactly what a user runs with
``credrank search --planted -S planted.mode=…`` (or ``{"stage": "planted", "mode": …}`` in a
spec); nothing in them reads a label. The reference RAGDefender package joins as a further row
when it imports (:mod:`credrank_bench.experiments.ragdefender_baseline`): the reference is the
bench's ``before`` stage, followed by the similarity-only spec.
"""

from __future__ import annotations

from typing import Any

from credrank.evaluate.experiment import System
from credrank.pipeline.spec import PipelineSpec
from credrank_bench.experiments.ragdefender_baseline import (
    RAGDefenderReference,
    ragdefender_available,
)

#: the row of the stage at its defaults
DEFAULT_ROW = "similarity × planted (default: paraphrase groups on the query side)"
#: the planted-evidence defence rows: system name -> the ``planted`` stage's parameters
DEFENCES: dict[str, dict[str, Any]] = {
    "similarity × planted (GRADA mode: query-penalised passage graph)": {"mode": "grada"},
    "similarity × planted (RAGDefender mode: cluster count + most similar pairs)":
        {"mode": "ragdefender"},
    "similarity × planted (TrustRAG stage-1 mode: 2-means, tight cluster)": {"mode": "trustrag"},
    DEFAULT_ROW: {"mode": "planted"},
    "similarity × planted (complete linkage, cos ≥ 0.7, ≥ 4 members; opt-in)":
        {"mode": "planted", "linkage": "complete", "cluster_cosine": 0.7, "min_cluster": 4},
    "similarity × planted (outlier mode: query-similarity z-score, opt-in)": {"mode": "outlier"},
}
#: the reference package's row (when it imports)
RAGDEFENDER_ROW = "RAGDefender 0.2.0 reference package (on the bench's own vectors)"


def ragdefender_note() -> str | None:
    """Why the reference RAGDefender row is absent (``None`` when it runs)."""
    reason = ragdefender_available()
    return None if reason is None else f"absent row '{RAGDEFENDER_ROW}': {reason}"


def defence_systems(top_k: int, fetch_k: int, only: tuple[str, ...] | None = None
                    ) -> dict[str, System]:
    """The label-free planted-evidence rows (:data:`DEFENCES`) and, when the ``ragdefender``
    package imports, its reference row (:mod:`credrank_bench.experiments.ragdefender_baseline`;
    else :func:`ragdefender_note` says why it is absent). ``only``: the rows of these modes,
    without the reference row."""
    systems = {name: System.of_spec(PipelineSpec.of({"stage": "planted", **params},
                                                    top_k=top_k, fetch_k=fetch_k),
                                    params=dict(params))
               for name, params in DEFENCES.items() if only is None or params["mode"] in only}
    if only is None and ragdefender_available() is None:
        systems[RAGDEFENDER_ROW] = System.of_spec(
            PipelineSpec.of(top_k=top_k, fetch_k=fetch_k), before=[RAGDefenderReference()],
            reads_labels=False, params={"task_type": "single_hop"},
            notes=("the reference package's defend(): the passages it drops get the factor 0, "
                   "the rest keep their similarity order; its embedder is the bench's own "
                   "vectors, those of --embedder (no model download)",))
    return systems
