"""Result tables as data: every table a bench reports, in JSON and (rendered) in Markdown.

A :class:`ResultTable` has measure columns (:class:`Column`, each with the direction its
measure has in :mod:`credrank.evaluate.metrics`' registry) and rows (:class:`Row`): one per
system, each saying whether the system reads evaluation labels (``reads_labels``), what the
row is (``params``: a sweep's parameter value, counts, settings) and one :class:`Cell` per
measure. A cell holds the numbers the table has — the mean, its interval, the difference
from the baseline with its interval, p-value and per-query wins/losses/ties — and leaves the
others out (``None``, absent from the JSON); nothing is filled in to look complete.

Kinds: ``systems`` (systems side by side, optionally against a baseline), ``sweep``
(the same system at several values of ``parameter``) and ``descriptive`` (rows describe the
data, not systems; ``reads_labels`` is ``None`` there). The one Markdown renderer is
:mod:`credrank.evaluate.render`; this module holds data only.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from credrank.core.validation import check_choice
from credrank.evaluate.metrics import Direction, measure_direction

Kind = Literal["systems", "sweep", "descriptive"]
_COUNTS = frozenset({"n", "wins", "losses", "ties"})
KINDS: tuple[str, ...] = ("systems", "sweep", "descriptive")


def check_json(name: str, value: Any) -> Any:
    """``value`` unchanged when it is JSON data without NaN or infinity; else ValueError."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number; got {value!r}")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{name}: expected str keys; got {k!r}")
            check_json(f"{name}[{k!r}]", v)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_json(f"{name}[{i}]", v)
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{name}: expected JSON data (str, number, bool, list, dict, None); "
                         f"got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class Cell:
    """One system's numbers for one measure; ``None`` = the table does not have that number.

    ``mean`` is the point value (``None`` when undefined, e.g. an AUC with one class);
    ``ci_low``/``ci_high`` its interval; ``n`` the number of queries (or items) behind it;
    ``delta`` = this system − the baseline (raw: for a lower-is-better measure a negative
    delta is the improvement) with ``delta_ci_low``/``delta_ci_high``; ``p_value`` of the
    paired test named by ``test``; ``wins``/``losses``/``ties`` per query, where a win is an
    improvement in the measure's direction.
    """

    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    delta: float | None = None
    delta_ci_low: float | None = None
    delta_ci_high: float | None = None
    p_value: float | None = None
    wins: int | None = None
    losses: int | None = None
    ties: int | None = None
    test: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name == "test":
                if not isinstance(value, str):
                    raise ValueError(f"Cell.test: expected a str or None; got {value!r}")
                continue
            integral = f.name in _COUNTS
            kind = numbers.Integral if integral else numbers.Real
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ValueError(f"Cell.{f.name}: expected {'an int' if integral else 'a number'}"
                                 f" or None; got {value!r}")
            if integral and isinstance(value, numbers.Integral):  # always, when integral
                object.__setattr__(self, f.name, int(value))
            else:
                object.__setattr__(self, f.name, check_json(f"Cell.{f.name}", float(value)))

    def to_json(self) -> dict[str, Any]:
        """``mean`` always (``null`` when undefined); other numbers only when the table has
        them."""
        out: dict[str, Any] = {"mean": self.mean}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "mean" and value is not None:
                out[f.name] = value
        return out


@dataclass(frozen=True)
class Column:
    """A measure column: its label, the registered measure it reports, and that measure's
    direction (looked up in the registry, never guessed from the label)."""

    name: str
    measure: str
    direction: Direction = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Column.name: expected a non-empty str; got {self.name!r}")
        object.__setattr__(self, "direction", measure_direction(self.measure))

    @classmethod
    def of(cls, measure: str) -> Column:
        """A column labelled with the measure's own name."""
        return cls(measure, measure)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "measure": self.measure, "direction": self.direction}


@dataclass
class Row:
    """One row: a system (or, in a descriptive table, a group of the data).

    ``reads_labels``: ``True`` when the system reads evaluation labels of the items it is
    scored on (see docs/json.md for the rule), ``False`` when it does not, ``None`` in a
    descriptive table. ``params`` say what the row is (JSON data); ``metrics`` map column
    names to cells; ``stages`` describe the pipeline when the system is one; ``pipeline`` is
    its spec (``PipelineSpec.to_dict()``) when the system is a plain credrank search:
    ``credrank search --pipeline`` with it runs exactly what the row measured.
    """

    system: str
    reads_labels: bool | None
    metrics: dict[str, Cell]
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, Any] | None = None
    pipeline: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.system, str) or not self.system:
            raise ValueError(f"Row.system: expected a non-empty str; got {self.system!r}")
        if self.reads_labels is not None and not isinstance(self.reads_labels, bool):
            raise ValueError(f"Row {self.system!r}: reads_labels expected True, False or None; "
                             f"got {self.reads_labels!r}")
        check_json(f"Row {self.system!r} params", self.params)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"system": self.system, "reads_labels": self.reads_labels,
                               "notes": list(self.notes), "params": dict(self.params),
                               "metrics": {m: c.to_json() for m, c in self.metrics.items()}}
        if self.stages is not None:
            out["stages"] = self.stages
        if self.pipeline is not None:
            out["pipeline"] = self.pipeline
        return out


@dataclass
class ResultTable:
    """A table of rows × measure columns (see the module docstring)."""

    key: str
    title: str
    columns: list[Column]
    rows: list[Row]
    kind: Kind = "systems"
    baseline: str | None = None
    parameter: str | None = None
    row_header: str = "system"
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_choice(f"ResultTable {self.key!r}: kind", self.kind, KINDS)
        names = [r.system for r in self.rows]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"ResultTable {self.key!r}: row names must be unique; repeated "
                             f"{dup}")
        columns = [c.name for c in self.columns]
        if len(set(columns)) != len(columns):
            raise ValueError(f"ResultTable {self.key!r}: column names must be unique; got "
                             f"{columns}")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"ResultTable {self.key!r}: baseline {self.baseline!r} is not "
                             f"among the rows {names}")
        for row in self.rows:
            unknown = sorted(set(row.metrics) - set(columns))
            if unknown:
                raise ValueError(f"ResultTable {self.key!r}, row {row.system!r}: metrics "
                                 f"{unknown} are not columns {columns}")
            if self.kind != "descriptive" and row.reads_labels is None:
                raise ValueError(f"ResultTable {self.key!r}, row {row.system!r}: a system row "
                                 "must say whether it reads labels (True/False)")
        if self.kind == "sweep" and not self.parameter:
            raise ValueError(f"ResultTable {self.key!r}: a sweep needs its parameter name")

    def row(self, system: str) -> Row:
        """The row named ``system``."""
        for r in self.rows:
            if r.system == system:
                return r
        raise KeyError(f"table {self.key!r} has no row {system!r}; rows: "
                       f"{[r.system for r in self.rows]}")

    def column(self, name: str) -> Column:
        """The column named ``name``."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.key!r} has no column {name!r}; columns: "
                       f"{[c.name for c in self.columns]}")

    def mean(self, system: str, column: str) -> float | None:
        """The mean of ``system`` in ``column`` (``None`` when the table has none)."""
        cell = self.row(system).metrics.get(column)
        return None if cell is None else cell.mean

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "title": self.title, "kind": self.kind,
                               "row_header": self.row_header, "baseline": self.baseline}
        if self.parameter is not None:
            out["parameter"] = self.parameter
        out.update(measures=[c.to_json() for c in self.columns], notes=list(self.notes),
                   rows=[r.to_json() for r in self.rows])
        return out


def descriptive_table(key: str, title: str, rows: Sequence[tuple[str, Mapping[str, Any]]], *,
                      row_header: str, notes: Sequence[str] = ()) -> ResultTable:
    """A table of data facts only: ``rows`` are ``(label, params)``; no measures."""
    return ResultTable(key, title, [], [Row(label, None, {}, params=dict(params))
                                        for label, params in rows],
                       kind="descriptive", row_header=row_header, notes=list(notes))
