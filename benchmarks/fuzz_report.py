"""Fuzz counts for the docs (issue 9): the generators of tests/test_fuzz.py, larger budgets.

Runs, for a fixed seed and outside pytest, the same generators and checks as
``tests/test_fuzz.py`` (loaded from that file), counting failures instead of stopping at the
first, plus concurrent-writer trials: two ``credrank index`` processes started together on one
fresh directory; the directory lock (DIR/.credrank.lock) must refuse one of them with exit 2,
and the index must then reopen with every document. Prints a Markdown table.

    .venv/bin/python benchmarks/fuzz_report.py [--loaders 2000] [--engine 300] [--urls 5000]
                                               [--writers 20] [--seed 20261201]

This is a measurement, not a test: the numbers are counts of inputs, not timings.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def _load_fuzz() -> Any:
    spec = importlib.util.spec_from_file_location("credrank_test_fuzz", ROOT / "tests" /
                                                  "test_fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Tally:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tried = self.crashes = self.drops = self.wrong_types = self.other = 0
        self.records = self.accepted = self.rejected = 0
        self.examples: list[str] = []
        self.seconds = 0.0

    def add(self, out: Any, *, wrong_type: bool = False) -> None:
        self.tried += 1
        self.records += out.records
        self.accepted += out.accepted
        self.rejected += out.rejected
        self.crashes += out.crash is not None
        self.drops += out.silent_drops
        if out.problems:
            if wrong_type:
                self.wrong_types += 1
            else:
                self.other += 1
        for text in ([out.crash] if out.crash else []) + out.problems:
            if len(self.examples) < 3:
                self.examples.append(text[:300])


def run(tally: Tally, strategy: st.SearchStrategy[Any], budget: int, the_seed: int,
        check: Callable[[Any], None]) -> None:
    @seed(the_seed)
    @settings(max_examples=budget, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def go(value: Any) -> None:
        check(value)

    start = time.perf_counter()
    go()
    tally.seconds = time.perf_counter() - start


def writer_trial(corpus: Path, n_docs: int, cli: list[str]) -> tuple[str, str]:
    """Two ``credrank index`` runs started together on one fresh directory.

    Returns (outcome, detail): outcome ``refused`` (exit codes {0, 2}), ``sequential`` (both 0:
    no overlap), or ``bad`` (anything else); detail says whether the index reopened whole.
    """
    from credrank.index import open_store

    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "index"
        args = [*cli, "index", str(corpus), "--index", str(where), "--embedder", "hashing"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env) for _ in range(2)]
        results = [p.communicate(timeout=300) for p in procs]
        codes = sorted(p.returncode for p in procs)
        if codes == [0, 2]:
            outcome = "refused"
        elif codes == [0, 0]:
            outcome = "sequential"
        else:
            outcome = "bad"
        try:
            store = open_store(where)
            try:
                n = len(store)
                found = store.existing_hashes([f"d{i:05d}" for i in range(n_docs)])
            finally:
                store.close()
            whole = n == n_docs and len(found) == n_docs
            detail = "whole" if whole else f"corrupted: {n} points, {len(found)} found"
        except Exception as e:  # a load failure is what is counted
            detail = f"corrupted: {type(e).__name__}: {e}"
        if outcome == "bad":
            detail += f" (exit codes {codes}: " + " | ".join(
                r[1].decode(errors="replace").strip()[-200:] for r in results) + ")"
        return outcome, detail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loaders", type=int, default=2000, help="loader inputs (half JSONL, "
                    "half CSV)")
    ap.add_argument("--engine", type=int, default=300, help="engine round trips")
    ap.add_argument("--urls", type=int, default=5000)
    ap.add_argument("--writers", type=int, default=20, help="concurrent-writer trials")
    ap.add_argument("--writer-docs", type=int, default=3000,
                    help="documents per concurrent-writer corpus")
    ap.add_argument("--seed", type=int, default=20261201)
    opts = ap.parse_args()
    fz = _load_fuzz()
    t0 = time.perf_counter()

    jsonl, csvt = Tally("loaders: JSONL files"), Tally("loaders: CSV files")
    run(jsonl, fz.jsonl_files(), opts.loaders // 2, opts.seed,
        lambda data: jsonl.add(fz.check_loader(data, ".jsonl", fz.jsonl_records(data))))
    run(csvt, fz.csv_files(), opts.loaders - opts.loaders // 2, opts.seed,
        lambda f: csvt.add(fz.check_loader(f[0], ".csv", f[1])))
    engine = Tally("engine round trip (Edge, reopen)")
    run(engine, fz.engine_corpora(), opts.engine, opts.seed,
        lambda data: engine.add(fz.check_round_trip(data)))
    urls = Tally("URL typer")
    run(urls, fz.urls(), opts.urls, opts.seed,
        lambda u: urls.add(fz.check_url(*u), wrong_type=True))

    writers: list[tuple[str, str]] = []
    t_w = time.perf_counter()
    if opts.writers:
        cli = [str(Path(sys.executable).with_name("credrank"))]
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus.jsonl"
            with corpus.open("w") as fh:
                for i in range(opts.writer_docs):
                    fh.write(json.dumps({"id": f"d{i:05d}", "text": f"fever trial {i} word",
                                         "url": f"https://www.cdc.gov/p{i}",
                                         "x_meta": {"n": i, "tags": ["a", [i]]}}) + "\n")
            for _ in range(opts.writers):
                writers.append(writer_trial(corpus, opts.writer_docs, cli))
    w_seconds = time.perf_counter() - t_w

    print(f"seed {opts.seed}; total {time.perf_counter() - t0:.0f} s\n")
    print("| check | inputs tried | records (accepted / rejected) | crashes | silent drops "
          "| wrong provenance types | other failures | time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in (jsonl, csvt, engine, urls):
        recs = (f"{t.records} ({t.accepted} / {t.rejected})" if t is not urls else "–")
        wrong = str(t.wrong_types) if t is urls else "–"
        drops = str(t.drops) if t is not urls else "–"
        other = t.other
        print(f"| {t.name} | {t.tried} | {recs} | {t.crashes} | {drops} | {wrong} | {other} "
              f"| {t.seconds:.0f} s |")
    if writers:
        refused = sum(o == "refused" for o, _ in writers)
        seq = sum(o == "sequential" for o, _ in writers)
        bad = sum(o == "bad" for o, _ in writers)
        corrupted = sum(d.startswith("corrupted") for _, d in writers)
        print(f"\nConcurrent writers ({opts.writer_docs} documents, two `credrank index` "
              f"started together on a fresh directory), {len(writers)} trials, "
              f"{w_seconds:.0f} s:\n")
        print("| trials | one refused with exit 2 | no overlap (both exit 0) | other exit codes "
              "| index corrupted after |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| {len(writers)} | {refused} | {seq} | {bad} | {corrupted} of {len(writers)} |")
        for o, d in writers:
            if o == "bad" or d != "whole":
                print(f"  {o}: {d}")
    for t in (jsonl, csvt, engine, urls):
        for ex in t.examples:
            print(f"  {t.name}: {ex}")


if __name__ == "__main__":
    main()
