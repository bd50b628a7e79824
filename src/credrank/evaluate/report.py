"""Write a bench run to a folder: ``report.md``, ``result.json``, PNG plots, TREC runs and
per-query values.

Every bench takes this one path. ``report.md`` is rendered from the same data as
``result.json`` (:mod:`credrank.evaluate.render`); plots read the tables' cells and the measure
directions from the registry.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.extras import missing_extra
from credrank.evaluate.metrics import write_qrels, write_run
from credrank.evaluate.render import ARROWS, sections
from credrank.evaluate.result import BenchResult, dump_json
from credrank.evaluate.tables import ResultTable

#: the report's Limits where a result says none of its own (``details["limits"]``, a list)
LIMITS = [
    "Small collections: TREC 2019 HM dev has 15 topics and 156 pages; the demo corpus is 10 "
    "synthetic queries. Intervals are wide and p-values rest on few queries.",
    "Fakes in NewsPolluted, CrAM NQ and PoisonedRAG are LLM-written; real misinformation is "
    "written differently.",
    "Labels mean different things in different sets: TREC's harmful = stance contradicts the "
    "Cochrane-based answer; NewsPolluted/CrAM's bad = an injected fake; EvoTemp's low "
    "credibility mixes outdated and false.",
    "Where documents have no provenance, priors are assigned by the experimenter with a stated "
    "error rate; x = 0 is derived from the labels and is an upper bound, not a result.",
    "Rows marked [reads labels] read evaluation labels of the items they are scored on "
    "(priors assigned from labels, even with noise; oracle lines): references, not results.",
]


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(filter(None, keep.split("-")))[:60]


def _plt() -> Any:
    # matplotlib is imported here, not at module level: it is heavy, only needed to plot, and
    # the optional `plots` extra
    try:
        import matplotlib
    except ImportError as exc:
        raise missing_extra("the report's plots", "plots", exc) from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(table: ResultTable, measure: str) -> str:
    col = table.column(measure)
    return f"{measure} {ARROWS[col.direction]} ({col.direction} is better)"


def plot_metric_bars(table: ResultTable, path: Path, name: str) -> None:
    """Mean per measure and system with the 95% bootstrap intervals of the table."""
    plt = _plt()
    rows = table.rows
    systems = [r.system for r in rows]
    fig, axes = plt.subplots(1, len(table.columns), figsize=(4.2 * len(table.columns), 4.8),
                             squeeze=False)
    for ax, col in zip(axes[0], table.columns, strict=True):
        cells = [r.metrics[col.name] for r in rows]
        means = np.array([c.mean or 0.0 for c in cells])
        low = means - np.array([c.ci_low if c.ci_low is not None else m
                                for c, m in zip(cells, means, strict=True)])
        high = np.array([c.ci_high if c.ci_high is not None else m
                         for c, m in zip(cells, means, strict=True)]) - means
        ax.barh(range(len(systems)), means, xerr=[low, high], capsize=3,
                color=["#888888" if s == table.baseline else "#2a6fbb" for s in systems])
        ax.set_yticks(range(len(systems)), labels=systems if ax is axes[0][0] else [""] *
                      len(systems), fontsize=8)
        ax.invert_yaxis()
        ax.set_title(_title(table, col.name), fontsize=10)
    fig.suptitle(f"{name}: means with 95% bootstrap intervals", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_wins(table: ResultTable, path: Path, name: str) -> bool:
    """Per-query wins / losses / ties against the baseline (a win is an improvement in the
    measure's direction), per system and measure; ``False`` (nothing written) when the table
    has no system besides the baseline."""
    rows = [r for r in table.rows if r.system != table.baseline]
    if not rows:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, len(table.columns), figsize=(4.2 * len(table.columns), 4.8),
                             squeeze=False)
    for ax, col in zip(axes[0], table.columns, strict=True):
        w = [r.metrics[col.name].wins or 0 for r in rows]
        lo = [r.metrics[col.name].losses or 0 for r in rows]
        t = [r.metrics[col.name].ties or 0 for r in rows]
        y = np.arange(len(rows))
        ax.barh(y, w, color="#2a9d3a", label="wins")
        ax.barh(y, lo, left=w, color="#c0392b", label="losses")
        ax.barh(y, t, left=np.add(w, lo), color="#cccccc", label="ties")
        ax.set_yticks(y, labels=[r.system for r in rows] if ax is axes[0][0] else [""] *
                      len(rows), fontsize=8)
        ax.invert_yaxis()
        ax.set_title(_title(table, col.name), fontsize=10)
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"{name}: per-query outcome vs {table.baseline}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_sweep(table: ResultTable, path: Path, name: str) -> None:
    """Mean of each measure against the sweep parameter; dotted: the baseline."""
    assert table.parameter is not None
    points = [r for r in table.rows if table.parameter in r.params]
    base = table.row(table.baseline) if table.baseline else None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    x = [r.params[table.parameter] for r in points]
    for col in table.columns:
        ys = [r.metrics[col.name].mean for r in points]
        line = ax.plot(x, ys, marker="o", label=f"{col.name} {ARROWS[col.direction]}")[0]
        if base is not None and base.metrics[col.name].mean is not None:
            ax.axhline(base.metrics[col.name].mean, color=line.get_color(), linestyle=":",
                       linewidth=1)
    ax.set_xlabel(table.parameter)
    ax.set_ylabel(f"mean over queries (dotted: {table.baseline})")
    ax.set_title(f"{name}: {table.title}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: the columns of ``per_query.csv``
PER_QUERY_HEADER = ("table", "system", "measure", "qid", "value")


def per_query_rows(result: BenchResult) -> Iterator[tuple[str, str, str, str, str]]:
    """The rows of ``per_query.csv``: every value a table's tests are computed from, per query
    (each experiment's per-query values, queries sorted) and per other unit
    (``result.per_unit``: topics, held-out items, repeats, in the bench's order), written as
    Python's ``repr`` of the float, so that a paired randomisation test with ties, or any
    mean, can be recomputed from the file exactly."""
    for key, exp in result.experiments.items():
        for system, by_measure in exp.per_query.items():
            for measure, values in by_measure.items():
                for qid, v in sorted(values.items()):
                    yield key, system, measure, str(qid), repr(float(v))
    for key, systems in result.per_unit.items():
        for system, by_measure in systems.items():
            for measure, values in by_measure.items():
                for unit, v in values.items():
                    yield key, system, measure, str(unit), repr(float(v))


def write_per_query(result: BenchResult, path: Path) -> Path:
    """Write ``per_query.csv`` of ``result`` (:func:`per_query_rows`) to ``path``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(PER_QUERY_HEADER)
        w.writerows(per_query_rows(result))
    return path


def _write_experiments(result: BenchResult, out: Path) -> list[Path]:
    """TREC runs (``runs/<system>.run`` for the main table, ``runs/<table>/<system>.run`` for
    others), ``runs/qrels.txt`` and ``per_query.csv`` (:func:`write_per_query`); the files
    written."""
    written: list[Path] = []
    if result.qrels is not None:
        written.append(out / "runs" / "qrels.txt")
        write_qrels(result.qrels, written[-1])
    for key, exp in result.experiments.items():
        folder = out / "runs" if key == "results" else out / "runs" / _slug(key)
        folder.mkdir(parents=True, exist_ok=True)
        for system, run in exp.runs.items():
            written.append(folder / f"{_slug(system)}.run")
            write_run(run, written[-1], tag=_slug(system))
    written.append(write_per_query(result, out / "per_query.csv"))
    return written


def _images(result: BenchResult, table: ResultTable, out: Path) -> list[tuple[str, Path]]:
    """Plot ``table`` when it has something to plot; ``(label, file)`` of each image
    written."""
    if table.kind == "sweep":
        plot_sweep(table, out / f"{table.key}.png", result.name)
        return [(table.key, out / f"{table.key}.png")]
    if table.key in result.experiments:
        prefix = "" if table.key == "results" else f"{_slug(table.key)}-"
        title = f"{result.name}, {table.title}"
        plot_metric_bars(table, out / f"{prefix}metrics.png", title)
        images = [("metrics", out / f"{prefix}metrics.png")]
        if plot_wins(table, out / f"{prefix}wins.png", title):
            images.append(("wins", out / f"{prefix}wins.png"))
        return images
    return []


def _image_lines(images: list[tuple[str, Path]]) -> list[str]:
    """The Markdown lines of ``images`` (``![metrics](metrics.png)``), a blank line between."""
    lines: list[str] = []
    for label, image in images:
        lines += [*([""] if lines else []), f"![{label}]({image.name})"]
    return lines


#: the list of the files :func:`write_report` wrote in its folder (``{"bench": name,
#: "files": [relative paths]}``): what ``--force`` replaces, and nothing else
MANIFEST = "manifest.json"
#: what :func:`write_report` writes at the top of its folder (any of them = "holds a report")
REPORT_FILES = ("report.md", "result.json", "per_query.csv", "runs", MANIFEST)


def listed_files(out: Path, option: str = "--out") -> list[Path]:
    """The files the report in ``out`` wrote, from its :data:`MANIFEST` (none when there is
    no manifest). :class:`ValueError` naming ``option`` and the manifest when it is not one,
    or lists a path outside ``out``."""
    manifest = out / MANIFEST
    if not manifest.exists():
        return []
    bad = f"{option} {out}: {manifest} is not the file list of a credrank bench report"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{bad} ({type(exc).__name__}); remove it or choose another "
                         "folder") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        raise ValueError(f"{bad} (expected {{'files': [relative paths]}}); remove it or "
                         "choose another folder")
    paths = [out / f for f in files]
    outside = [f for f, p in zip(files, paths, strict=True)
               if Path(f).is_absolute() or ".." in Path(f).parts
               or any(q.is_symlink() for q in p.parents if out in q.parents)]
    if outside:
        raise ValueError(f"{bad} (it lists {outside[0]!r}, outside the folder); remove it or "
                         "choose another folder")
    return paths


def clear_report(out: Path) -> list[Path]:
    """Remove the files of the report in ``out`` that its :data:`MANIFEST` lists, the
    manifest, and the sub-folders that this leaves empty; nothing else (a file the user put
    there stays). Returns the files removed."""
    removed: list[Path] = []
    for path in [*listed_files(out), out / MANIFEST]:
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path)
    folders = {p for f in removed for p in f.parents if out in p.parents}
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty: a file the manifest does not list
            folder.rmdir()
    return removed


def _missing_parents(out: Path) -> tuple[Path, list[Path]]:
    """The nearest existing ancestor of ``out`` and the folders below it, top first."""
    missing: list[Path] = []
    here = out
    while not here.exists() and here.parent != here:
        missing.append(here)
        here = here.parent
    return here, missing[::-1]


def prepare_out_dir(out: Path, *, force: bool = False, option: str = "--out") -> list[Path]:
    """Check, before a long run, that ``out`` is a folder :func:`write_report` can write.

    Creates ``out`` (and missing parents) and writes a probe file there. Raises
    :class:`ValueError` (``"{option} …: expected a folder we can write, got …"``) on an
    existing file, a path under a file or a folder that refuses writes (``/proc``), and when
    ``out`` already holds a report (any of :data:`REPORT_FILES`) unless ``force``; with
    ``force`` too when that report has no :data:`MANIFEST` (or a damaged one): ``force``
    replaces the files a listed report wrote (:func:`write_report` clears them), so no file of
    an earlier bench stays unmarked beside the new report, and never a file it did not
    write. Returns the
    folders it created, top first, so that a caller whose run fails can remove them again
    (:func:`remove_created`).
    """
    what = f"{option} {out}: expected a folder we can write, got"
    if out.exists() and not out.is_dir():
        raise ValueError(f"{what} a file")
    base, missing = _missing_parents(out)
    if not base.is_dir():
        raise ValueError(f"{what} a path under the file {base}")
    holds_report = not missing and any((out / name).exists() for name in REPORT_FILES)
    if holds_report and not force:
        raise ValueError(f"{option} {out} already holds a report; pass --force to overwrite")
    if holds_report and not (out / MANIFEST).exists():
        raise ValueError(f"{option} {out} holds a report without its file list ({MANIFEST}: "
                         "written by an earlier credrank or by hand), so --force cannot tell "
                         "its files from yours; remove them or choose another folder")
    if holds_report:
        listed_files(out, option)  # a damaged list is named before the run
    created: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
            created.append(folder)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        remove_created(created)
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"{what} a folder that refuses writes ({reason}: "
                         f"{exc.filename or out})") from None
    return created


def remove_created(created: list[Path]) -> None:
    """Remove the folders :func:`prepare_out_dir` created, where they are still empty."""
    for folder in reversed(created):
        try:
            os.rmdir(folder)
        except OSError:
            return


def report_head(result: BenchResult, command: str = "") -> list[str]:
    """The first lines of every bench report (``--out``'s ``report.md`` and ``--report``):
    the bench, the date, the credrank version, the data and the command."""
    from credrank import __version__

    return [f"# credrank bench {result.name}", "",
            f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  ",
            f"Version: credrank {__version__}  ", f"Data: `{result.path}`  ",
            *([f"Command: `{command}`"] if command else []), ""]


def _json(value: object) -> str:
    """JSON of a report's settings and data, as written (no ``\\u`` escapes)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def write_report(result: BenchResult, out: Path, command: str = "") -> Path:
    """Write everything under ``out``; returns the path of ``report.md``.

    The files of an earlier report there that its :data:`MANIFEST` lists are removed first
    (:func:`clear_report`); the new :data:`MANIFEST` lists every file written."""
    out.mkdir(parents=True, exist_ok=True)
    clear_report(out)
    (out / "runs").mkdir(exist_ok=True)
    (out / "result.json").write_text(dump_json(result), encoding="utf-8")
    written = [out / "result.json"]
    md = [*report_head(result, command),
          "## Settings", "", "```json", _json(result.settings), "```", "",
          "## Data", "", "```json", _json(result.summary), "```", ""]
    types = result.details.get("source_types")
    if types:
        md += ["Source types derived from URLs: " + ", ".join(
            f"{k} {v}" for k, v in types.items()), ""]
    written += _write_experiments(result, out)
    if result.main is not None:
        md += ["Tables: mean [95% percentile-bootstrap CI over queries]; for each system, Δ vs "
               "the baseline with the bootstrap CI of the paired difference, the p-value of a "
               "two-sided paired randomisation test and per-query wins/losses/ties (a win is "
               "an improvement in the measure's direction).", ""]
    for title, body, key in sections(result):
        md += [f"## {title}", "", body, ""]
        images = _images(result, result.table(key), out) if key is not None else []
        written += [image for _, image in images]
        md += [*_image_lines(images), ""] if images else []
    md += ["## Notes from the data reader", ""] + [f"- {n}" for n in result.notes] + [""]
    limits = result.details.get("limits")  # the bench's own, where it says them
    md += ["## Limits", ""] + [f"- {n}" for n in
                               (limits if isinstance(limits, list) else LIMITS)] + [""]
    path = out / "report.md"
    path.write_text("\n".join(md), encoding="utf-8")
    written.append(path)
    files = sorted({p.relative_to(out).as_posix() for p in written if p.is_file()})
    (out / MANIFEST).write_text(json.dumps({"bench": result.name, "files": files}, indent=1)
                                + "\n", encoding="utf-8")
    return path
