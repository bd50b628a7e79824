"""The one Markdown renderer of bench results: ``report.md`` and ``credrank bench`` print it.

Everything here is a view of the data in :class:`~credrank.evaluate.result.BenchResult`; no
number is computed, only formatted. Column headers carry the measure's direction (↑ higher
is better, ↓ lower is better), and a system that reads evaluation labels is marked
``[reads labels]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from credrank.evaluate.result import BenchResult
from credrank.evaluate.tables import Cell, ResultTable, Row

ARROWS = {"higher": "↑", "lower": "↓"}
LEGEND = ("↑ higher is better, ↓ lower is better; [reads labels]: the system reads "
          "evaluation labels of the items it is scored on (a reference, not a result).")


def number(value: Any, digits: int = 3, *, signed: bool = False) -> str:
    """``—`` for ``None``; ints as is; floats with ``digits`` decimals."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:+d}" if signed else str(value)
    if isinstance(value, float):
        return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return str(value)


def param(value: Any) -> str:
    """A row parameter as table text (floats to 4 significant digits, mappings as
    ``k v, …``)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {param(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(param(v) for v in value)
    return number(value)


def cell(c: Cell | None, br: str = "<br>") -> str:
    """``mean [low, high]`` and, against the baseline, ``Δ d [low, high], p=…, W/L/T w/l/t``
    after the line break ``br`` (Markdown's ``<br>``; a terminal table passes ``"\n"``)."""
    if c is None:
        return ""
    text = number(c.mean)
    if c.ci_low is not None and c.ci_high is not None:
        text += f" [{number(c.ci_low)}, {number(c.ci_high)}]"
    if c.n is not None and c.ci_low is None:
        text += f" (n={c.n})"
    if c.delta is not None:
        text += f"{br}Δ {number(c.delta, signed=True)}"
        if c.delta_ci_low is not None and c.delta_ci_high is not None:
            text += (f" [{number(c.delta_ci_low, signed=True)}, "
                     f"{number(c.delta_ci_high, signed=True)}]")
        if c.p_value is not None:
            text += f", p={c.p_value:.3g}"
        if c.wins is not None:
            text += f", W/L/T {c.wins}/{c.losses}/{c.ties}"
    return text


def _sentence(note: str) -> str:
    """``note`` ending in a full stop, so that notes run together as one paragraph read as
    sentences."""
    note = note.rstrip()
    return note if not note or note[-1] in ".!?:;)" else note + "."


def row_label(table: ResultTable, row: Row) -> str:
    """A row's first cell: the system, ``[reads labels]`` and ``(baseline)`` where so."""
    label = row.system
    if row.reads_labels:
        label += " [reads labels]"
    if row.system == table.baseline and table.kind != "descriptive":
        label += " (baseline)"
    return label


def param_names(table: ResultTable) -> list[str]:
    """The row parameters of ``table``, in first-seen order (one column each)."""
    return list(dict.fromkeys(k for r in table.rows for k in r.params))


def notes_paragraph(notes: list[str]) -> str:
    """Notes run together as one paragraph of sentences."""
    return " ".join(map(_sentence, notes))


def render_table(table: ResultTable) -> str:
    """The table as Markdown: its notes, the grid, then the notes of single rows."""
    params = param_names(table)
    head = [table.row_header, *params,
            *(f"{c.name} {ARROWS[c.direction]}" for c in table.columns)]
    lines = [notes_paragraph(table.notes), ""] if table.notes else []
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for row in table.rows:
        cells = [row_label(table, row),
                 *(param(row.params[k]) if k in row.params else "" for k in params),
                 *(cell(row.metrics.get(c.name)) for c in table.columns)]
        lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    row_notes = [f"- {r.system}: {n}" for r in table.rows for n in r.notes]
    if row_notes:
        lines += ["", *row_notes]
    return "\n".join(lines)


def sections(result: BenchResult) -> list[tuple[str, str, str | None]]:
    """``(title, markdown, table key)`` per table, in order, after a section on the absent
    signals (table key ``None``) when there are any."""
    out: list[tuple[str, str, str | None]] = []
    if result.absent_signals:
        out.append(("Absent signals", "\n".join(
            f"- {a.signal}: {a.reason}; system not run: {a.system}"
            for a in result.absent_signals), None))
    for table in result.tables:
        body = render_table(table)
        if table.columns:
            body += "\n\n" + LEGEND
        out.append((table.title, body, table.key))
    return out
