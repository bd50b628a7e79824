"""Real hosts as sources: reliability from agreement on Golden-Gaze TREC 2021 (chapter 35.3).

Data: ``goldengaze_trec2021_host_stances.csv.gz`` (see ``shared/data/SOURCES.md``): 50 health
topics with a known ``correct_stance`` (helpful/unhelpful, 25 each), BM25 top-3000 pages per
topic with ``host`` and a stance model's ``helpful_probability`` (a model prediction, not a
human label).

Declared mapping: hosts are sources, topics are questions; a host's answer to a topic is
``"helpful"`` when the **mean** ``helpful_probability`` of its pages for that topic is
``> 0.5``, else ``"unhelpful"``; a host without pages for a topic abstains. Class ids:
0 = helpful, 1 = unhelpful (so the vote's tie rule, lowest id, picks "helpful").

Measured here:

* unsupervised: plain majority, IWMV (paper weights and clipped), a two-coin Dawid–Skene EM;
  Pearson/Spearman of the estimated ``r`` with each host's accuracy against the known stances
  (hosts with >= 5 topics); :func:`~credrank.reliability.estimate.consensus_diagnostics` says
  whether the agreement consensus may be read as truth;
* anchored (gold topics with known answers), leave-one-topic-out (49 anchors, 1 test topic)
  and with few anchors (``n`` random gold topics, the rest tested, repeated):
  ``one-coin`` Laplace-smoothed accuracy ``r = (c+1)/(n+2)`` with log-odds weights
  ``log(r/(1−r))``; ``two-coin`` naive Bayes with Laplace-smoothed sensitivity/specificity and
  a fixed balanced class prior; ``anchored DS`` (two-coin EM with the gold topics fixed);
  ``ridge`` — host weights learned by L2-regularised least squares on the gold topics
  (``w = X_g (X_gᵀX_g + λI)⁻¹ y_g``, λ chosen by inner leave-one-out on the gold topics only),
  hosts answering fewer than 2 topics dropped (they cannot link a gold topic to another);
  ``ridge, ballots × log(1+pages) [post-hoc]`` — the same with each ballot scaled by the
  log page count, a variant kept *because* it scored best on these 50 topics (reported as
  optimistic);
* host-level filter: one-coin leave-one-topic-out keeping hosts with >= k topics.

The class prior of the anchored methods is fixed at 0.5, not estimated from the anchors: with
25/25 topics, leave-one-out anchors always hold 24 of the held-out class, and a prior fitted on
them pushes every prediction away from the truth (a known leave-one-out artefact).
"""

from __future__ import annotations

import gzip
import math
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from credrank.evaluate.stats import wilson
from credrank.evaluate.tables import Cell, Column, ResultTable, Row
from credrank.reliability.estimate import (
    EncodedAnswers,
    consensus_diagnostics,
    iterate_weighted_majority,
)
from credrank.reliability.vote import majority_matrix
from credrank_bench.datasets.base import (
    MAX_DATA_BYTES,
    csv_dict_rows,
    data_file,
    decode_data,
)

LABELS: tuple[str, str] = ("helpful", "unhelpful")
REQUIRED = ("topic_id", "correct_stance", "host", "helpful_probability")


@dataclass(frozen=True)
class GoldenGazeHosts:
    """Host × topic answers (0 helpful, 1 unhelpful, -1 abstain) and the known stances."""

    hosts: tuple[str, ...]
    topics: tuple[str, ...]
    classes: np.ndarray
    truth: np.ndarray
    mean_probability: np.ndarray
    pages: np.ndarray
    #: the data rows (pages) read, skipped ones included
    rows: int = 0
    #: what was read and skipped (the reader's notes)
    notes: tuple[str, ...] = ()

    def encoded(self) -> EncodedAnswers:
        return EncodedAnswers(self.hosts, self.topics, self.classes,
                              tuple(LABELS for _ in self.topics))


def _read_row(path: Path, line: int, row: dict[str, str],
              sums: dict[tuple[str, str], list[float]], truth: dict[str, str]) -> str | None:
    """One row into ``sums`` (host, topic → [sum, pages]) and ``truth``; the reason a row is
    skipped (counted in the notes: an empty ``host`` or ``topic_id`` is no source or no
    question, and would merge unrelated pages into one), else ``None``. Errors name
    ``path:line``."""
    topic, stance, host = row["topic_id"], row["correct_stance"], row["host"]
    if not topic.strip():
        return "row without topic_id"
    if not host.strip():
        return "row without host"
    try:
        p = float(row["helpful_probability"])
    except ValueError:
        raise ValueError(f"{path}:{line}: field 'helpful_probability': expected a number, "
                         f"got {row['helpful_probability']!r}") from None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{path}:{line}: field 'helpful_probability': expected a value in "
                         f"[0, 1], got {p}")
    if stance not in LABELS:
        raise ValueError(f"{path}:{line}: field 'correct_stance': expected one of {LABELS}, "
                         f"got {stance!r}")
    if truth.setdefault(topic, stance) != stance:
        raise ValueError(f"{path}:{line}: topic {topic!r} has two correct_stance values")
    acc = sums.setdefault((host, topic), [0.0, 0.0])
    acc[0] += p
    acc[1] += 1
    return None


def load_goldengaze(path: str | Path) -> GoldenGazeHosts:
    """Read the flattened Golden-Gaze file into host answers (declared mapping in module doc)."""
    path = data_file(path, "gzip-compressed CSV (goldengaze_trec2021_host_stances.csv.gz, "
                           "shared/data/goldengaze)")
    try:
        with gzip.open(path, "rb") as fh:
            raw = fh.read(MAX_DATA_BYTES + 1)
    except gzip.BadGzipFile:
        raise ValueError(f"{path}: expected a gzip-compressed CSV "
                         "(goldengaze_trec2021_host_stances.csv.gz), got a file that is not "
                         "gzip") from None
    except (EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: expected a whole gzip-compressed CSV, got a truncated or "
                         f"corrupt one ({exc})") from None
    if len(raw) > MAX_DATA_BYTES:
        raise ValueError(f"{path}: expected at most {MAX_DATA_BYTES:,} bytes of CSV once "
                         "decompressed, got more")
    text = decode_data(raw, str(path))  # the readers' one decoding rule: file, line, byte
    sums: dict[tuple[str, str], list[float]] = {}
    truth: dict[str, str] = {}
    skipped: Counter[str] = Counter()
    n_rows = 0
    for line, row in csv_dict_rows(text, str(path), REQUIRED, "Golden-Gaze CSV"):
        n_rows += 1
        reason = _read_row(path, line, row, sums, truth)
        if reason is not None:
            skipped[reason] += 1
    topics = tuple(sorted(truth, key=lambda t: (len(t), t)))
    hosts = tuple(sorted({h for h, _ in sums}))
    h_index = {h: i for i, h in enumerate(hosts)}
    t_index = {t: j for j, t in enumerate(topics)}
    mean = np.zeros((len(hosts), len(topics)))
    pages = np.zeros((len(hosts), len(topics)), dtype=np.int64)
    for (h, t), (total, count) in sums.items():
        mean[h_index[h], t_index[t]] = total / count
        pages[h_index[h], t_index[t]] = int(count)
    classes = np.where(pages > 0, np.where(mean > 0.5, 0, 1), -1).astype(np.int64)
    y = np.array([LABELS.index(truth[t]) for t in topics], dtype=np.int64)
    notes = [f"read {n_rows} rows (pages) → {len(sums)} host × topic answers of "
             f"{len(hosts)} hosts on {len(topics)} topics",
             *(f"skipped {n}: {reason}" for reason, n in sorted(skipped.items()))]
    return GoldenGazeHosts(hosts, topics, classes, y, mean, pages, n_rows, tuple(notes))


# --------------------------------------------------------------------------------------------
# estimators on the binary host × topic matrix (0 helpful, 1 unhelpful, -1 abstain)
# --------------------------------------------------------------------------------------------

def _sign(m: np.ndarray) -> np.ndarray:
    return np.where(m == 0, 1.0, np.where(m == 1, -1.0, 0.0))


def dawid_skene(m: np.ndarray, *, gold: np.ndarray | None = None, y: np.ndarray | None = None,
                prior: float | None = None, smoothing: float = 1.0, min_topics: int = 2,
                max_iter: int = 200,
                tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-coin Dawid–Skene EM for binary answers (the per-source confusion model).

    Each source has a sensitivity ``α_s = P(says helpful | helpful)`` and a specificity
    ``β_s = P(says unhelpful | unhelpful)`` (Laplace-smoothed: ``(k + a)/(n + 2a)``); the
    posterior ``T_q = P(helpful | answers)`` alternates with them. Sources answering fewer than
    ``min_topics`` questions are left out (a one-answer source fits its confusion to the current
    label and only echoes it back). Without anchors ``T`` starts from the majority vote; with
    anchors (``gold`` topics fixed to ``y``) the other topics start at 0.5, so the first
    confusion estimates come from the anchors alone. ``prior`` fixes ``P(helpful)``; ``None``
    re-estimates it (clamped to [0.01, 0.99]). Returns ``(T, α, β)``; α = β = 0.5 for the
    sources left out.
    """
    use = (m >= 0).sum(1) >= min_topics
    mu = m[use]
    answered = mu >= 0
    h = ((mu == 0) & answered).astype(np.float64)
    u = ((mu == 1) & answered).astype(np.float64)
    a = answered.astype(np.float64)
    fixed = np.zeros(m.shape[1], dtype=bool) if gold is None else np.asarray(gold, dtype=bool)
    if fixed.any():
        if y is None:
            raise ValueError("y: expected the gold labels when gold topics are given")
        t = np.where(fixed, (np.asarray(y) == 0).astype(np.float64), 0.5)
    else:
        t = np.where(h.sum(0) > u.sum(0), 1.0, np.where(h.sum(0) == u.sum(0), 0.5, 0.0))
    alpha = beta = np.full(mu.shape[0], 0.5)
    for _ in range(max_iter):
        alpha = (h @ t + smoothing) / (a @ t + 2 * smoothing)
        beta = (u @ (1 - t) + smoothing) / (a @ (1 - t) + 2 * smoothing)
        pi = prior if prior is not None else float(np.clip(t.mean(), 0.01, 0.99))
        log_h = h.T @ np.log(alpha) + u.T @ np.log(1 - alpha) + math.log(pi)
        log_u = h.T @ np.log(1 - beta) + u.T @ np.log(beta) + math.log(1 - pi)
        t_new = 1.0 / (1.0 + np.exp(np.clip(log_u - log_h, -500, 500)))
        t_new = np.where(fixed, t, t_new)
        done = float(np.max(np.abs(t_new - t), initial=0.0)) < tol
        t = t_new
        if done:
            break
    full_a, full_b = np.full(m.shape[0], 0.5), np.full(m.shape[0], 0.5)
    full_a[use], full_b[use] = alpha, beta
    return t, full_a, full_b


def one_coin_weights(m: np.ndarray, y: np.ndarray, gold: np.ndarray,
                     smoothing: float = 1.0) -> np.ndarray:
    """Supervised log-odds weights ``w_s = log(r_s/(1−r_s))``, ``r_s = (c_s+a)/(n_s+2a)`` on the
    gold topics — the optimal weighted-majority weight under independence (chapter 35.3's
    ``v_s`` is its affine stand-in)."""
    g = np.asarray(gold, dtype=bool)
    answered = m[:, g] >= 0
    correct = (answered & (m[:, g] == y[g][None, :])).sum(1)
    n = answered.sum(1)
    r = (correct + smoothing) / (n + 2 * smoothing)
    return np.log(r / (1 - r))


def two_coin_scores(m: np.ndarray, y: np.ndarray, gold: np.ndarray,
                    smoothing: float = 1.0) -> np.ndarray:
    """Naive-Bayes log-likelihood ratio ``log P(answers|helpful) − log P(answers|unhelpful)``
    per topic, with Laplace-smoothed sensitivity/specificity from the gold topics and a fixed
    balanced prior."""
    g = np.asarray(gold, dtype=bool)
    mg, yg = m[:, g], y[g]
    ans = mg >= 0
    n1 = (ans & (yg == 0)).sum(1)
    k1 = ((mg == 0) & (yg == 0)).sum(1)
    n0 = (ans & (yg == 1)).sum(1)
    k0 = ((mg == 1) & (yg == 1)).sum(1)
    alpha = (k1 + smoothing) / (n1 + 2 * smoothing)
    beta = (k0 + smoothing) / (n0 + 2 * smoothing)
    h = (m == 0).astype(np.float64)
    u = (m == 1).astype(np.float64)
    return h.T @ (np.log(alpha) - np.log(1 - beta)) + u.T @ (np.log(1 - alpha) - np.log(beta))


def ridge_weights(m: np.ndarray, y: np.ndarray, gold: np.ndarray, *,
                  lambdas: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0, 1000.0),
                  min_topics: int = 2, ballots: np.ndarray | None = None,
                  ) -> tuple[np.ndarray, float]:
    """Host weights ``w = X_g (X_gᵀ X_g + λI)⁻¹ y_g`` (answers ±1, labels ±1, no intercept).

    ``X`` holds the ballots: ±1 per answer, times ``ballots`` when given (e.g. a per-answer
    page-count scale). λ is chosen by exact leave-one-out on the gold topics only (closed form
    ``(f_i − H_ii y_i)/(1 − H_ii)``; ties: the smallest λ). Hosts answering fewer than
    ``min_topics`` topics in ``m`` get weight 0. Returns ``(w, λ)``; the vote on topic ``q`` is
    ``sign(Σ_s w_s X_sq)``.
    """
    g = np.flatnonzero(np.asarray(gold, dtype=bool))
    x = _sign(m) * ((m >= 0).sum(1) >= min_topics)[:, None]
    if ballots is not None:
        x = x * ballots
    xg = x[:, g]
    yg = np.where(y[g] == 0, 1.0, -1.0)
    kern = xg.T @ xg
    eye = np.eye(len(g))
    best_acc, best_lam = -1.0, lambdas[0]
    for lam in lambdas:
        hat = kern @ np.linalg.inv(kern + lam * eye)
        fit = hat @ yg
        diag = np.minimum(np.diag(hat), 1 - 1e-9)
        loo = (fit - diag * yg) / (1 - diag)
        acc = float(np.mean(np.where(loo >= 0, 1.0, -1.0) == yg))
        if acc > best_acc + 1e-12:
            best_acc, best_lam = acc, lam
    alpha = np.linalg.solve(kern + best_lam * eye, yg)
    return xg @ alpha, best_lam


def _predict_from_scores(score: np.ndarray) -> np.ndarray:
    """score > 0 favours helpful (class 0); a zero score is a tie → class 0 (tie rule)."""
    return np.where(score >= 0, 0, 1).astype(np.int64)


Anchored = Callable[[np.ndarray], np.ndarray]

#: name of the variant chosen after looking at leave-one-topic-out results (reported as such)
POST_HOC = "ridge, ballots × log(1+pages) [post-hoc]"


def anchored_methods(m: np.ndarray, y: np.ndarray,
                     pages: np.ndarray) -> dict[str, Anchored]:
    """The anchored estimators as ``predict(gold_mask) -> class per topic`` closures.

    ``m`` should hold only hosts answering >= 2 topics: a one-topic host contributes exactly
    zero to every method here (its smoothed accuracy on zero gold topics is 1/2, weight 0),
    so the filter changes no prediction and saves time. ``POST_HOC`` is a variant picked after
    trying several on the same 50 topics; its accuracy is optimistic.
    """
    x = _sign(m)
    scale = np.log1p(pages)

    def one_coin(gold: np.ndarray) -> np.ndarray:
        return _predict_from_scores(one_coin_weights(m, y, gold) @ x)

    def two_coin(gold: np.ndarray) -> np.ndarray:
        return _predict_from_scores(two_coin_scores(m, y, gold))

    def anchored_ds(gold: np.ndarray) -> np.ndarray:
        t, _, _ = dawid_skene(m, gold=gold, y=y, prior=0.5)
        return np.where(t >= 0.5, 0, 1).astype(np.int64)

    def ridge(gold: np.ndarray) -> np.ndarray:
        w, _ = ridge_weights(m, y, gold)
        return _predict_from_scores(w @ x)

    def ridge_pages(gold: np.ndarray) -> np.ndarray:
        w, _ = ridge_weights(m, y, gold, ballots=scale)
        return _predict_from_scores(w @ (x * scale))

    return {"one-coin log-odds (Laplace)": one_coin, "two-coin naive Bayes (Laplace)": two_coin,
            "anchored Dawid–Skene EM": anchored_ds, "ridge-learned host weights": ridge,
            POST_HOC: ridge_pages}


def _corr(x: np.ndarray, y: np.ndarray) -> dict[str, float | None]:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"pearson": None, "spearman": None, "n": len(x)}
    return {"pearson": float(stats.pearsonr(x, y)[0]),
            "spearman": float(stats.spearmanr(x, y)[0]), "n": len(x)}


def _accuracy_entry(pred: np.ndarray, y: np.ndarray, baseline: np.ndarray) -> dict[str, Any]:
    correct = pred == y
    lo, hi = wilson(int(correct.sum()), len(y))  # the one z of credrank.evaluate.stats
    base = baseline == y
    return {"accuracy": float(correct.mean()), "correct": int(correct.sum()), "n": len(y),
            "ci95": [lo, hi], "wins_vs_majority": int(np.sum(correct & ~base)),
            "losses_vs_majority": int(np.sum(~correct & base))}


def _per_topic(topics: tuple[str, ...], pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """``{topic: 1.0 if pred is right else 0.0}``: the per-topic values behind an accuracy,
    its Δ and its wins/losses/ties."""
    return {t: float(c) for t, c in zip(topics, (pred == y).tolist(), strict=True)}


def run_goldengaze(path: str | Path, *, seed: int = 0, anchor_sizes: tuple[int, ...] = (
        5, 10, 20, 40), repeats: int = 20, min_host_topics: int = 5,
        filter_topics: tuple[int, ...] = (2, 3, 5, 10)) -> dict[str, Any]:
    """Reliability from agreement on real hosts, unsupervised and anchored (chapter 35.3).

    Returns a JSON-serialisable dict: ``data`` (sizes), ``unsupervised`` (topic accuracy of
    majority / IWMV / IWMV clip / Dawid–Skene, with Wilson 95% intervals and paired
    wins/losses against majority), ``correlation`` (Pearson/Spearman of estimated reliability
    with host accuracy, hosts with ``>= min_host_topics`` topics), ``diagnostics`` (whether the
    IWMV consensus may be read as truth), ``anchored_loto`` (leave-one-topic-out),
    ``anchored_filters`` (one-coin LOTO keeping only hosts that answer ``>= k`` topics, for
    each ``k`` in ``filter_topics``), ``anchored_few`` (mean accuracy on the non-gold topics
    for ``anchor_sizes`` random gold sets, ``repeats`` draws, seeded) and ``seconds``;
    :func:`goldengaze_tables` turns it into the report's tables.
    """
    start = time.perf_counter()
    data = load_goldengaze(path)
    m, y = data.classes, data.truth
    n_t = len(data.topics)
    answered = m >= 0
    n_answers = answered.sum(1)
    host_acc = np.where(n_answers > 0, ((m == y[None, :]) & answered).sum(1)
                        / np.maximum(n_answers, 1), 0.0)
    eligible = n_answers >= min_host_topics

    majority = majority_matrix(m, rule="all")
    fit = iterate_weighted_majority(m)
    fit_clip = iterate_weighted_majority(m, clip=True)
    ds_t, ds_a, ds_b = dawid_skene(m)
    ds_pred = np.where(ds_t >= 0.5, 0, 1)
    pi = float(ds_t.mean())
    ds_rel = pi * ds_a + (1 - pi) * ds_b          # expected accuracy under the DS model
    unsup = {
        "majority": _accuracy_entry(majority, y, majority),
        "IWMV (v = S·r − 1)": _accuracy_entry(fit["consensus"], y, majority),
        "IWMV clipped": _accuracy_entry(fit_clip["consensus"], y, majority),
        "two-coin Dawid–Skene": _accuracy_entry(ds_pred, y, majority),
    }
    unsup["IWMV (v = S·r − 1)"].update(n_iter=int(fit["n_iter"]), converged=fit["converged"])
    topics = data.topics
    # per table, system and measure: the values per unit (topic, host, repeat) the tables are
    # computed from, for --out's per_query.csv (not the JSON)
    per_unit: dict[str, dict[str, dict[str, dict[str, float]]]] = {
        "unsupervised": {name: {"accuracy": _per_topic(topics, pred, y)} for name, pred in (
            (MAJORITY, majority), ("IWMV (v = S·r − 1)", fit["consensus"]),
            ("IWMV clipped", fit_clip["consensus"]), ("two-coin Dawid–Skene", ds_pred))},
        "anchored_loto": {MAJORITY: {"accuracy": _per_topic(topics, majority, y)}},
        "host_filters": {MAJORITY: {"accuracy": _per_topic(topics, majority, y)}},
        "anchored_few": {},
        "correlation": {},
    }
    known = fit["known"] & eligible
    correlation = {
        "IWMV r": _corr(fit["reliability"][known], host_acc[known]),
        "Dawid–Skene expected accuracy": _corr(ds_rel[eligible], host_acc[eligible]),
    }
    for name, estimate, mask in (("IWMV r", fit["reliability"], known),
                                 ("Dawid–Skene expected accuracy", ds_rel, eligible)):
        hosts = [h for h, keep in zip(data.hosts, mask.tolist(), strict=True) if keep]
        per_unit["correlation"][name] = {
            "reliability estimate": dict(zip(hosts, map(float, estimate[mask]), strict=True)),
            "host accuracy": dict(zip(hosts, map(float, host_acc[mask]), strict=True))}
    diag = consensus_diagnostics(data.encoded(), fit["consensus"], fit["reliability"],
                                 fit["known"], fit["coverage"], tied=fit["tied"])

    linked = n_answers >= 2
    methods = anchored_methods(m[linked], y, data.pages[linked])
    loto: dict[str, Any] = {}
    for name, method in methods.items():
        pred = np.empty(n_t, dtype=np.int64)
        for j in range(n_t):
            gold = np.ones(n_t, dtype=bool)
            gold[j] = False
            pred[j] = method(gold)[j]
        loto[name] = _accuracy_entry(pred, y, majority)
        per_unit["anchored_loto"][name] = {"accuracy": _per_topic(topics, pred, y)}

    filters: dict[str, Any] = {}
    for k in filter_topics:
        keep = n_answers >= k
        mk = m[keep]
        pred = np.empty(n_t, dtype=np.int64)
        for j in range(n_t):
            gold = np.ones(n_t, dtype=bool)
            gold[j] = False
            pred[j] = _predict_from_scores(one_coin_weights(mk, y, gold) @ _sign(mk))[j]
        filters[str(k)] = {**_accuracy_entry(pred, y, majority), "hosts": int(keep.sum())}
        per_unit["host_filters"][f"one-coin LOTO, k = {k}"] = {
            "accuracy": _per_topic(topics, pred, y)}

    rng = np.random.default_rng(seed)
    few: dict[str, dict[str, float]] = {name: {} for name in ["majority", *methods]}
    for size in anchor_sizes:
        if not 0 < size < n_t:
            continue
        scores: dict[str, list[float]] = {name: [] for name in few}
        for _ in range(repeats):
            gold = np.zeros(n_t, dtype=bool)
            gold[rng.choice(n_t, size, replace=False)] = True
            test = ~gold
            scores["majority"].append(float(np.mean(majority[test] == y[test])))
            for name, method in methods.items():
                pred = method(gold)
                scores[name].append(float(np.mean(pred[test] == y[test])))
        for name, vals in scores.items():
            few[name][str(size)] = float(np.mean(vals))
            per_unit["anchored_few"].setdefault(name, {})[f"{size} anchors"] = {
                f"repeat {r + 1}": v for r, v in enumerate(vals)}

    result: dict[str, Any] = {
        "notes": list(data.notes),
        "data": {"path": str(path), "rows": data.rows, "answers": int(answered.sum()),
                 "hosts": len(data.hosts), "topics": n_t,
                 "hosts_min_topics": int(eligible.sum()), "min_host_topics": min_host_topics,
                 "helpful_share_of_answers": float((m == 0).sum() / max(answered.sum(), 1)),
                 "helpful_topics": int((y == 0).sum())},
        "unsupervised": unsup,
        "correlation": correlation,
        "diagnostics": diag.to_dict(),
        "anchored_loto": loto,
        "anchored_filters": filters,
        "post_hoc": POST_HOC,
        "anchored_few": {"sizes": [s for s in anchor_sizes if 0 < s < n_t],
                         "sizes_left_out": [s for s in anchor_sizes if not 0 < s < n_t],
                         "repeats": repeats,
                         "seed": seed, "accuracy": few},
        "per_unit": per_unit,
    }
    result["seconds"] = time.perf_counter() - start
    return result


MAJORITY = "majority"


def _accuracy_cell(e: dict[str, Any], base: dict[str, Any] | None) -> Cell:
    """Topic accuracy with its Wilson interval; against the majority vote (``base``) the
    difference and the per-topic wins/losses/ties."""
    if base is None:
        return Cell(e["accuracy"], e["ci95"][0], e["ci95"][1], n=e["n"])
    wins, losses = e["wins_vs_majority"], e["losses_vs_majority"]
    return Cell(e["accuracy"], e["ci95"][0], e["ci95"][1], n=e["n"],
                delta=e["accuracy"] - base["accuracy"], wins=wins, losses=losses,
                ties=e["n"] - wins - losses)


def _accuracy_table(key: str, title: str, entries: dict[str, dict[str, Any]],
                    majority: dict[str, Any], notes: list[str],
                    params: dict[str, dict[str, Any]] | None = None) -> ResultTable:
    col = Column("accuracy", "accuracy")
    rows = [Row(MAJORITY, False, {col.name: _accuracy_cell(majority, None)})]
    for name, e in entries.items():
        if name == MAJORITY:
            continue
        rows.append(Row(name, False, {col.name: _accuracy_cell(e, majority)},
                        notes=[POST_HOC_NOTE] if name == POST_HOC else [],
                        params=(params or {}).get(name, {})))
    return ResultTable(key, title, [col], rows, baseline=MAJORITY, notes=notes)


POST_HOC_NOTE = ("picked after trying several variants on the 50 topics of the full Golden-Gaze "
                 "file: its accuracy there is optimistic")


def goldengaze_tables(res: dict[str, Any]) -> list[ResultTable]:
    """The tables of :func:`run_goldengaze`'s result. No estimator reads the known stance of
    the topic it is scored on (anchored ones read the other topics' stances), so every row
    has ``reads_labels = False``; the baseline is the unsupervised majority vote."""
    d = res["data"]
    majority = res["unsupervised"][MAJORITY]
    diag = res["diagnostics"]
    verdict = "trustworthy" if diag["trustworthy"] else "NOT trustworthy as truth"
    wilson = ("Topic accuracy over the known stances with its Wilson 95% interval; Δ and "
              "wins/losses/ties per topic against the unsupervised majority vote.")
    unsup = _accuracy_table(
        "unsupervised", "Golden-Gaze hosts: unsupervised topic accuracy", res["unsupervised"],
        majority, [f"{d['hosts']} hosts, {d['topics']} topics, {d['hosts_min_topics']} hosts "
                   f"with >= {d['min_host_topics']} topics; "
                   f"{d['helpful_share_of_answers']:.0%} of host answers say 'helpful'.",
                   wilson, f"IWMV consensus diagnostic: {verdict}.",
                   *(f"Warning: {w}" for w in diag["warnings"])],
        params={"IWMV (v = S·r − 1)": {
            "n_iter": res["unsupervised"]["IWMV (v = S·r − 1)"]["n_iter"],
            "converged": res["unsupervised"]["IWMV (v = S·r − 1)"]["converged"]}})
    loto = _accuracy_table(
        "anchored_loto", "Golden-Gaze hosts: anchored, leave-one-topic-out",
        res["anchored_loto"], majority,
        [f"Each topic is predicted with the other {d['topics'] - 1} topics' known stances "
         "as anchors.", wilson])
    filters = _accuracy_table(
        "host_filters", "Golden-Gaze hosts: one-coin LOTO keeping hosts with >= k topics",
        {f"one-coin LOTO, k = {k}": e for k, e in res["anchored_filters"].items()}, majority,
        [wilson], params={f"one-coin LOTO, k = {k}": {"min_topics": int(k), "hosts": e["hosts"]}
                          for k, e in res["anchored_filters"].items()})
    corr_cols = [Column("Pearson", "Pearson"), Column("Spearman", "Spearman")]
    corr = ResultTable(
        "correlation", "Golden-Gaze hosts: reliability estimate vs host accuracy", corr_cols,
        [Row(name, False, {"Pearson": Cell(c["pearson"], n=c["n"]),
                           "Spearman": Cell(c["spearman"], n=c["n"])})
         for name, c in res["correlation"].items()],
        notes=[f"Correlation over hosts with >= {d['min_host_topics']} topics (n = hosts); "
               "undefined correlations are shown as —."])
    few = res["anchored_few"]
    few_cols = [Column(f"{s} anchors", "accuracy") for s in few["sizes"]]
    few_table = ResultTable(
        "anchored_few", "Golden-Gaze hosts: accuracy with few anchors", few_cols,
        [Row(name, False, {f"{s} anchors": Cell(accs[str(s)]) for s in few["sizes"]},
             notes=[POST_HOC_NOTE] if name == POST_HOC else [])
         for name, accs in few["accuracy"].items()],
        baseline=MAJORITY if MAJORITY in few["accuracy"] else None,
        notes=[f"Mean accuracy on the non-anchor topics over {few['repeats']} random anchor "
               f"sets per size (seed {few['seed']})."]
        + ([f"Anchor sizes {few['sizes_left_out']} left out: this file has "
            f"{res['data']['topics']} topics, and a size needs at least one topic left to "
            "test."] if few.get("sizes_left_out") else []))
    return [unsup, loto, filters, corr, few_table]
