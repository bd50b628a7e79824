"""Citation-chain audits (chapter 35.7): ``credrank provenance audit`` on long chains, and the
provenance-graph work against corpus size.

**chains** (the default): one ``cites`` chain of ``L`` documents per length — ``d0`` observed
on 1700-01-01, each next one published a day later and citing the previous one, so every
document but ``d0`` is a laundering candidate whose hop chain runs back to ``d0`` (``L − 1``
candidates, ``L(L − 1)/2`` hops in all). The corpus is written as JSONL and indexed with the
hashing embedder (edge engine), then ``credrank provenance audit --json`` (and the table) runs
as a **subprocess** of a small wrapper process: wall time, peak RSS of that process
(``os.wait4``'s ``ru_maxrss``), output size, and a check of the JSON (exact hops, chains of at
most ``H + 1`` entries), read one candidate line at a time. ``T = 2026-01-01``, ``τ = 1y``,
``--max-hops-listed`` 20 (the default).

The "before" column runs the code of ``--before-ref`` (default :data:`BEFORE_REF`, the last
commit before issue 23 bounded the audit; ``git show REF:…`` of ``freshness/lineage.py``,
``freshness/decay.py`` and ``cli/provenance.py``, loaded into the same CLI in place of the
working tree's modules) for lengths up to ``--before-max``: it lists
every wrapper's whole chain, so it is quadratic and is not run on the long chains.

**graph**: synthetic corpora of ``N`` documents made of disconnected chains of ``--chain``
documents, built in memory (:meth:`ProvenanceGraph.from_records`: graph work, not store I/O):

* ``starts``: the inherited dates of ``--starts`` chain ends — visited nodes stay
  ``starts × chain`` whatever ``N``;
* ``audit``: the full audit of every document — each document expanded once, ``O(N + E)``;
* ``naive`` (small sizes only): the same starts walked by scanning the corpus at every hop
  (``O(starts × chain × N)`` comparisons), and the naive full audit at the smallest size.

A measurement on a shared machine, not a test.

    python bench/scripts/bench_lineage.py [chains] [--lengths 1000 2000 10000 100000]
                                       [--before-max 2000] [--max-hops-listed 20] [--json]
    python bench/scripts/bench_lineage.py graph [--sizes 1000 10000 100000] [--chain 5]
                                       [--starts 100] [--naive-max 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from credrank.freshness.lineage import (
    ProvenanceGraph,
    Record,
    audit,
    inherited_dates,
    record_from_payload,
)

T = datetime(2026, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]  # the checkout (bench/scripts/..)
#: the modules the "before" column takes from the last commit
BEFORE_MODULES = {
    "credrank.freshness.decay": "src/credrank/freshness/decay.py",
    "credrank.freshness.lineage": "src/credrank/freshness/lineage.py",
    "credrank.cli.provenance": "src/credrank/cli/provenance.py",
}
#: run the CLI, first loading the modules of a directory (argv[1], "-" for none) in place of
#: the installed ones
DRIVER = f"""
import importlib.util, sys
old = sys.argv[1]
if old != "-":
    for name, path in {BEFORE_MODULES!r}.items():
        spec = importlib.util.spec_from_file_location(name, f"{{old}}/{{path}}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
from credrank.cli import main
sys.argv = ["credrank", *sys.argv[2:]]
main()
"""


# -- chains: the CLI on one long chain -----------------------------------------------------------

def chain_rows(length: int) -> list[dict[str, Any]]:
    """One ``cites`` chain of ``length`` documents (module docstring)."""
    t0 = datetime(1700, 1, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = [{"id": "d0", "observed_at": t0.isoformat(),
                                   "text": "the survey measured 41 percent in 1700"}]
    for i in range(1, length):
        rows.append({"id": f"d{i}", "published_at": (t0 + timedelta(days=i)).isoformat(),
                     "cites": [f"d{i - 1}"], "text": f"page {i} repeats page {i - 1}"})
    return rows


def build_index(length: int, where: Path) -> Path:
    """The chain written as JSONL and indexed with the hashing embedder; the index path."""
    from credrank.documents import iter_documents
    from credrank.index import open_store
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    corpus = where / f"chain{length}.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in chain_rows(length)),
                      encoding="utf-8")
    emb = get_embedder("hashing")
    index = where / f"index{length}"
    with open_store(index, "edge", embedder=emb.name, dim=emb.dim, create=True) as store:
        index_documents(iter_documents(corpus), store, emb, SourceTyper())
    return index


#: a small process that runs the measured command as its own child and writes ``{"rc", "wall_s",
#: "maxrss_kb"}`` to argv[1]: the peak RSS (``os.wait4``) of a process counts the memory of the
#: one that spawned it (Linux keeps the high-water mark across ``exec``), so the measured
#: command is spawned from this small one, never from the benchmark (which holds indexes)
WRAPPER = """
import json, os, subprocess, sys, time
result, timeout, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
t0 = time.perf_counter()
proc = subprocess.Popen(cmd)
while True:
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid:
        rc = os.waitstatus_to_exitcode(status)
        break
    if time.perf_counter() - t0 > timeout:
        proc.kill()
        pid, status, usage = os.wait4(proc.pid, 0)
        rc = None
        break
    time.sleep(0.05)
with open(result, "w") as f:
    json.dump({"rc": rc, "wall_s": time.perf_counter() - t0, "maxrss_kb": usage.ru_maxrss}, f)
"""


def measure(old: Path | None, args: list[str], timeout: float, keep: Path
            ) -> dict[str, Any]:
    """Run the CLI with ``args`` (the code of ``old`` when given) as a child of
    :data:`WRAPPER`, stdout into ``keep``: wall seconds, peak RSS in MB, stdout bytes, exit
    status (``None`` when killed at ``timeout``) and the end of stderr."""
    result = keep.with_suffix(".rusage.json")
    err = keep.with_suffix(".stderr")
    with keep.open("wb") as out, err.open("wb") as errf:
        subprocess.run([sys.executable, "-c", WRAPPER, str(result), str(timeout),
                        sys.executable, "-c", DRIVER, str(old) if old else "-", *args],
                       stdout=out, stderr=errf, check=True)
    got = json.loads(result.read_text())
    return {"wall_s": got["wall_s"], "peak_rss_mb": got["maxrss_kb"] / 1024,
            "bytes": keep.stat().st_size, "rc": got["rc"],
            "stderr": err.read_text(errors="replace")[-500:]}


#: the commit whose audit the "before" column runs (the landed code before issue 23)
BEFORE_REF = "781a3ec"


def extract_before(where: Path, ref: str = BEFORE_REF) -> Path:
    """The modules of :data:`BEFORE_MODULES` as of ``ref``, under ``where``."""
    for path in BEFORE_MODULES.values():
        text = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        target = where / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return where


def run_chains(lengths: list[int], before_max: int, max_hops: int, timeout: float,
               before_ref: str = BEFORE_REF) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        before = extract_before(where / "before", before_ref) if before_max > 0 else None
        for length in lengths:
            t0 = time.perf_counter()
            index = build_index(length, where)
            build_s = time.perf_counter() - t0
            base = ["provenance", "audit", "--index", str(index), "--now", "2026-01-01",
                    "--half-life", "1y"]
            row: dict[str, Any] = {"length": length, "index_s": build_s,
                                   "candidates": length - 1,
                                   "hops_total": length * (length - 1) // 2}
            out = where / "out"
            after_json = measure(None, [*base, "--json", "--max-hops-listed", str(max_hops)],
                                 timeout, out)
            if after_json["rc"] == 0:
                row["check"] = check_json(out, max_hops, length)
            row["after_json"] = after_json
            row["after_table"] = measure(None, [*base, "--max-hops-listed", str(max_hops)],
                                         timeout, out)
            if before is not None and length <= before_max:
                row["before_json"] = measure(before, [*base, "--json"], timeout, out)
                row["before_table"] = measure(before, base, timeout, out)
            for done in where.glob("out*"):
                done.unlink()
            shutil.rmtree(index, ignore_errors=True)
            print("\n".join(chains_table([row]).splitlines()[2:]), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def check_json(out: Path, max_hops: int, length: int) -> str:
    """Exact hops and bounded chains in the JSON audit of a chain, read one candidate line at
    a time (the streamed format: one candidate per line): ``ok`` or what is wrong."""
    seen = 0
    with out.open(encoding="utf-8") as f:
        for line in f:
            if not line.startswith('    {"bound"'):
                continue
            c = json.loads(line.strip().rstrip(","))
            seen += 1
            i = int(c["wrapper"][1:])
            if c["hops"] != i or c["origin"] != "d0":
                return f"{c['wrapper']}: hops {c['hops']} origin {c['origin']}"
            if len(c["chain"]) > max_hops + 1 or c["hops_elided"] != max(i - max_hops, 0):
                return f"{c['wrapper']}: {len(c['chain'])} listed, {c['hops_elided']} elided"
    if seen != length - 1:
        return f"{seen} candidates, expected {length - 1}"
    return "ok"


def _res(m: dict[str, Any] | None) -> str:
    if m is None:
        return f"{'not run':>36}"
    if m["rc"] is None:
        return f"{'killed at the timeout':>36}"
    if m["rc"] != 0:
        return f"{'exit ' + str(m['rc']):>36}"
    return f"{m['wall_s']:>8.2f} s {m['peak_rss_mb']:>9,.0f} MB {m['bytes'] / 1e6:>9.2f} MB"


VARIANTS = (("before_json", "before, --json"), ("before_table", "before, table"),
            ("after_json", "after, --json"), ("after_table", "after, table"))


def chains_table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'chain length':>12} {'hops in all chains':>18} | {'code, output':<22} | "
            f"{'wall time':>10} {'peak RSS':>12} {'output':>12} | check")
    lines = [head, "-" * len(head)]
    for r in rows:
        for key, label in VARIANTS:
            if key.startswith("before") and key not in r:
                continue
            check = r.get("check", "—") if key == "after_json" else ""
            lines.append(f"{r['length']:>12,} {r['hops_total']:>18,} | {label:<22} | "
                         f"{_res(r.get(key))} | {check}")
    return "\n".join(lines)


# -- graph: work against corpus size, in memory ----------------------------------------------------

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


def run_graph(sizes: list[int], chain: int, n_starts: int, naive_max: int
              ) -> list[dict[str, Any]]:
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


def graph_table(rows: list[dict[str, Any]]) -> str:
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
    sub = ap.add_subparsers(dest="mode")
    ch = sub.add_parser("chains", help="credrank provenance audit on long chains (default)")
    ch.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 10000, 100000])
    ch.add_argument("--before-max", type=int, default=2000,
                    help="run the last commit's code up to this length (0: never)")
    ch.add_argument("--max-hops-listed", type=int, default=20)
    ch.add_argument("--before-ref", default=BEFORE_REF,
                    help="the commit whose audit is the 'before' column")
    ch.add_argument("--timeout", type=float, default=600.0, help="seconds per audit run")
    ch.add_argument("--json", action="store_true")
    gr = sub.add_parser("graph", help="graph work against corpus size, in memory")
    gr.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    gr.add_argument("--chain", type=int, default=5)
    gr.add_argument("--starts", type=int, default=100)
    gr.add_argument("--naive-max", type=int, default=10000)
    gr.add_argument("--json", action="store_true")
    argv = sys.argv[1:]
    if not argv or argv[0] not in ("chains", "graph", "-h", "--help"):
        argv = ["chains", *argv]
    args = ap.parse_args(argv)
    if args.mode == "graph":
        rows = run_graph(args.sizes, args.chain, args.starts, args.naive_max)
        print(json.dumps(rows, indent=2) if args.json else graph_table(rows))
        return
    rows = run_chains(args.lengths, args.before_max, args.max_hops_listed, args.timeout,
                      args.before_ref)
    print(json.dumps(rows, indent=2) if args.json else chains_table(rows))


if __name__ == "__main__":
    main()
