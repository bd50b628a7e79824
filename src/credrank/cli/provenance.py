"""``credrank provenance audit``: laundering candidates of an index (chapter 35.7).

Lists the documents whose publication date is later than the evidence date they inherit along
``cites`` edges (and, with ``--copies``, near-duplicate copy edges): the wrapper, its origin,
the hop chain, ``w(T, t_n)``, ``w(T, t_0)``, the distortion ``ρ = w(T, t_n)/w(T, t_0)`` and the
bound ``2^((T − t_0)/τ)``. The rules are those of :mod:`credrank.freshness.lineage`.

The lead mounts :data:`app` as ``credrank provenance``. ``--json`` output is data all the way
down, marked ``"credrank_provenance_audit": 1``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import console, fail
from credrank.consensus.duplicates import duplicate_groups
from credrank.freshness.dates import parse_instant
from credrank.freshness.lineage import (
    COPY_COSINE,
    COPY_JACCARD,
    COPY_NEIGHBOURS,
    COPY_SHINGLE,
    DAYS_PER_YEAR,
    AuditReport,
    ProvenanceGraph,
    StoreSource,
    audit,
)
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.index.store import StoreError

app = typer.Typer(help="Provenance audits: citation chains and credibility laundering.",
                  no_args_is_help=True, add_completion=False)

COPY_MODES = ("off", "text", "embedding")
_UNITS = {"h": 1 / 24, "d": 1.0, "w": 7.0, "y": DAYS_PER_YEAR}


@app.callback()
def _provenance() -> None:
    """Trace citation chains (chapter 35.7): which pages repeat older evidence under a new
    date."""


def parse_half_life(text: str) -> float:
    """``365d`` | ``52w`` | ``1y`` (365.25 days) | ``12h`` | a bare number of days → days;
    ``ValueError`` for anything else or a half-life that is not positive and finite."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([hdwy]?)\s*", str(text))
    if not m:
        raise ValueError(f"--half-life: expected a duration such as 365d, 52w, 1y or 12h, "
                         f"got {text!r}")
    days = float(m.group(1)) * _UNITS[m.group(2) or "d"]
    if not (days > 0 and days != float("inf")):
        raise ValueError(f"--half-life: expected a positive duration, got {text!r}")
    return days


def parse_now(text: str | None) -> datetime:
    """``--now`` (ISO date or instant, UTC) or the current time."""
    if text is None:
        return datetime.now(UTC)
    got = parse_instant(text, "--now")
    assert got is not None
    return got


def _fmt_date(value: str | None) -> str:
    return value[:10] if value else "unknown"


def summary(report: dict[str, Any]) -> str:
    """The human-readable table of an audit (from :meth:`AuditReport.to_dict`)."""
    c = report["counts"]
    lines = [
        f"T = {report['now']}, half-life {report['half_life_days']:g} days; "
        f"{report['documents']} documents, {c['inherited']} inherit an origin's date "
        f"({c['inherited_unknown']} undated), {c['independent_remeasurements']} independent "
        f"re-measurements; {c['candidates']} laundering candidates",
    ]
    if report["candidates"]:
        lines.append(f"{'wrapper':<20} {'t_n':<10} {'origin':<20} {'t_0':<10} {'hops':>4} "
                     f"{'w(T,t_n)':>10} {'w(T,t_0)':>10} {'ratio':>10} {'bound':>10}")
        for k in report["candidates"]:
            lines.append(
                f"{k['wrapper']:<20} {_fmt_date(k['t_n']):<10} {k['origin']:<20} "
                f"{_fmt_date(k['t_0']):<10} {k['hops']:>4} {k['weight_wrapper']:>10.6g} "
                f"{k['weight_origin']:>10.6g} {k['ratio']:>10.6g} {k['bound']:>10.6g}")
            lines.append("    chain: " + " <- ".join(
                f"{h['doc_id']} ({_fmt_date(h['date'])}"
                + (f", {h['edge']}" if h["edge"] else "") + ")" for h in k["chain"]))
    for cyc in report["cycles"]:
        lines.append(f"cycle (reported, not followed): {' -> '.join(cyc)}")
    if report["dangling"]:
        shown = ", ".join(f"{d['doc_id']} -> {d['cites']}" for d in report["dangling"][:10])
        more = len(report["dangling"]) - 10
        lines.append(f"dangling citations (not in the index): {shown}"
                     + (f" and {more} more" if more > 0 else ""))
    if report["anachronisms"]:
        lines.append("published before their origin's evidence date (check the data): "
                     + ", ".join(report["anachronisms"]))
    copies = report.get("copies", {})
    if copies.get("mode", "off") != "off":
        lines.append(f"copy detection: {copies['test']}; {copies['searches']} neighbour "
                     f"searches of k = {copies['neighbours']}; {copies['undirected']} "
                     "same-date/undated copies left without a direction")
    w = report["work"]
    lines.append(f"work: {w['fetched']} records fetched, {w['expanded']} nodes expanded, "
                 f"{w['edges']} edges walked")
    return "\n".join(lines)


@app.command("audit")
def audit_command(
    index_dir: Annotated[Path, typer.Option("--index", help="the index directory to audit")],
    half_life: Annotated[str, typer.Option(
        "--half-life", help="τ: 365d, 52w, 1y (= 365.25 days), 12h or days")] = "1y",
    now: Annotated[str | None, typer.Option(
        "--now", help="evaluation time T (YYYY-MM-DD or ISO instant; default: now, UTC)")
    ] = None,
    copies: Annotated[str, typer.Option(
        "--copies", help="copy edges without citation: off, text (3-gram Jaccard >= 0.5 "
                         "among each document's nearest neighbours) or embedding (text or "
                         "cosine >= 0.95)")] = "off",
    neighbours: Annotated[int, typer.Option(
        "--neighbours", help="neighbours searched per document for copies")] = COPY_NEIGHBOURS,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """List laundering candidates: wrapper, origin, hop chain, ratio and the chapter's bound."""
    try:
        tau = parse_half_life(half_life)
        t = parse_now(now)
        if copies not in COPY_MODES:
            raise ValueError(f"--copies: expected one of {', '.join(COPY_MODES)}, got "
                             f"{copies!r}")
        if neighbours < 1:
            raise ValueError(f"--neighbours: expected an integer >= 1, got {neighbours}")
    except ValueError as exc:
        fail(str(exc))
    try:
        with open_store(index_dir) as store:
            test = None
            embed = None
            if copies != "off":
                cosine = COPY_COSINE if copies == "embedding" else None
                test = partial(duplicate_groups, jaccard=COPY_JACCARD, shingle=COPY_SHINGLE,
                               cosine=cosine)
                embed = get_embedder(store.manifest.embedder).embed
            source = StoreSource(store, t, copies=test, embed=embed, neighbours=neighbours,
                                 with_vectors=copies == "embedding")
            graph = ProvenanceGraph(source)
            ids = sorted(str(p["doc_id"]) for p in store.read_payloads(None, ("doc_id",)))
            report: AuditReport = audit(graph, ids, t, tau)
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    data = report.to_dict()
    data["index"] = str(index_dir)
    data["copies"] = {
        "mode": copies, "neighbours": neighbours if copies != "off" else None,
        "test": None if copies == "off" else
        (f"word {COPY_SHINGLE}-gram Jaccard >= {COPY_JACCARD}"
         + (f" or cosine >= {COPY_COSINE}" if copies == "embedding" else "")),
        "searches": source.searches, "undirected": source.undirected_copies,
    }
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        console.print(summary(data), markup=False, highlight=False, soft_wrap=True)
