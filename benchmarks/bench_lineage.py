"""Provenance-graph work vs corpus size (chapter 35.7): it follows the reachable subgraph.

Synthetic corpora of ``N`` documents made of disconnected citation chains of ``--chain``
documents (the first observed in 2020, each next one published a year later and citing the
previous). For each size:

* ``starts``: the inherited dates of a fixed set of ``--starts`` chain ends (what the freshness
  stage asks for a query's candidates) — visited nodes should stay ``starts × chain`` whatever
  ``N``;
* ``audit``: the full laundering audit of every document — each document expanded once,
  ``O(N + E)``;
* ``naive`` (small sizes only): the same ``starts`` walked without an id lookup or memo, every
  hop scanning the whole corpus for the cited id (all pairs: ``O(starts × chain × N)``
  comparisons), and the naive full audit (``O(N² × chain)``) at the smallest size.

Records are built in memory (:meth:`ProvenanceGraph.from_records`), so the numbers are the
graph work, not store I/O. A measurement on a shared machine, not a test.

    python benchmarks/bench_lineage.py [--sizes 1000 10000 100000] [--chain 5] [--starts 100]
                                       [--naive-max 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

from credrank.freshness.lineage import (
    ProvenanceGraph,
    Record,
    audit,
    inherited_dates,
    record_from_payload,
)

T = datetime(2026, 1, 1, tzinfo=UTC)


def corpus(n: int, chain: int) -> list[Record]:
    """``n`` records in chains of ``chain`` (the last chain may be shorter)."""
    out = []
    for i in range(n):
        k, j = divmod(i, chain)
        row: dict[str, Any] = ({"id": f"c{k}-0", "observed_at": "2020-01-01"} if j == 0 else
                               {"id": f"c{k}-{j}", "published_at": f"{2020 + j}-06-01",
                                "cites": [f"c{k}-{j - 1}"]})
        out.append(record_from_payload(row, T))
    return out


def naive_walk(records: list[Record], start: str) -> tuple[str, int]:
    """The root origin of ``start`` found by scanning the corpus at every hop (no index, no
    memo): ``(origin, comparisons)``."""
    comparisons, current, seen = 0, start, set()
    while current not in seen:
        seen.add(current)
        found = None
        for r in records:
            comparisons += 1
            if r.doc_id == current:
                found = r
                break
        if found is None or found.own.date is not None or not found.parents:
            return current, comparisons
        current = found.parents[0][0]
    return current, comparisons


def run(sizes: list[int], chain: int, n_starts: int, naive_max: int) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        records = corpus(n, chain)
        n_chains = n // chain
        step = max(n_chains // max(n_starts, 1), 1)  # spread over the corpus, not its head
        ends = [f"c{k}-{chain - 1}" for k in range(0, n_chains, step)][:n_starts]
        g = ProvenanceGraph.from_records(records)
        t0 = time.perf_counter()
        got = inherited_dates(g, ends)
        t_starts = time.perf_counter() - t0
        assert len(got) == len(ends)
        visited_starts = g.stats.expanded
        g_all = ProvenanceGraph.from_records(records)
        t0 = time.perf_counter()
        report = audit(g_all, [r.doc_id for r in records], T, 365.25)
        t_audit = time.perf_counter() - t0
        row: dict[str, Any] = {
            "n": n, "chain": chain, "starts": len(ends),
            "starts_visited": visited_starts, "starts_s": t_starts,
            "audit_visited": g_all.stats.expanded, "audit_edges": g_all.stats.edges,
            "audit_s": t_audit, "candidates": len(report.candidates),
            "naive_starts_comparisons": None, "naive_starts_s": None,
            "naive_audit_comparisons": None, "naive_audit_s": None,
        }
        if n <= naive_max:
            t0 = time.perf_counter()
            comps = sum(naive_walk(records, s)[1] for s in ends)
            row["naive_starts_s"] = time.perf_counter() - t0
            row["naive_starts_comparisons"] = comps
        if n == min(sizes) and n <= naive_max:
            t0 = time.perf_counter()
            comps = sum(naive_walk(records, r.doc_id)[1] for r in records)
            row["naive_audit_s"] = time.perf_counter() - t0
            row["naive_audit_comparisons"] = comps
        rows.append(row)
    return rows


def _cell(value: Any, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'N':>8} {'starts':>6} {'visited':>8} {'time ms':>8} | {'audit visited':>13} "
            f"{'edges':>7} {'audit s':>8} | {'naive cmp':>11} {'naive ms':>9} | "
            f"{'naive audit cmp':>15} {'naive audit s':>13}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['n']:>8} {r['starts']:>6} {r['starts_visited']:>8} "
            f"{r['starts_s'] * 1e3:>8.2f} | {r['audit_visited']:>13} {r['audit_edges']:>7} "
            f"{r['audit_s']:>8.3f} | {_cell(r['naive_starts_comparisons'], ',d'):>11} "
            f"{_cell(None if r['naive_starts_s'] is None else r['naive_starts_s'] * 1e3, '.1f'):>9}"
            f" | {_cell(r['naive_audit_comparisons'], ',d'):>15} "
            f"{_cell(r['naive_audit_s'], '.3f'):>13}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--chain", type=int, default=5)
    ap.add_argument("--starts", type=int, default=100)
    ap.add_argument("--naive-max", type=int, default=10000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = run(args.sizes, args.chain, args.starts, args.naive_max)
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
