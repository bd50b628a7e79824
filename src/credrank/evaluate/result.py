"""What every ``credrank bench NAME`` returns: one :class:`BenchResult`, one JSON shape.

A bench result is a list of tables (:class:`~credrank.evaluate.tables.ResultTable`: the
systems side by side, sweeps, experiment tables), the experiments behind some of them
(per-query values and runs, for ``--out``), the signals a bench could not use because the data
lacks them (:class:`AbsentSignal`), and further JSON data (``details``). The JSON document
(:meth:`BenchResult.to_json`, documented in docs/json.md) holds every table as data; Markdown
is only ever rendered from it (:mod:`credrank.evaluate.render`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credrank.evaluate.experiment import ExperimentResult
from credrank.evaluate.tables import ResultTable, check_json

#: version of the bench JSON document (``"credrank_bench": 2``)
FORMAT_VERSION = 2


@dataclass(frozen=True)
class AbsentSignal:
    """A signal a system needs that the data does not carry, so the system was not run.

    ``signal``: the field (e.g. ``gpt_truthfulness_0_10``); ``system``: the system left out;
    ``documents``: how many documents were checked; ``reason``: in words.
    """

    signal: str
    system: str
    documents: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"signal": self.signal, "system": self.system, "documents": self.documents,
                "reason": self.reason}


@dataclass
class BenchResult:
    """Everything a bench run measured (JSON via :meth:`to_json`, see docs/json.md).

    ``tables`` in report order; ``experiments`` by table key (per-query values and runs of
    the tables that have them; ``main`` is the ``results`` one); ``qrels`` are written as
    ``runs/qrels.txt`` by ``--out`` and are not in the JSON; ``per_unit`` (table → system →
    measure → unit → value) holds the values of tables tested on units that are not queries
    (topics, held-out items, repeats), written to ``per_query.csv`` by ``--out`` and not in
    the JSON.
    """

    name: str
    path: str
    settings: dict[str, Any]
    summary: dict[str, Any]
    notes: list[str]
    tables: list[ResultTable] = field(default_factory=list)
    experiments: dict[str, ExperimentResult] = field(default_factory=dict)
    absent_signals: list[AbsentSignal] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] | None = None
    per_unit: dict[str, dict[str, dict[str, dict[str, float]]]] = field(default_factory=dict)

    @property
    def main(self) -> ExperimentResult | None:
        """The main side-by-side experiment (table key ``results``), if the bench has one."""
        return self.experiments.get("results")

    def add_table(self, table: ResultTable) -> ResultTable:
        """Append ``table`` (its key must be new)."""
        if any(t.key == table.key for t in self.tables):
            raise ValueError(f"bench {self.name}: a table with key {table.key!r} exists already")
        self.tables.append(table)
        return table

    def add_experiment(self, experiment: ExperimentResult) -> ExperimentResult:
        """Append the experiment's table and keep its per-query values and runs."""
        self.add_table(experiment.table)
        self.experiments[experiment.table.key] = experiment
        return experiment

    def table(self, key: str) -> ResultTable:
        """The table with ``key``."""
        for t in self.tables:
            if t.key == key:
                return t
        raise KeyError(f"bench {self.name} has no table {key!r}; tables: "
                       f"{[t.key for t in self.tables]}")

    def to_json(self) -> dict[str, Any]:
        doc = {"credrank_bench": FORMAT_VERSION, "bench": self.name, "path": self.path,
               "settings": self.settings, "data": self.summary, "notes": list(self.notes),
               "absent_signals": [a.to_json() for a in self.absent_signals],
               "tables": {t.key: t.to_json() for t in self.tables},
               "details": self.details}
        return check_json("bench JSON", json.loads(json.dumps(doc, default=_plain)))


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python numbers and lists, paths as text; anything else is
    an error (a value the JSON cannot hold is a bug, not something to stringify)."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"bench JSON: cannot write a {type(value).__name__} ({value!r:.60})")


def dump_json(result: BenchResult) -> str:
    """The bench JSON document as text (``credrank bench NAME --json``)."""
    return json.dumps(result.to_json(), indent=2)
