"""Where an index keeps its dense vectors and stored payload: ``Cold`` (mapped from the files,
a page read when a search first needs it) against ``Cached`` (read into memory at every open),
side by side at each ``--n`` (``credrank.index.qdrant_edge.storage_memory``, docs/results.md
"Storage placement by size").

For each size, the demo corpus repeated (distinct texts, embedder ``hashing``, 256 dimensions)
is indexed and optimised twice, once per placement (credrank's choice by its own code, the
other forced), and then, alternating the two indexes ``--rounds`` times:

* **index + optimise** — the build's wall time (once per placement);
* **open** — ``Searcher.open``, one search, close, in this process: wall and CPU (median);
* **one-shot CLI** — ``credrank search QUERY --index DIR --json`` in a fresh process: wall time
  and its peak RSS (``VmHWM``), median;
* **served** — one ``Searcher`` answering distinct queries: the p50 of the first
  ``--first`` after the open, and of the ``--queries`` after them.

The row credrank chooses at each size is marked. The files are in the page cache in both
states (just written), unless ``--drop-caches`` (root only) empties the kernel's page cache
before each one-shot CLI search, as after a reboot: every file that search reads comes from
the disk then, the libraries' as well as the index's. Not a test: the machine is shared; the
load average is printed.

    python bench/scripts/bench_storage_memory.py [--n 120,500,1000,2000,5000,20000] [--rounds 3]
        [--drop-caches] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from bench_payload_indexes import timed
from bench_serve import build_scaled_index
from bench_sizing import cold_cli, queries
from credrank.demo_corpus import demo_dir
from credrank.index import qdrant_edge
from credrank.searcher import Searcher

DIM = 256  # the hashing embedder's
STATES = {"Cold": qe.Memory.Cold, "Cached": qe.Memory.Cached}


def build(path: Path, n: int, memory: Any) -> Path:
    """The ``n``-document index at ``path`` placed as ``memory`` says: by credrank's own code
    where that is its choice, else with ``memory`` as its placement at every size."""
    if memory is qdrant_edge.storage_memory(n):
        return build_scaled_index(path, n)
    kept = qdrant_edge.SMALL_STORAGE_MEMORY, qdrant_edge.LARGE_STORAGE_MEMORY
    qdrant_edge.SMALL_STORAGE_MEMORY = qdrant_edge.LARGE_STORAGE_MEMORY = memory
    try:
        return build_scaled_index(path, n)
    finally:
        qdrant_edge.SMALL_STORAGE_MEMORY, qdrant_edge.LARGE_STORAGE_MEMORY = kept


DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_caches() -> None:
    """Write dirty pages out and empty the kernel's page cache (Linux, root)."""
    os.sync()
    try:
        DROP_CACHES.write_text("3\n")
    except OSError as exc:
        raise SystemExit(f"--drop-caches: cannot write {DROP_CACHES} ({exc}); it needs root "
                         "on Linux") from None


def open_once(index: Path, query: str) -> tuple[float, float]:
    """Wall and CPU ms of open, one search, close."""
    def once() -> None:
        with Searcher.open(index, tables=[demo_dir() / "domains.csv"]) as searcher:
            searcher.search_json(query, Searcher.spec(top_k=10))

    return timed(once)


def served(index: Path, first: list[str], later: list[str]) -> tuple[float, float]:
    """p50 ms of ``first`` (just after the open) and of ``later`` on one Searcher."""
    spec = Searcher.spec(top_k=10)
    with Searcher.open(index, tables=[demo_dir() / "domains.csv"]) as searcher:
        out = []
        for batch in (first, later):
            samples = []
            for q in batch:
                t = time.perf_counter()
                searcher.search_json(q, spec)
                samples.append(time.perf_counter() - t)
            out.append(statistics.median(samples) * 1e3)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="120,500,1000,2000,5000,20000",
                    help="index sizes (documents)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds alternating the placements")
    ap.add_argument("--opens", type=int, default=10, help="opens per round and placement")
    ap.add_argument("--first", type=int, default=20, help="queries timed just after an open")
    ap.add_argument("--queries", type=int, default=300, help="queries timed after those")
    ap.add_argument("--drop-caches", action="store_true",
                    help="empty the page cache before each one-shot CLI search (root)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(x) for x in args.n.split(",")]
    env = dict(os.environ)
    rows = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
        for n in sizes:
            paths, built = {}, {}
            for name, memory in STATES.items():
                t0 = time.perf_counter()
                paths[name] = build(Path(tmp) / f"{name}-{n}", n, memory)
                built[name] = time.perf_counter() - t0
            got: dict[str, dict[str, list[float]]] = {
                name: {k: [] for k in ("open", "open_cpu", "cli", "cli_mb", "first", "later")}
                for name in paths}
            for r in range(args.rounds):
                qs = queries(args.first + args.queries, seed=100 + r)
                for name, path in paths.items():
                    for i in range(args.opens):
                        wall, cpu = open_once(path, qs[i])
                        got[name]["open"].append(wall)
                        got[name]["open_cpu"].append(cpu)
                    if args.drop_caches:
                        drop_caches()
                    cli = cold_cli(path, env)
                    got[name]["cli"].append(cli["wall_s"] * 1e3)
                    got[name]["cli_mb"].append(cli["peak_mb"])
                    first, later = served(path, qs[:args.first], qs[args.first:])
                    got[name]["first"].append(first)
                    got[name]["later"].append(later)
            chosen = qdrant_edge.storage_memory(n)
            for name, cells in got.items():
                rows.append({"documents": n, "placement": name,
                             "chosen": STATES[name] is chosen,
                             "build_s": round(built[name], 2),
                             **{k: round(statistics.median(v), 2) for k, v in cells.items()}})
            for path in paths.values():
                shutil.rmtree(path, ignore_errors=True)
    settings = {"sizes": sizes, "rounds": args.rounds, "opens": args.opens,
                "first": args.first, "queries": args.queries, "embedder": "hashing",
                "drop_caches": args.drop_caches,
                "cached_from_points": qdrant_edge.CACHED_STORAGE_POINTS,
                "load_average": os.getloadavg(), "cpus": os.cpu_count(),
                "seconds": round(time.time() - started)}
    if args.json:
        print(json.dumps({"bench": "storage-memory", "settings": settings, "rows": rows},
                         indent=2))
        return
    print(f"Storage placement, demo corpus repeated (hashing, {DIM} dimensions), optimised; "
          f"{args.rounds} rounds alternating the placements; page cache "
          f"{'emptied before each CLI search' if args.drop_caches else 'warm'}; load average "
          f"{settings['load_average'][0]:.2f}, {settings['cpus']} cores; credrank's choice "
          f"marked * (Cached from {qdrant_edge.CACHED_STORAGE_POINTS:,} points)\n")
    print("| documents | placement | index + optimise, s | open + search + close, ms (CPU ms) "
          "| one-shot CLI s, peak MB | served p50 ms: first queries | after |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        mark = " *" if r["chosen"] else ""
        print(f"| {r['documents']:,} | {r['placement']}{mark} | {r['build_s']:.2f} | "
              f"{r['open']:.1f} "
              f"({r['open_cpu']:.1f}) | {r['cli'] / 1e3:.2f}, {r['cli_mb']:.0f} | "
              f"{r['first']:.3f} | {r['later']:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
