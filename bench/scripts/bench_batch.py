"""Batch queries: ``credrank search --queries FILE`` (one process) vs one process per query.

Builds the packaged demo corpus index with the chosen embedder (MiniLM by default) in a
temporary folder, writes N queries (the 10 demo queries, cycled, each with its number appended
so that no two are the same text), then times, from the same run:

  * batch        — one ``credrank search --queries FILE --top-k 10`` process for all N queries
                   (JSON lines to a file); time per query = wall time / N (model load included)
  * per process  — ``credrank search QUERY --index DIR --json --top-k 10`` as a new process,
                   for the first ``--singles`` queries; time per query = median wall time

and prints the ratio. Wall-clock on a shared machine: a measurement, not a test.

    python bench/scripts/bench_batch.py [--queries 1000] [--singles 5] [--embedder minilm] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from credrank.demo_corpus import build_demo_index, demo_dir
from credrank.documents import read_queries

CLI = [str(Path(sys.executable).with_name("credrank"))]


def timed(cmd: list[str], stdout: Path | None = None) -> float:
    t0 = time.perf_counter()
    with open(stdout or "/dev/null", "w", encoding="utf-8") as out:
        subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--singles", type=int, default=5, help="queries run one process each")
    ap.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"))
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()

    base = [q.text for q in read_queries(demo_dir() / "queries.jsonl")]
    texts = [f"{base[i % len(base)]} {i}" for i in range(args.queries)]
    with tempfile.TemporaryDirectory(prefix="credrank-batch-") as tmp:
        index = Path(tmp) / "index"
        build_demo_index(index, args.embedder)
        qfile = Path(tmp) / "queries.txt"
        qfile.write_text("\n".join(texts) + "\n", encoding="utf-8")
        out = Path(tmp) / "out.jsonl"
        batch_s = timed([*CLI, "search", "--index", str(index), "--queries", str(qfile),
                         "--top-k", "10"], stdout=out)
        answered = sum(1 for _ in out.open(encoding="utf-8"))
        if answered != args.queries:
            raise SystemExit(f"batch answered {answered} of {args.queries} queries")
        singles = [timed([*CLI, "search", text, "--index", str(index), "--json", "--top-k",
                          "10"]) for text in texts[:args.singles]]
    per_batch = batch_s / args.queries
    per_single = statistics.median(singles)
    result = {
        "bench": "batch-queries", "embedder": args.embedder, "queries": args.queries,
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "batch_total_s": round(batch_s, 3), "batch_per_query_ms": round(1000 * per_batch, 2),
        "single_process_runs": args.singles,
        "single_process_median_s": round(per_single, 3),
        "single_process_s": [round(s, 3) for s in singles],
        "speedup": round(per_single / per_batch, 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"demo index ({args.embedder}), top-k 10, {args.queries} queries")
    print("| mode | processes | time per query | total |")
    print("|---|---|---|---|")
    print(f"| batch (--queries) | 1 | {1000 * per_batch:.1f} ms | {batch_s:.1f} s |")
    print(f"| one process per query | {args.singles} (median) | {per_single * 1000:.0f} ms | "
          f"— |")
    print(f"speedup per query: {per_single / per_batch:.0f}×")


if __name__ == "__main__":
    main()
