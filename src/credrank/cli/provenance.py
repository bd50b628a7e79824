"""``credrank provenance audit``: laundering candidates of an index (chapter 35.7).

Lists the documents whose publication date is later than the evidence date they inherit along
``cites`` edges (and, with ``--copies``, near-duplicate copy edges): the wrapper, its origin,
the hop chain, ``w(T, t_n)``, ``w(T, t_0)``, the distortion ``ρ = w(T, t_n)/w(T, t_0)`` and the
bound ``2^((T − t_0)/τ)``. The rules are those of :mod:`credrank.freshness.lineage`.

Each wrapper's chain lists at most ``--max-hops-listed`` hops (default
:data:`~credrank.freshness.lineage.MAX_HOPS_LISTED`): the first half and the last half ending at
the origin, with ``hops`` exact and ``hops_elided`` counting the rest, so the report stays
linear in the index (a 10,000-document chain is 10,000 wrappers, not 50 million hops). Ratios
beyond the float range are ``null`` beside their exact ``log2_`` exponents (the range policy of
:mod:`credrank.freshness.lineage`). Both outputs are written one candidate at a time.

The lead mounts :data:`app` as ``credrank provenance``. ``--json`` output is data all the way
down, marked ``"credrank_provenance_audit": 1`` (docs/json.md).
"""

from __future__ import annotations

import io
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import Bars, QuietOption, fail, show_progress
from credrank.consensus.duplicates import duplicate_groups
from credrank.freshness.dates import parse_instant
from credrank.freshness.lineage import (
    COPY_COSINE,
    COPY_JACCARD,
    COPY_NEIGHBOURS,
    COPY_SHINGLE,
    DAYS_PER_YEAR,
    MAX_HOPS_LISTED,
    AuditReport,
    ProvenanceGraph,
    StoreSource,
    audit,
    check_audit_half_life,
    check_max_hops_listed,
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
    """Trace citation chains: which pages repeat older evidence under a new
    date."""


def parse_half_life(text: str) -> float:
    """``365d`` | ``52w`` | ``1y`` (365.25 days) | ``12h`` | a bare number of days → days;
    ``ValueError`` for anything else or a half-life that is not positive, finite and at least
    one microsecond (:func:`~credrank.freshness.lineage.check_audit_half_life`)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([hdwy]?)\s*", str(text))
    if not m:
        raise ValueError(f"--half-life: expected a duration such as 365d, 52w, 1y or 12h, "
                         f"got {text!r}")
    days = float(m.group(1)) * _UNITS[m.group(2) or "d"]
    if not (math.isfinite(days) and days > 0):
        raise ValueError(f"--half-life: expected a positive, finite duration, got {text!r}")
    return check_audit_half_life(days, f"--half-life ({text!r})")


def parse_now(text: str | None) -> datetime:
    """``--now`` (ISO date or instant, UTC) or the current time."""
    if text is None:
        return datetime.now(UTC)
    got = parse_instant(text, "--now")
    assert got is not None
    return got


def _fmt_date(value: str | None) -> str:
    return value[:10] if value else "unknown"


def _fmt_ratio(value: float | None, log2: float) -> str:
    return f"{value:>10.6g}" if value is not None else f"{f'2^{log2:.6g}':>10}"


def summary_lines(report: dict[str, Any], candidates: Iterable[dict[str, Any]] | None = None
                  ) -> Iterator[str]:
    """The human-readable table of an audit, line by line: ``report`` is
    :meth:`AuditReport.header` (plus ``copies``), ``candidates`` its candidates' objects (as
    :meth:`AuditReport.iter_candidates` yields them; default ``report["candidates"]``). A ratio
    beyond the float range prints as ``2^x``."""
    c = report["counts"]
    yield (f"T = {report['now']}, half-life {report['half_life']:g} days; "
           f"{report['documents']} documents, {c['inherited']} inherit an origin's date "
           f"({c['inherited_unknown']} undated), {c['independent_remeasurements']} independent "
           f"re-measurements; {c['candidates']} laundering candidates")
    if c["candidates"]:
        yield (f"{'wrapper':<20} {'t_n':<10} {'origin':<20} {'t_0':<10} {'hops':>4} "
               f"{'w(T,t_n)':>10} {'w(T,t_0)':>10} {'ratio':>10} {'bound':>10}")
        for k in report["candidates"] if candidates is None else candidates:
            yield (f"{k['wrapper']:<20} {_fmt_date(k['t_n']):<10} {k['origin']:<20} "
                   f"{_fmt_date(k['t_0']):<10} {k['hops']:>4} {k['weight_wrapper']:>10.6g} "
                   f"{k['weight_origin']:>10.6g} {_fmt_ratio(k['ratio'], k['log2_ratio'])} "
                   f"{_fmt_ratio(k['bound'], k['log2_bound'])}")
            shown = [f"{h['doc_id']} ({_fmt_date(h['date'])}"
                     + (f", {h['edge']}" if h["edge"] else "") + ")" for h in k["chain"]]
            if k.get("hops_elided"):
                shown.insert(k["chain_gap"], f"... {k['hops_elided']} hops elided ...")
            yield "    chain: " + " <- ".join(shown)
    for cyc in report["cycles"]:
        yield f"cycle (reported, not followed): {' -> '.join(cyc)}"
    if report["dangling"]:
        shown_d = ", ".join(f"{d['doc_id']} -> {d['cites']}" for d in report["dangling"][:10])
        more = len(report["dangling"]) - 10
        yield (f"dangling citations (not in the index): {shown_d}"
               + (f" and {more} more" if more > 0 else ""))
    if report["anachronisms"]:
        yield ("published before their origin's evidence date (check the data): "
               + ", ".join(report["anachronisms"]))
    copies = report.get("copies", {})
    if copies.get("mode", "off") != "off":
        yield (f"copy detection: {copies['test']}; {copies['searches']} neighbour "
               f"searches of k = {copies['neighbours']}; {copies['undirected']} "
               "same-date/undated copies left without a direction")
    w = report["work"]
    yield (f"work: {w['fetched']} records fetched, {w['expanded']} nodes expanded, "
           f"{w['edges']} edges walked")


def summary(report: dict[str, Any]) -> str:
    """The human-readable table of an audit (from :meth:`AuditReport.to_dict`) as one
    string."""
    return "\n".join(summary_lines(report))


@app.command("audit")
def audit_command(
    index_dir: Annotated[Path, typer.Option("--index", help="the index directory to audit")],
    half_life: Annotated[str, typer.Option(
        "--half-life", help="τ: 365d, 52w, 1y (= 365.25 days), 12h or days; at least one "
                            "microsecond")] = "1y",
    now: Annotated[str | None, typer.Option(
        "--now", help="evaluation time T (YYYY-MM-DD or ISO instant; default: now, UTC)")
    ] = None,
    copies: Annotated[str, typer.Option(
        "--copies", help="copy edges without citation: off, text (3-gram Jaccard >= 0.5 "
                         "among each document's nearest neighbours) or embedding (text or "
                         "cosine >= 0.95)")] = "off",
    neighbours: Annotated[int, typer.Option(
        "--neighbours", help="neighbours searched per document for copies")] = COPY_NEIGHBOURS,
    max_hops_listed: Annotated[int, typer.Option(
        "--max-hops-listed", help="hops listed per wrapper (>= 1): the first half and the "
                                  "last half ending at the origin; hops stays exact and "
                                  "hops_elided counts the rest")] = MAX_HOPS_LISTED,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    quiet: QuietOption = False,
) -> None:
    """List laundering candidates: wrapper, origin, hop chain (at most --max-hops-listed hops
    each), ratio and the chapter's bound. Ratios beyond the float range print as 2^x (JSON:
    null beside log2_ratio / log2_bound). Progress (documents read, with --copies one
    neighbour search each) is shown on stderr when it is a terminal (never with --quiet or
    when stderr is a file or a pipe)."""
    try:
        tau = parse_half_life(half_life)
        t = parse_now(now)
        cap = check_max_hops_listed(max_hops_listed, "--max-hops-listed")
        if copies not in COPY_MODES:
            raise ValueError(f"--copies: expected one of {', '.join(COPY_MODES)}, got "
                             f"{copies!r}")
        if neighbours < 1:
            raise ValueError(f"--neighbours: expected an integer >= 1, got {neighbours}")
    except ValueError as exc:
        fail(str(exc))
    try:
        with open_store(index_dir) as store, Bars(show_progress(quiet)) as bars:
            ids = sorted(str(p["doc_id"]) for p in store.read_payloads(None, ("doc_id",)))
            counter = bars.counter("documents read" + (", copy test" if copies != "off"
                                                       else ""))
            test = None
            embed = None
            if copies != "off":
                cosine = COPY_COSINE if copies == "embedding" else None
                test = partial(duplicate_groups, jaccard=COPY_JACCARD, shingle=COPY_SHINGLE,
                               cosine=cosine)
                embed = get_embedder(store.manifest.embedder).embed
            source = StoreSource(
                store, t, copies=test, embed=embed, neighbours=neighbours,
                with_vectors=copies == "embedding",
                on_progress=None if counter is None else
                lambda n: counter(min(n, len(ids)), len(ids)))
            graph = ProvenanceGraph(source)
            report: AuditReport = audit(graph, ids, t, tau, cap)
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    extra = {"index": str(index_dir), "copies": {
        "mode": copies, "neighbours": neighbours if copies != "off" else None,
        "test": None if copies == "off" else
        (f"word {COPY_SHINGLE}-gram Jaccard >= {COPY_JACCARD}"
         + (f" or cosine >= {COPY_COSINE}" if copies == "embedding" else "")),
        "searches": source.searches, "undirected": source.undirected_copies,
    }}
    out = typer.get_text_stream("stdout")
    try:
        if as_json:
            report.write_json(out, extra)
        else:
            for line in summary_lines({**report.header(), **extra}, report.iter_candidates()):
                out.write(line + "\n")
        out.flush()
    except BrokenPipeError:  # the reader stopped (`| head`): stop writing, as `yes | head` does
        _silence_stdout()
        raise typer.Exit(141) from None


def _silence_stdout() -> None:
    """Point stdout at the null device, so that the exit's final flush does not raise again
    on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # no descriptor (a test runner)
        pass
    finally:
        os.close(devnull)


from credrank.cli.provenance_hosts import hosts_command  # noqa: E402  (the hosts inventory)

app.command("hosts")(hosts_command)
