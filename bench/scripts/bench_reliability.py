"""Reliability benchmark: vectorised IWMV vs a straightforward dict-of-answers loop.

Synthetic calibration set (seeded): S sources with reliabilities ~ Beta(2q/(1−q), 2), Q
questions, 5 answer classes, 10% abstentions (the RA-RAG simulation protocol of
``credrank_bench.experiments.ra_rag_simulation``). Printed side by side, from one run:

  * vectorised  — ``ReliabilityEstimator.fit`` on the (S, Q) int class matrix (numpy bincount)
  * dict loop   — the same IWMV with the same declared rules over ``{source: {question: class}}``
                  dictionaries in plain Python (the baseline)
  * encode      — string answers → class matrix through the equivalence rule (one-off cost)
  * dependence  — the pairwise copy test (``detect_dependence``) on the same matrix

Both estimators must agree (same consensus, same r to 1e-9); the script says so. Goal of the
issue: S = 1,000 × Q = 200 "well under a second".

Then the scale table (issue 15, part 4): ``run_estimate`` (the ``credrank reliability
estimate`` computation) end to end on an ANSWERS CSV of S sources × Q questions (the same
simulation with 8 copied identities, written to a temporary file), the old path beside the new
one, interleaved run by run, median of ``--scale-repeats`` runs:

  * old path — the line-by-line CSV reader (``answers._load_answers_python``) and the
    whole-matrix dependence test (``detect_dependence(method="pairs")``); the rest of the
    computation (encoding, IWMV, diagnostics) is today's code in both paths, so the old
    column slightly understates the old cost
  * new path — ``run_estimate`` as users get it: pyarrow CSV reader, blocked dependence test

"identical" compares the whole JSON documents (clusters, pairs, reliabilities, consensus).
The load and dependence columns are the time spent in those two steps inside the same runs.
Above ``--old-max`` sources the old path is skipped (its S × S float64 matrices alone need
several GB). The CLI skips the dependence test above ``MAX_DEPENDENCE_SOURCES``; the
benchmark raises that cap so that the S = 10,000 row measures the whole computation.
Goal: S = 2,000 × Q = 200 ≤ 1.5 s. A measurement, not a test.

    python bench/scripts/bench_reliability.py [--sources 1000] [--questions 200] [--q 0.6]
                                  [--abstain 0.1] [--start majority|plurality] [--repeats 3]
                                  [--scale 250,1000,2000,10000] [--scale-repeats 3]
                                  [--old-max 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import credrank.cli.reliability as cli_reliability
from credrank.reliability import answers as answers_module
from credrank.reliability.answers import AnswerTable
from credrank.reliability.dependence import detect_dependence
from credrank.reliability.estimate import ReliabilityEstimator, encode_answers
from credrank_bench.experiments.ra_rag_simulation import simulate_answers
from credrank_bench.experiments.reference import dict_loop_iwmv


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def write_answers_csv(path: Path, n_sources: int, n_questions: int, q: float,
                      abstain: float, seed: int) -> int:
    """An ANSWERS CSV of the simulation with 8 copied identities; returns the row count."""
    sim = simulate_answers(n_sources - 8, n_questions, q, abstain=abstain, variant="copies",
                           n_copies=8, seed=seed)
    s_idx, q_idx = np.nonzero(sim.classes >= 0)
    lines = ["question_id,source_id,answer"]
    lines += [f"q{j},s{i},answer {c}" for i, j, c in
              zip(s_idx.tolist(), q_idx.tolist(), sim.classes[s_idx, q_idx].tolist(),
                  strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


def _timed(fn: Callable[..., Any], spent: dict[str, float], key: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - t0
    return wrapper


@contextlib.contextmanager
def estimate_path(old: bool, n_sources: int, spent: dict[str, float]) -> Iterator[None]:
    """``run_estimate`` with the old or the new reader and dependence test, timing both."""
    load = answers_module._load_answers_python if old else answers_module.load_answers
    method = "pairs" if old else "blocked"

    def dependence(enc: Any, **kwargs: Any) -> Any:
        # run_estimate passes its own max_sources (patched below to fit n_sources)
        kwargs["max_sources"] = max(n_sources, int(kwargs.get("max_sources", 5000)))
        return detect_dependence(enc, method=method, **kwargs)

    with mock.patch.object(cli_reliability, "load_answers", _timed(load, spent, "load")), \
            mock.patch.object(cli_reliability, "detect_dependence",
                              _timed(dependence, spent, "dependence")), \
            mock.patch.object(cli_reliability, "MAX_DEPENDENCE_SOURCES",
                              max(n_sources, cli_reliability.MAX_DEPENDENCE_SOURCES)):
        yield


def scale_table(sizes: list[int], n_questions: int, q: float, abstain: float, seed: int,
                repeats: int, old_max: int) -> None:
    print()
    print(f"run_estimate end to end, Q = {n_questions}, median of {repeats} interleaved runs "
          "(old path, then new path, per run)")
    print()
    print("| S | Q | answer rows | old path s | new path s | speed-up | identical "
          "| load old / new s | dependence old / new s | clusters |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n_sources in sizes:
            path = Path(tmp) / f"answers_{n_sources}.csv"
            rows = write_answers_csv(path, n_sources, n_questions, q, abstain, seed)
            run_old = n_sources <= old_max
            times: dict[str, list[float]] = {}
            docs: dict[str, str] = {}
            n_clusters = 0
            for _ in range(repeats):
                for label in (("old", "new") if run_old else ("new",)):
                    spent: dict[str, float] = {}
                    with estimate_path(label == "old", n_sources, spent):
                        t0 = time.perf_counter()
                        doc = cli_reliability.run_estimate(path)
                        spent["total"] = time.perf_counter() - t0
                    for key, value in spent.items():
                        times.setdefault(f"{label}_{key}", []).append(value)
                    doc["answers"] = "(same file)"
                    docs[label] = json.dumps(doc)
                    n_clusters = len(doc["clusters"])
            med = {k: statistics.median(v) for k, v in times.items()}
            if run_old:
                same = "yes" if docs["old"] == docs["new"] else "**NO**"
                print(f"| {n_sources:,} | {n_questions} | {rows:,} | {med['old_total']:.2f} | "
                      f"{med['new_total']:.2f} | {med['old_total'] / med['new_total']:.1f}× | "
                      f"{same} | {med['old_load']:.2f} / {med['new_load']:.2f} | "
                      f"{med['old_dependence']:.2f} / {med['new_dependence']:.2f} | "
                      f"{n_clusters} |")
            else:
                print(f"| {n_sources:,} | {n_questions} | {rows:,} | (skipped: S > "
                      f"--old-max {old_max}) | {med['new_total']:.2f} | – | – | "
                      f"– / {med['new_load']:.2f} | – / {med['new_dependence']:.2f} | "
                      f"{n_clusters} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--q", type=float, default=0.6, help="mean reliability")
    ap.add_argument("--abstain", type=float, default=0.1, help="abstention probability")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", choices=("majority", "plurality"), default="majority",
                    help="questions of the first estimate")
    ap.add_argument("--scale", default="250,1000,2000,10000",
                    help="source counts of the run_estimate scale table ('' to skip it)")
    ap.add_argument("--scale-repeats", type=int, default=3)
    ap.add_argument("--old-max", type=int, default=2000,
                    help="largest S for which the old path is run")
    args = ap.parse_args()

    sim = simulate_answers(args.sources, args.questions, args.q, abstain=args.abstain,
                           seed=args.seed)
    m = sim.classes
    dicts = {s: {q: int(c) for q, c in enumerate(row) if c >= 0} for s, row in enumerate(m)}
    table = AnswerTable(tuple(f"s{i}" for i in range(m.shape[0])),
                        tuple(f"q{j}" for j in range(m.shape[1])),
                        tuple(tuple(f"answer {c}" if c >= 0 else None for c in row)
                              for row in m.tolist()))

    t_vec, est = best_of(lambda: ReliabilityEstimator(start=args.start).fit(m), args.repeats)
    t_loop, (ref_r, ref_z, ref_iter) = best_of(
        lambda: dict_loop_iwmv(dicts, m.shape[1], start=args.start), max(1, min(args.repeats, 2)))
    t_enc, _ = best_of(lambda: encode_answers(table), 1)
    t_dep, report = best_of(lambda: detect_dependence(est.encoded_), 1)

    same_z = {q: int(c) for q, c in enumerate(est.consensus_) if c >= 0} == ref_z
    same_r = set(ref_r) == {s for s in range(m.shape[0]) if est.known_[s]} and all(
        abs(est.reliability_[s] - r) < 1e-9 for s, r in ref_r.items())
    acc = float(np.mean(est.consensus_ == sim.truth))
    k = est.known_
    corr = (f"{np.corrcoef(est.reliability_[k], sim.reliability[k])[0, 1]:.3f}"
            if k.sum() > 2 else "undefined (no known source)")

    print(f"S = {m.shape[0]} sources × Q = {m.shape[1]} questions, q = {args.q}, "
          f"{int((m >= 0).sum())} answers, start = {args.start}; best of {args.repeats} runs")
    print()
    print("| step | seconds | vs dict loop |")
    print("|---|---|---|")
    speed = t_loop / t_vec
    print(f"| vectorised IWMV ({est.n_iter_} rounds) | {t_vec:.4f} | {speed:.1f}× faster |")
    print(f"| dict-of-answers loop ({ref_iter} rounds) | {t_loop:.4f} | 1.0× |")
    print(f"| encode strings → class matrix | {t_enc:.4f} | (one-off) |")
    print(f"| dependence test (blocked screen + exact check) | {t_dep:.4f} | "
          f"{len(report.clusters)} clusters |")
    print()
    print(f"same consensus: {same_z}; same r (1e-9): {same_r}; converged: {est.converged_}; "
          f"known sources {int(k.sum())}; consensus accuracy vs truth {acc:.3f}; "
          f"Pearson(r̂, r) {corr}")
    sizes = [int(x) for x in args.scale.split(",") if x.strip()]
    if sizes:
        scale_table(sizes, args.questions, args.q, args.abstain, args.seed,
                    max(1, args.scale_repeats), args.old_max)


if __name__ == "__main__":
    main()
