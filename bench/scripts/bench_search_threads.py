"""The engine's search threads: one (what credrank sets at every open) against the pool
Qdrant Edge starts on its own, side by side in one run.

For each index size in ``--n`` (the demo corpus repeated with distinct texts, embedder
``hashing``, optimised: ``bench_serve.py``'s generator, cached under ``--cache``) and each
setting, ``--rounds`` rounds with the two settings alternated in this one process (the setting
is ``credrank.index.qdrant_edge.SEARCH_THREADS``, which every open passes to the engine):

* **open**: ``Searcher.open`` + a first search + ``close``, median of 5, wall ms;
* **one caller**: ``Searcher.search_json`` over ``--queries`` distinct queries (default spec:
  top 10 of 30, priors pushed down, snippets), p50 and p95 ms, and the process's CPU time
  (user + system) per query;
* **two callers**: the same queries split over two Python threads at once (what the service's
  worker threads do): wall ms and CPU ms per query.

The pool's size is what the engine starts on this machine when the shard does not say
(counted from ``/proc/self/task`` on a shard created without the setting; Linux), unless
``--pool`` names one. A measurement, not a test: the machine is shared; compare the rows of
one run.

    python bench/scripts/bench_search_threads.py --cache DIR [--n 120,20000,100000]
        [--queries 300] [--rounds 3] [--pool N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from bench_sizing import index_at, queries
from credrank.index import qdrant_edge
from credrank.searcher import Searcher


def engine_pool() -> int:
    """The search threads the engine starts for a shard that does not set them: the threads
    this process gains while such a shard opens, counted as tasks of ``/proc/self/task`` (the
    pool's are made before the load returns and named later, by each thread itself). Call it
    before this process opens any other shard: a closed shard's threads end asynchronously."""
    with tempfile.TemporaryDirectory() as tmp:
        before = len(os.listdir("/proc/self/task"))
        shard = qe.EdgeShard.create(tmp, qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=4, distance=qe.Distance.Cosine)}))
        try:
            return len(os.listdir("/proc/self/task")) - before
        finally:
            shard.close()


def measure(index: Path, qs: list[str]) -> dict[str, float]:
    opens = []
    for _ in range(5):
        start = time.perf_counter()
        with Searcher.open(index) as searcher:
            searcher.search_json(qs[0])
        opens.append(time.perf_counter() - start)
    with Searcher.open(index) as searcher:
        for q in qs[:20]:
            searcher.search_json(q)
        lat = []
        used = time.process_time()
        for q in qs:
            start = time.perf_counter()
            searcher.search_json(q)
            lat.append(time.perf_counter() - start)
        one_cpu = (time.process_time() - used) / len(qs)
        parts = [qs[0::2], qs[1::2]]

        def run(part: list[str]) -> None:
            for q in part:
                searcher.search_json(q)

        callers = [threading.Thread(target=run, args=(p,)) for p in parts]
        used, start = time.process_time(), time.perf_counter()
        for t in callers:
            t.start()
        for t in callers:
            t.join()
        two_wall = (time.perf_counter() - start) / len(qs)
        two_cpu = (time.process_time() - used) / len(qs)
    lat.sort()
    return {"open": statistics.median(opens) * 1e3, "p50": lat[len(lat) // 2] * 1e3,
            "p95": lat[int(len(lat) * 0.95)] * 1e3, "cpu": one_cpu * 1e3,
            "two_wall": two_wall * 1e3, "two_cpu": two_cpu * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--n", default="120,20000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pool", type=int, default=None,
                    help="the pool to compare with (default: what the engine starts here)")
    args = ap.parse_args()
    own = engine_pool()
    pool = args.pool or own
    qs = queries(args.queries)
    print(f"engine's own pool on this machine: {own} threads "
          f"({os.cpu_count()} CPUs); compared: 1 and {pool}")
    print(f"load average before: {os.getloadavg()}\n")
    print("| documents | search threads | open ms | p50 ms | p95 ms | CPU ms a query | "
          "two callers: wall ms a query | two callers: CPU ms a query |")
    print("|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.n.split(",")]:
        index = index_at(args.cache, n)
        runs: dict[int, list[dict[str, float]]] = {1: [], pool: []}
        for _ in range(args.rounds):
            for threads in runs:
                qdrant_edge.SEARCH_THREADS = threads
                runs[threads].append(measure(index, qs))
        qdrant_edge.SEARCH_THREADS = 1
        for threads, rows in runs.items():
            med: dict[str, Any] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            label = "1 (credrank)" if threads == 1 else f"{threads} (engine's pool)"
            print(f"| {n:,} | {label} | {med['open']:.1f} | {med['p50']:.3f} | "
                  f"{med['p95']:.3f} | {med['cpu']:.3f} | {med['two_wall']:.3f} | "
                  f"{med['two_cpu']:.3f} |")
    print(f"\nload average after: {os.getloadavg()}; medians of {args.rounds} rounds, "
          f"{args.queries} distinct queries each")


if __name__ == "__main__":
    main()
