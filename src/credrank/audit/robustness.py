"""The audit's robustness entry: one cell of the contamination stress test (chapter 35.2).

``[dimensions.robustness]`` with ``measure = "stress"`` runs
:func:`credrank.evaluate.stress.bench_stress` (``credrank bench stress-<source>``) with one
position and one count and reads one system's one measure from its table. Keys (defaults):

* ``source`` (``"cram"``): ``cram``, ``newspolluted`` or ``poisonedrag``; ``path`` (required)
  the data file, relative to the audit config; ``corpus`` the clean CrAM corpus
  (``poisonedrag`` only);
* ``position`` (``"first"``; ``"natural"`` for poisonedrag; one of ``first``, ``middle``,
  ``last``, ``natural``) and ``count`` (``1``; at most :data:`MAX_COUNT`): where and how many
  contaminants are injected into each question's clean pool;
* ``system`` (``"similarity only"``): the stress bench's row that stands for the audited
  pipeline. Stress-test passages carry no URL, so source-type priors are neutral on them and
  the demo pipeline behaves as similarity only there — the entry's metric text says which row
  was read;
* ``metric`` (``"misled-contaminated"``): the share of questions whose answer (offline
  extractive reader) contains the contaminant's wrong answer after injection; any measure of
  the stress table works (``adversarial-hit@5``, ``flip-correct-to-incorrect`` …); its
  direction comes from the bench;
* ``limit`` (all): evaluate the first ``limit`` questions; ``embedder`` (``"minilm"``).

The keys and their types are declared once, :data:`ROBUSTNESS_OPTIONS` (the audit config's
schema uses them, so a wrong key or type is refused when the config is read). Missing data
raises ``FileNotFoundError``; the audit then records robustness as not measured with that
reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from credrank.audit.measures import AuditMeasureError, Measurement
from credrank.audit.profile import NOT_MEASURED, AuditInputError
from credrank.core.schema import Field, Integer, Table, Text

#: the stress bench's sources and positions (``credrank.evaluate.stress.SOURCES`` /
#: ``POSITIONS``, not imported here: that module is slow to import; a test keeps them equal)
SOURCES = ("cram", "newspolluted", "poisonedrag")
POSITIONS = ("first", "middle", "last", "natural")
#: the most contaminants injected per question an audit asks for
MAX_COUNT = 100

#: the options of ``[dimensions.robustness]`` with ``measure = "stress"`` (module docstring)
ROBUSTNESS_OPTIONS: dict[str, Field] = {
    "source": Field(Text(choices=SOURCES), required=False),
    "path": Field(Text(), required=False),
    "corpus": Field(Text(), required=False),
    "position": Field(Text(choices=POSITIONS), required=False),
    "count": Field(Integer(1, MAX_COUNT), required=False),
    "system": Field(Text(), required=False),
    "metric": Field(Text(), required=False),
    "limit": Field(Integer(1), required=False),
    "embedder": Field(Text(), required=False),
}
#: the whole ``[dimensions.robustness]`` table
ROBUSTNESS_SCHEMA = Table({
    "measure": Field(Text(choices=("stress", NOT_MEASURED))),
    "reason": Field(Text(), required=False),
    **ROBUSTNESS_OPTIONS,
}, what="a [dimensions.robustness] table")


def stress_robustness(spec: Mapping[str, Any]) -> Measurement:
    """Run the configured stress test and return its cell as the robustness measurement."""
    from credrank.evaluate.stress import bench_stress
    from credrank.index.embed import get_embedder

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
    system = str(spec.get("system", "similarity only"))
    metric = str(spec.get("metric", "misled-contaminated"))
    limit = spec.get("limit")
    embedder = get_embedder(str(spec.get("embedder", "minilm")))
    result = bench_stress(source, path, embedder, corpus_path=corpus_path,
                          positions=[position], counts=[count],
                          limit=None if limit is None else int(limit))
    table = result.table(f"{position}_n{count}")
    rows = {r.system: r for r in table.rows}
    if system not in rows:
        raise AuditInputError(f"[dimensions.robustness]: system {system!r} is not a row of the "
                              f"stress table; rows: {', '.join(rows)}")
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
    limit_opt = f" --limit {int(limit)}" if limit is not None else ""
    command = (f"credrank bench stress-{source} --path {os.path.normpath(os.path.relpath(path))} "
               f"--positions {position} "
               f"--counts {count}{limit_opt}")
    return Measurement(
        "robustness", f"{metric} under {count} injected contaminant(s) at position {position} "
        f"(stress-{source}, row {system!r}, offline extractive reader)", float(cell.mean),
        "share of questions", (0.0, 1.0), direction == "higher",
        "contaminant labels of the stress data and the offline extractive reader",
        f"{cell.n} questions", interval, ("retrieval", "generation"), reads_labels=True,
        details={"command": command, "flips": flips, "system": system, "position": position,
                 "count": count, "bench_settings": result.settings})
