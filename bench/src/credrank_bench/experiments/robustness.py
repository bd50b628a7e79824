"""The audit's robustness runner: one cell of the contamination stress bench as the audit's
robustness measurement (:mod:`credrank.audit.robustness` declares the options). The product's
``credrank audit`` finds this runner through the entry point ``stress`` of the group
``credrank.audit.robustness`` (``bench/pyproject.toml``) and passes it to
:func:`credrank.audit.run.audit_index`, so the product never imports the benches."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from credrank.audit.measures import AuditMeasureError, Measurement
from credrank.audit.profile import AuditInputError
from credrank.audit.robustness import AUDITED_ROW, ROBUSTNESS_SCHEMA
from credrank.core.progress import OnProgress
from credrank.pipeline.spec import PipelineSpec, SpecError

#: the stress bench's words for its options (an error's head) → the audit config's keys
_KEYS = (("rows", "system"), ("--counts", "count"), ("--positions", "position"),
         ("--limit", "limit"), ("--corpus", "corpus"), ("--path", "path"))


def stress_robustness(spec: Mapping[str, Any], *, pipeline: PipelineSpec | None = None,
                      on_progress: OnProgress | None = None) -> Measurement:
    """Run the configured stress test and return its cell as the robustness measurement
    (``on_progress``: the steps of :func:`credrank_bench.experiments.stress.bench_stress`).

    ``pipeline``: the audited pipeline, added to the stress table as the row
    :data:`~credrank.audit.robustness.AUDITED_ROW` and read unless ``system`` names one of
    the bench's own rows (:mod:`credrank.audit.robustness`). Only the row read (and the
    baseline every Δ is paired with) is fitted and run."""
    from credrank.index.embed import get_embedder
    from credrank_bench.experiments.stress import bench_stress

    base = Path(spec.get("base", "."))
    spec = ROBUSTNESS_SCHEMA.check({k: v for k, v in spec.items() if k != "base"},
                                   error=AuditInputError, at="dimensions.robustness")
    source = str(spec.get("source", "cram"))
    if "path" not in spec:
        raise AuditInputError("dimensions.robustness.path: expected the stress-test data file, "
                              "got nothing (the key is missing)")
    path = Path(spec["path"])
    path = path if path.is_absolute() else base / path
    if not path.exists():
        raise FileNotFoundError(2, "stress-test data not found", str(path))
    corpus = spec.get("corpus")
    corpus_path = None if corpus is None else (Path(corpus) if Path(corpus).is_absolute()
                                               else base / corpus)
    position = str(spec.get("position", "natural" if source == "poisonedrag" else "first"))
    count = int(spec.get("count", 1))
    pipelines: dict[str, PipelineSpec] = {}
    if "system" in spec:
        system = str(spec["system"])
    elif pipeline is not None:
        system, pipelines = AUDITED_ROW, {AUDITED_ROW: pipeline}
    else:
        raise AuditInputError("[dimensions.robustness]: expected the audited pipeline (the "
                              "runner's pipeline=) or a row of the stress bench (system = …); "
                              "got neither")
    metric = str(spec.get("metric", "misled-contaminated"))
    limit = spec.get("limit")
    embedder = get_embedder(str(spec.get("embedder", "minilm")))
    try:
        result = bench_stress(source, path, embedder, corpus_path=corpus_path,
                              positions=[position], counts=[count],
                              limit=None if limit is None else int(limit),
                              on_progress=on_progress, pipelines=pipelines, rows=[system])
    except SpecError as exc:  # a stage that cannot be built without the index
        raise AuditMeasureError(f"robustness: the audited pipeline cannot run on the stress "
                                f"bench's passages: {exc}") from None
    except ValueError as exc:  # the bench's words (its flags) for the config's keys
        text = str(exc)
        for head, key in _KEYS:
            if text.startswith(f"{head}:"):
                raise AuditInputError(f"dimensions.robustness.{key}:"
                                      f"{text[len(head) + 1:]}") from None
        raise
    table = result.table(f"{position}_n{count}")
    rows = {r.system: r for r in table.rows}
    if system not in rows:  # a learned credibility row whose fit had one class only
        why = next((n for n in result.notes if n.startswith("absent:")), "see its notes")
        raise AuditMeasureError(f"robustness: the stress bench did not run the row "
                                f"{system!r}: {why}")
    row = rows[system]
    if metric not in row.metrics:
        raise AuditInputError(f"[dimensions.robustness]: metric {metric!r} is not in the stress "
                              f"table; measures: {', '.join(row.metrics)}")
    cell = row.metrics[metric]
    if cell.mean is None:
        raise AuditMeasureError(f"robustness: {metric} is not defined for {system!r}")
    direction = next((c.direction for c in table.columns if c.name == metric), "lower")
    interval = None if cell.ci_low is None or cell.ci_high is None else \
        (float(cell.ci_low), float(cell.ci_high))
    flips = result.details.get("flips", {}).get(f"{system} · {position} · n={count}", {})
    from credrank_bench.experiments.benches import STRESS_NAMES  # the bench's CLI name

    limit_opt = f" --limit {int(limit)}" if limit is not None else ""
    corpus_opt = ("" if corpus_path is None
                  else f" --corpus {os.path.normpath(os.path.relpath(corpus_path))}")
    # every option the measurement ran with, so that the command reproduces its value (the
    # audited pipeline's row is not a row of the bench's command: the command gives the
    # table it joins, the audit its value)
    command = (f"credrank bench {STRESS_NAMES[source]} --path "
               f"{os.path.normpath(os.path.relpath(path))}{corpus_opt} "
               f"--positions {position} --counts {count}{limit_opt} "
               f"--embedder {embedder.name}")
    return Measurement(
        "robustness", f"{metric} under {count} injected contaminant(s) at position {position} "
        f"(stress-{source}, row {system!r}, offline extractive reader)", float(cell.mean),
        "share of questions", (0.0, 1.0), direction == "higher",
        "contaminant labels of the stress data and the offline extractive reader",
        f"{cell.n} questions", interval, ("retrieval", "generation"), reads_labels=True,
        details={"command": command, "flips": flips, "system": system, "position": position,
                 "count": count, "bench_settings": result.settings,
                 "audited_pipeline": bool(pipelines)})
