"""Reliability benchmark: vectorised IWMV vs a straightforward dict-of-answers loop.

Synthetic calibration set (seeded): S sources with reliabilities ~ Beta(2q/(1−q), 2), Q
questions, 5 answer classes, 10% abstentions (the RA-RAG simulation protocol of
``credrank.experiments.ra_rag_simulation``). Printed side by side, from one run:

  * vectorised  — ``ReliabilityEstimator.fit`` on the (S, Q) int class matrix (numpy bincount)
  * dict loop   — the same IWMV with the same declared rules over ``{source: {question: class}}``
                  dictionaries in plain Python (the baseline)
  * encode      — string answers → class matrix through the equivalence rule (one-off cost)
  * dependence  — the pairwise copy test (``detect_dependence``) on the same matrix

Both estimators must agree (same consensus, same r to 1e-9); the script says so. Goal of the
issue: S = 1,000 × Q = 200 "well under a second". A measurement, not a test.

    python benchmarks/bench_reliability.py [--sources 1000] [--questions 200] [--q 0.6]
                                  [--abstain 0.1] [--start majority|plurality] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from credrank.experiments.ra_rag_simulation import simulate_answers
from credrank.experiments.reference import dict_loop_iwmv
from credrank.reliability.answers import AnswerTable
from credrank.reliability.dependence import detect_dependence
from credrank.reliability.estimate import ReliabilityEstimator, encode_answers


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


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
    print(f"| dependence test (S² pairs) | {t_dep:.4f} | {len(report.clusters)} clusters |")
    print()
    print(f"same consensus: {same_z}; same r (1e-9): {same_r}; converged: {est.converged_}; "
          f"known sources {int(k.sum())}; consensus accuracy vs truth {acc:.3f}; "
          f"Pearson(r̂, r) {corr}")


if __name__ == "__main__":
    main()
