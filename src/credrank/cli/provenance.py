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

**Documents dated after T** (``--now``; :data:`AFTER_NOW_POLICY`): every date is shown as the
data gives it, never moved to ``T``. A document published, observed or verified after ``T``
did not exist (or was not measured) at ``T``: it is never a laundering candidate, and it is
reported, counted and listed by id (JSON ``after_now``). It stays in the provenance graph, so
the documents that cite it inherit its evidence date as written (a wrapper dated before that
date is then an anachronism, a data error to check).

The lead mounts :data:`app` as ``credrank provenance``. ``--json`` output is data all the way
down, marked ``"credrank_provenance_audit": 1`` (docs/json.md).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import Bars, QuietOption, fail, show_progress
from credrank.cli.config import from_file
from credrank.cli.pipe import reader_gone, write_failed
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
#: the policy for documents dated after ``T`` (``--now``), in the JSON output's ``after_now``
AFTER_NOW_POLICY = ("dates are shown as written, never moved to T; a document published, "
                    "observed or verified after T is never a laundering candidate and is "
                    "listed here; it stays in the provenance graph, so a document citing it "
                    "inherits its date as written")
#: the ids of documents dated after ``T`` the human table names (the JSON lists them all)
AFTER_NOW_SHOWN = 10
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
    """``--now`` (ISO date or instant, UTC) or the current time (``None``); ``ValueError``
    naming ``--now`` for a value that is no date, a blank one included."""
    if text is None:
        return datetime.now(UTC)
    got = parse_instant(text, "--now")
    if got is None:  # a blank value: no date at all
        raise ValueError(f"--now: expected an ISO 8601 date such as 2024-05-01 or "
                         f"2024-05-01T12:00:00Z, got {text!r}")
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
    after = report.get("after_now")
    if after and after["count"]:
        ids = after["doc_ids"]
        more = len(ids) - AFTER_NOW_SHOWN
        yield (f"dated after T (never candidates; dates as written): {after['count']} "
               f"documents: {', '.join(ids[:AFTER_NOW_SHOWN])}"
               + (f" and {more} more" if more > 0 else ""))
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
        "--now", help="evaluation time T (YYYY-MM-DD or ISO instant; default: now, UTC); "
                      "documents dated after T are listed, never candidates")
    ] = None,
    copies: Annotated[str, typer.Option(
        "--copies", help="copy edges without citation: off, text (3-gram Jaccard >= 0.5 "
                         "among each document's nearest neighbours) or embedding (text or "
                         "cosine >= 0.95)")] = "off",
    neighbours: Annotated[int | None, typer.Option(
        "--neighbours", help=f"neighbours searched per document for copies (default "
                             f"{COPY_NEIGHBOURS}; only with --copies text or embedding)")
    ] = None,
    max_hops_listed: Annotated[int, typer.Option(
        "--max-hops-listed", help="hops listed per wrapper (>= 1): the first half and the "
                                  "last half ending at the origin; hops stays exact and "
                                  "hops_elided counts the rest")] = MAX_HOPS_LISTED,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    quiet: QuietOption = False,
) -> None:
    """List laundering candidates: wrapper, origin, hop chain (at most --max-hops-listed hops
    each), ratio and the chapter's bound. Ratios beyond the float range print as 2^x (JSON:
    null beside log2_ratio / log2_bound). Dates are shown as the data gives them: a document
    published, observed or verified after T (--now) is never a candidate; it is counted and
    listed (JSON: after_now). Progress (documents read, with --copies one neighbour search
    each) goes to stderr: bars in a terminal, a plain line every 30 s in a file or a pipe
    ($CREDRANK_PROGRESS_INTERVAL sets the seconds), none with --quiet."""
    try:
        tau = parse_half_life(half_life)
        t = parse_now(now)
        cap = check_max_hops_listed(max_hops_listed, "--max-hops-listed")
        if copies not in COPY_MODES:
            raise ValueError(f"--copies: expected one of {', '.join(COPY_MODES)}, got "
                             f"{copies!r}")
        if neighbours is not None and neighbours < 1:
            raise ValueError(f"--neighbours: expected an integer >= 1, got {neighbours}")
    except ValueError as exc:
        fail(str(exc))
    if neighbours is not None and copies == "off" and not from_file("neighbours"):
        fail(f"--neighbours {neighbours}: only with --copies text or embedding (the "
             "neighbours searched for copies; without --copies no search is made)")
    k = COPY_NEIGHBOURS if neighbours is None else neighbours
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
            # no evaluation time for the records: their dates stay as written (never moved
            # to T); the documents dated after T are set apart below
            source = StoreSource(
                store, None, copies=test, embed=embed, neighbours=k,
                with_vectors=copies == "embedding",
                on_progress=None if counter is None else
                lambda n: counter(min(n, len(ids)), len(ids)))
            graph = ProvenanceGraph(source)
            report: AuditReport = audit(graph, ids, t, tau, cap)
            after_now = dated_after(graph, ids, t)
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    late = set(after_now)
    report.candidates = [c for c in report.candidates if c.wrapper not in late]
    extra = {"index": str(index_dir), "copies": {
        "mode": copies, "neighbours": k if copies != "off" else None,
        "test": None if copies == "off" else
        (f"word {COPY_SHINGLE}-gram Jaccard >= {COPY_JACCARD}"
         + (f" or cosine >= {COPY_COSINE}" if copies == "embedding" else "")),
        "searches": source.searches, "undirected": source.undirected_copies,
    }, "after_now": {"count": len(after_now), "doc_ids": after_now,
                     "policy": AFTER_NOW_POLICY}}
    out = sys.stdout
    try:
        if as_json:
            report.write_json(out, extra)
        else:
            for line in summary_lines({**report.header(), **extra}, report.iter_candidates()):
                out.write(line + "\n")
        out.flush()
    except BrokenPipeError:  # the reader stopped (`| head`): stop writing, as `yes | head` does
        reader_gone()
    except OSError as exc:  # a full disk, a closed stdout
        write_failed(exc)


def dated_after(graph: ProvenanceGraph, doc_ids: Iterable[str], now: datetime) -> list[str]:
    """The ids of ``doc_ids`` (sorted) whose publication date or own evidence date
    (``observed_at``, else ``verified_at``) is after ``now``, as their records give them
    (``graph`` built without an evaluation time, so nothing is clamped)."""
    out = []
    for d in doc_ids:
        rec = graph.record(d)
        if rec is None:
            continue
        if any(x.date is not None and x.date > now for x in (rec.naive, rec.own)):
            out.append(d)
    return sorted(out)


from credrank.cli.provenance_hosts import hosts_command  # noqa: E402  (the hosts inventory)

app.command("hosts")(hosts_command)
