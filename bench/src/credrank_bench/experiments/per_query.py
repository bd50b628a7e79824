"""``per_query.csv`` of ``credrank bench NAME --out DIR``: every value a table's tests are
computed from, per unit, at full precision.

The units are the queries of the benches that rank (``result.experiments``: each table's
per-query values) and, for the benches whose tables are tested on other units, those units
(:class:`UnitBenchResult`): Golden-Gaze's topics (1.0 when a system's answer to the topic is
right, 0.0 otherwise: the accuracy, its Δ and the wins/losses/ties), hosts (the correlation
table's estimate and accuracy per host) and anchor-set repeats; CoAID's held-out items (each
predictor's P(real), log-loss and Brier terms, and the label); the RA-RAG simulation's
simulated sets (``repeat i``). The columns are ``table,system,measure,qid,value`` (``qid``: the
unit's id); a value is written as Python's ``repr`` of the float, so that a paired
randomisation test with ties, or any mean, can be recomputed from the file exactly.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from credrank.evaluate.result import BenchResult

#: table → system → measure → unit → value
PerUnit = dict[str, dict[str, dict[str, dict[str, float]]]]

HEADER = ("table", "system", "measure", "qid", "value")


@dataclass
class UnitBenchResult(BenchResult):
    """A :class:`BenchResult` whose tables are computed from units that are not queries:
    ``per_unit`` holds their values (written to ``per_query.csv``, not to the JSON)."""

    per_unit: PerUnit = field(default_factory=dict)


def number(value: float) -> str:
    """``value`` at full precision: the shortest text that reads back as the same float."""
    return repr(float(value))


def per_query_rows(result: BenchResult) -> Iterator[tuple[str, str, str, str, str]]:
    """The rows of ``per_query.csv`` (module docstring), tables in report order."""
    for key, exp in result.experiments.items():
        for system, by_measure in exp.per_query.items():
            for measure, values in by_measure.items():
                for qid, v in sorted(values.items()):
                    yield key, system, measure, str(qid), number(v)
    if isinstance(result, UnitBenchResult):
        for key, systems in result.per_unit.items():
            for system, by_measure in systems.items():
                for measure, values in by_measure.items():
                    for unit, v in values.items():
                        yield key, system, measure, str(unit), number(v)


def write_per_query(result: BenchResult, path: Path) -> Path:
    """Write ``per_query.csv`` of ``result`` to ``path`` (replacing the file)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(per_query_rows(result))
    return path


__all__ = ["HEADER", "PerUnit", "UnitBenchResult", "per_query_rows", "write_per_query"]
