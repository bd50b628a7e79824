"""Write a bench run to a folder: ``report.md``, PNG plots, TREC runs and per-query tables."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from credrank.evaluate.bench import BenchResult
from credrank.evaluate.metrics import write_qrels, write_run

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
]


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(filter(None, keep.split("-")))[:60]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_metric_bars(result: BenchResult, path: Path) -> None:
    """Mean per measure and system with 95% bootstrap intervals."""
    plt = _plt()
    main = result.main
    systems = [r["system"] for r in main.rows]
    fig, axes = plt.subplots(1, len(main.measures), figsize=(4.2 * len(main.measures), 4.8),
                             squeeze=False)
    for ax, m in zip(axes[0], main.measures, strict=True):
        means = np.array([r["metrics"][m]["mean"] for r in main.rows])
        low = means - np.array([r["metrics"][m]["ci_low"] for r in main.rows])
        high = np.array([r["metrics"][m]["ci_high"] for r in main.rows]) - means
        ax.barh(range(len(systems)), means, xerr=[low, high], capsize=3,
                color=["#888888"] + ["#2a6fbb"] * (len(systems) - 1))
        ax.set_yticks(range(len(systems)), labels=systems if ax is axes[0][0] else [""] *
                      len(systems), fontsize=8)
        ax.invert_yaxis()
        ax.set_title(m + (" (lower is better)" if m.startswith("harmful") else ""), fontsize=10)
    fig.suptitle(f"{result.name}: means with 95% bootstrap intervals", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_wins(result: BenchResult, path: Path) -> None:
    """Per-query wins / losses / ties against the baseline, per system and measure."""
    plt = _plt()
    main = result.main
    rows = [r for r in main.rows if r["system"] != main.baseline]
    if not rows:
        return
    fig, axes = plt.subplots(1, len(main.measures), figsize=(4.2 * len(main.measures), 4.8),
                             squeeze=False)
    for ax, m in zip(axes[0], main.measures, strict=True):
        w = [r["metrics"][m]["vs_baseline"]["wins"] for r in rows]
        lo = [r["metrics"][m]["vs_baseline"]["losses"] for r in rows]
        t = [r["metrics"][m]["vs_baseline"]["ties"] for r in rows]
        y = np.arange(len(rows))
        ax.barh(y, w, color="#2a9d3a", label="wins")
        ax.barh(y, lo, left=w, color="#c0392b", label="losses")
        ax.barh(y, t, left=np.add(w, lo), color="#cccccc", label="ties")
        ax.set_yticks(y, labels=[r["system"] for r in rows] if ax is axes[0][0] else [""] *
                      len(rows), fontsize=8)
        ax.invert_yaxis()
        ax.set_title(m, fontsize=10)
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"{result.name}: per-query outcome vs {main.baseline}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(result: BenchResult, key: str, path: Path) -> None:
    plt = _plt()
    sweep = result.sweeps[key]
    x = sweep["values"]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for m, ys in sweep["measures"].items():
        line = ax.plot(x, ys, marker="o", label=m)[0]
        ax.axhline(sweep["baseline"][m], color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlabel(sweep["parameter"])
    ax.set_ylabel("mean over queries (dotted: similarity only)")
    ax.set_title(f"{result.name}: {key.replace('_', ' ')}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _sweep_table(sweep: dict[str, Any]) -> str:
    measures = list(sweep["measures"])
    lines = [f"| {sweep['parameter']} | " + " | ".join(measures) + " |",
             "|---|" + "---|" * len(measures),
             "| similarity only | " + " | ".join(f"{sweep['baseline'][m]:.3f}"
                                                  for m in measures) + " |"]
    for i, v in enumerate(sweep["values"]):
        label = f"{v:.0%}" if "wrong" in sweep["parameter"] else f"{v:g}"
        lines.append(f"| {label} | " + " | ".join(f"{sweep['measures'][m][i]:.3f}"
                                                   for m in measures) + " |")
    return "\n".join(lines)


def markdown_sections(result: BenchResult) -> list[tuple[str, str]]:
    """``(title, markdown)`` for the main table, each sweep and each table-bearing extra."""
    out = []
    if result.main is not None:
        out.append(("Results", result.main.markdown()))
    for key, sweep in result.sweeps.items():
        body = _sweep_table(sweep)
        if "priors" in sweep:
            body += f"\n\nPriors: {sweep['priors']}."
        out.append((f"Sweep: {key.replace('_', ' ')}", body))
    for key, text in result.extra.items():
        if isinstance(text, str) and "|---" in text:
            out.append((key.replace("_", " ").capitalize(), text))
    return out


def write_report(result: BenchResult, out: Path, qrels: dict[str, dict[str, int]] | None = None,
                 command: str = "") -> Path:
    """Write everything under ``out``; returns the path of ``report.md``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    (out / "result.json").write_text(json.dumps(result.to_json(), indent=2, default=str))
    md = [f"# credrank bench {result.name}", "",
          f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  ", f"Data: `{result.path}`  ",
          f"Command: `{command}`" if command else "", "",
          "## Settings", "", "```json", json.dumps(result.settings, indent=2), "```", "",
          "## Data", "", "```json", json.dumps(result.summary, indent=2), "```", ""]
    if result.extra.get("source_types"):
        md += ["Source types derived from URLs: " + ", ".join(
            f"{k} {v}" for k, v in result.extra["source_types"].items()), ""]
    if result.main is not None:
        main = result.main
        if qrels is not None:
            write_qrels(qrels, out / "runs" / "qrels.txt")
        for system, run in main.runs.items():
            write_run(run, out / "runs" / f"{_slug(system)}.run", tag=_slug(system))
        with (out / "per_query.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["system", "measure", "qid", "value"])
            for system, by_measure in main.per_query.items():
                for m, values in by_measure.items():
                    for qid, v in sorted(values.items()):
                        w.writerow([system, m, qid, f"{v:.6f}"])
        plot_metric_bars(result, out / "metrics.png")
        plot_wins(result, out / "wins.png")
        md += ["## Results", "",
               f"Mean [95% percentile-bootstrap CI over queries]; for each system, Δ vs "
               f"`{main.baseline}` with the bootstrap CI of the paired difference, the p-value "
               "of a two-sided paired randomisation test and per-query wins/losses/ties "
               "(for harmful@k a win is a decrease).", "", main.markdown(), "",
               "![metrics](metrics.png)", "", "![wins](wins.png)", ""]
    for key in result.sweeps:
        plot_sweep(result, key, out / f"{key}.png")
    for title, body in markdown_sections(result)[1 if result.main is not None else 0:]:
        md += [f"## {title}", "", body, ""]
        if title.startswith("Sweep: "):
            key = title[len("Sweep: "):].replace(" ", "_")
            md += [f"![{key}]({key}.png)", ""]
    md += ["## Notes from the data reader", ""] + [f"- {n}" for n in result.notes] + [""]
    md += ["## Limits", ""] + [f"- {n}" for n in LIMITS] + [""]
    path = out / "report.md"
    path.write_text("\n".join(md))
    return path
