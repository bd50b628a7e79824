"""Sizing from measurements (issue 38): what an index and a process cost per document, and
what a query costs, at each ``--n`` — side by side in one run.

For each index (``--cache DIR``/serve-hashing-N, the demo corpus repeated with distinct texts,
embedder ``hashing`` (256 dimensions), built by ``bench_serve.py --section overhead --cache``
or here when missing):

* **disk, bytes per document** — the shard's files by part: dense vectors, the HNSW graph,
  BM25 (sparse vectors and inverted index), payload (storage and keyword/datetime indexes),
  write-ahead log, the rest;
* **processes** (each a fresh child, one at a time, on the same index): an in-process
  ``Searcher`` answering ``--queries`` distinct queries with ``search_json`` (the library),
  and ``credrank serve`` answering the same over HTTP (``POST /search``, one keep-alive
  connection) — resident memory after the queries (``VmRSS``) and its peak (``VmHWM``) from
  ``/proc``, and the time from process start to the first answer (serve: ``/readyz``).
  ``--base-src DIR`` adds ``credrank serve`` run from another checkout's ``src`` (the code
  before this change) as a third row;
* **the served copy** — ``PayloadColumns.nbytes()`` per document and its build time;
* **per query** (in one process, interleaved, distinct queries): ``search`` and
  ``search_json`` p50/p95, default spec (top 10 of 30, pushdown);
* **cold CLI** — ``credrank search QUERY --index DIR --json`` in a fresh process: wall time and
  peak RSS (its own ``VmHWM`` when it exits).

Then a linear fit ``a + b·n`` of each process's RSS over the sizes run, and its value at
500,000 documents. Not a test: the machine is shared; the load average is printed.

    python bench/scripts/bench_sizing.py --n 10000,20000,100000 --cache /tmp/cache \\
        [--queries 200] [--base-src OLD/src] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_serve import build_scaled_index, free_port
from credrank.demo_corpus import demo_dir

WORDS = ("vitamin covid masks flu measles vaccine outbreak heart diet sugar cancer smoking "
         "sleep water exercise virus fever child school trial dose risk study").split()


def queries(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct queries of three demo words and a unique token."""
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, 3)) + f" q{i}" for i in range(n)]


def status_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in MB (10⁶ bytes)."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024 / 1e6
    return out


def index_at(cache: Path, n: int) -> Path:
    path = cache / f"serve-hashing-{n}"
    if not (path / "manifest.json").is_file():
        building = path.with_name(path.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        build_scaled_index(building, n)
        building.rename(path)
    return path


def disk_parts(index: Path, n: int) -> dict[str, float]:
    """Bytes per document of the shard's parts (allocated on disk)."""
    parts = {"dense vectors": 0, "HNSW graph": 0, "BM25": 0, "payload": 0,
             "payload indexes": 0, "write-ahead log": 0, "other": 0}
    for f in index.rglob("*"):
        if not f.is_file():
            continue
        size = f.stat().st_blocks * 512  # allocated: the pages are sparse files
        s = str(f.relative_to(index))
        key = ("dense vectors" if "vector_storage-dense" in s else
               "HNSW graph" if "vector_index-dense" in s else
               "BM25" if "-bm25" in s else
               "payload indexes" if "payload_index" in s else
               "payload" if "payload_storage" in s else
               "write-ahead log" if "/wal/" in s else "other")
        parts[key] += size
    return {k: v / n for k, v in parts.items()}


_IN_PROCESS = r"""
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from credrank.searcher import Searcher
index, table, qs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s = Searcher.open(Path(index), tables=[Path(table)])
spec = Searcher.spec(top_k=10)
s.search_json(qs[0], spec)
ready = time.perf_counter() - t0
for q in qs[1:]:
    s.search_json(q, spec)
status = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    if k in ("VmRSS", "VmHWM"):
        status[k] = int(v.split()[0]) * 1024 / 1e6
print("@@" + json.dumps({"ready_s": ready, **status}))
s.close()
"""


def in_process(index: Path, qs: list[str], env: dict[str, str]) -> dict[str, float]:
    t0 = time.perf_counter()
    out = _child(_IN_PROCESS, index, qs, env)
    out["wall_s"] = time.perf_counter() - t0
    return out


def served(index: Path, qs: list[str], env: dict[str, str]) -> dict[str, float]:
    """``credrank serve`` from process start to ready, then ``POST /search`` of ``qs``."""
    port = free_port()
    t0 = time.perf_counter()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "credrank.cli", "serve", "--index",
                             str(index), "--port", str(port), "--table",
                             str(demo_dir() / "domains.csv")],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise SystemExit(log.read().decode()[-3000:])
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/readyz")
                answer = conn.getresponse()
                answer.read()
                if answer.status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        ready = time.perf_counter() - t0
        samples = []
        for q in qs:
            body = json.dumps({"query": q, "top_k": 10}).encode()
            t = time.perf_counter()
            conn.request("POST", "/search", body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            samples.append(time.perf_counter() - t)
            if answer.status != 200:
                raise SystemExit(f"POST /search: {answer.status}")
        conn.close()
        return {"ready_s": ready, "post_p50_ms": statistics.median(samples) * 1e3,
                **status_mb(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(timeout=120)


_PER_QUERY = r"""
import json, statistics, sys, time
from pathlib import Path
from credrank.searcher import Searcher
index, table, qs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with Searcher.open(Path(index), tables=[Path(table)]) as s:
    spec = Searcher.spec(top_k=10)
    for q in qs[:10]:
        s.search(q, spec); s.search_json(q, spec)
    t0 = time.perf_counter()
    kept = s.keep_columns()
    build = time.perf_counter() - t0
    copy = s.store._columns
    nbytes = copy.nbytes() if copy is not None and hasattr(copy, "nbytes") else None
    s.keep_columns(False)
    a, b = [], []
    for i, q in enumerate(qs[10:]):
        if i % 2:
            t = time.perf_counter(); s.search(q, spec); a.append(time.perf_counter() - t)
        else:
            t = time.perf_counter(); s.search_json(q, spec); b.append(time.perf_counter() - t)
    pct = lambda v, p: sorted(v)[int(p / 100 * (len(v) - 1))] * 1e3
    print("@@" + json.dumps({"copy_build_s": build, "copy_bytes": nbytes, "kept": kept,
        "documents": len(s.store), "search_p50_ms": pct(a, 50), "search_p95_ms": pct(a, 95),
        "json_p50_ms": pct(b, 50), "json_p95_ms": pct(b, 95)}))
"""


def _child(script: str, index: Path, qs: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter over ``index`` and the queries ``qs``; its
    ``@@``-marked JSON line (the process's output ends the run when it has none)."""
    proc = subprocess.run([sys.executable, "-c", script, str(index),
                           str(demo_dir() / "domains.csv"), json.dumps(qs)],
                          capture_output=True, text=True, env=env, timeout=1800)
    marker = [x for x in proc.stdout.splitlines() if x.startswith("@@")]
    if not marker:
        raise SystemExit(proc.stdout + proc.stderr)
    return dict(json.loads(marker[-1][2:]))


def per_query(index: Path, qs: list[str], env: dict[str, str]) -> dict[str, Any]:
    return _child(_PER_QUERY, index, qs, env)


_SHAPES = r"""
import json, sys, time
from pathlib import Path
from credrank.searcher import Searcher
index, table, qs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {}
with Searcher.open(Path(index), tables=[Path(table)]) as s:
    s.keep_columns()
    specs = {(k, p): Searcher.spec(top_k=10, fetch_k=k, pushdown=p)
             for k in (30, 300, 1000) for p in (True, False)}
    for spec in specs.values():
        s.search_json(qs[0], spec)
    samples = {key: [] for key in specs}
    for i, q in enumerate(qs):
        for key, spec in specs.items():  # interleaved: each query through every shape
            t = time.perf_counter(); s.search_json(q, spec)
            samples[key].append(time.perf_counter() - t)
    for (k, p), v in samples.items():
        out[f"{k}:{'pushdown' if p else 'python'}"] = sorted(v)[len(v) // 2] * 1e3
print("@@" + json.dumps(out))
"""


def shapes(index: Path, qs: list[str], env: dict[str, str]) -> dict[str, float]:
    """With the copy kept: ``search_json`` p50 (ms) of the pushdown and of the Python path at
    fetch_k 30 / 300 / 1,000 (top 10), interleaved."""
    return _child(_SHAPES, index, qs, env)


#: a ``credrank`` process that reports its own peak RSS (``VmHWM``) when it exits: the
#: ``ru_maxrss`` that ``wait4`` returns is no measure of it, since the kernel counts the
#: parent's resident memory at the exec of a child it forked (this bench's own, ≈ 1.4 GB after
#: building a 100,000-document index in process)
_COLD_CLI = r"""
import atexit, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("@@" + line.split()[1] + "\n")
atexit.register(peak)
sys.argv[0] = "credrank"
from credrank.cli import main
main()
"""


def cold_cli(index: Path, env: dict[str, str]) -> dict[str, float]:
    """One ``credrank search --json`` in a fresh process: wall seconds and peak RSS."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _COLD_CLI, "search",
                           "does vitamin d prevent covid", "--index", str(index), "--json"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"credrank search exited {proc.returncode}: {proc.stderr[-2000:]}")
    peaks = [x for x in proc.stderr.splitlines() if x.startswith("@@")]
    return {"wall_s": wall, "peak_mb": int(peaks[-1][2:]) * 1024 / 1e6}


def fit(points: list[tuple[int, float]], at: int) -> float | None:
    """The least-squares line through ``(n, value)`` evaluated at ``at``."""
    if len(points) < 2:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    return my + b * (at - mx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10000,20000,100000")
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--base-src", type=Path, default=None,
                    help="another checkout's src: its credrank serve as a third row")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--shapes", action="store_true",
                    help="only: with the copy kept, pushdown vs Python path at fetch_k "
                         "30/300/1000 per --n")
    args = ap.parse_args()
    env = dict(os.environ)
    base_env = None
    if args.base_src is not None:
        base_env = {**env, "PYTHONPATH": os.pathsep.join(
            [str(args.base_src), *env.get("PYTHONPATH", "").split(os.pathsep)[1:]])}
    qs = queries(args.queries + 10)
    load = [os.getloadavg()]
    if args.shapes:
        print("| documents | fetch_k | pushdown p50 ms | Python path p50 ms (copy) |")
        print("|---|---|---|---|")
        for n in [int(x) for x in args.n.split(",")]:
            got = shapes(index_at(args.cache, n), qs[:args.queries], env)
            for k in (30, 300, 1000):
                print(f"| {n:,} | {k} | {got[f'{k}:pushdown']:.2f} | {got[f'{k}:python']:.2f} |")
        print(f"\nload average before / after: {load[0]} / {os.getloadavg()}")
        return
    rows = []
    for n in [int(x) for x in args.n.split(",")]:
        index = index_at(args.cache, n)
        row: dict[str, Any] = {"n": n, "disk_per_doc": disk_parts(index, n)}
        row["searcher"] = in_process(index, qs[:args.queries], env)
        row["serve"] = served(index, qs[:args.queries], env)
        if base_env is not None:
            row["serve_before"] = served(index, qs[:args.queries], base_env)
        row["per_query"] = per_query(index, qs, env)
        row["cold_cli"] = cold_cli(index, env)
        load.append(os.getloadavg())
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    extrapolated = {}
    for key in ("searcher", "serve", "serve_before"):
        pts = [(r["n"], r[key]["VmRSS"]) for r in rows if key in r]
        value = fit(pts, 500_000)
        if value is not None:
            extrapolated[key] = value
    result = {"rows": rows, "rss_at_500k_mb": extrapolated,
              "load_average": load, "cpus": os.cpu_count(),
              "self_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"load average (1, 5, 15 min) before and after each size: {load}\n")
    print("| documents | process | ready s | RSS MB | peak MB | RSS / Searcher |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        base = r["searcher"]["VmRSS"]
        for key, label in (("searcher", "in-process Searcher (search_json)"),
                           ("serve", "credrank serve (POST /search)"),
                           ("serve_before", "credrank serve, before (--base-src)")):
            if key in r:
                p = r[key]
                print(f"| {r['n']:,} | {label} | {p['ready_s']:.1f} | {p['VmRSS']:.0f} | "
                      f"{p['VmHWM']:.0f} | {p['VmRSS'] / base:.2f}× |")
    for key, value in extrapolated.items():
        print(f"\nRSS at 500,000 documents (linear fit), {key}: {value:.0f} MB")
    print("\n| documents | search p50 ms | search_json p50 ms | json / search | "
          "POST /search p50 ms | POST / json | copy B/doc | copy build s | "
          "cold CLI s | cold CLI peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q, s, c = r["per_query"], r["serve"], r["cold_cli"]
        copy = q["copy_bytes"] / r["n"] if q["copy_bytes"] else float("nan")
        print(f"| {r['n']:,} | {q['search_p50_ms']:.2f} | {q['json_p50_ms']:.2f} | "
              f"{q['json_p50_ms'] / q['search_p50_ms']:.2f}× | {s['post_p50_ms']:.2f} | "
              f"{s['post_p50_ms'] / q['json_p50_ms']:.2f}× | {copy:.0f} | "
              f"{q['copy_build_s']:.1f} | {c['wall_s']:.2f} | {c['peak_mb']:.0f} |")
    print("\n| documents | " + " | ".join(rows[0]["disk_per_doc"]) + " |")
    print("|---|" + "---|" * len(rows[0]["disk_per_doc"]))
    for r in rows:
        print(f"| {r['n']:,} | " + " | ".join(f"{v:.0f}" for v in r["disk_per_doc"].values())
              + " |")


if __name__ == "__main__":
    main()
