"""Source-type priors fitted from labelled data, shrunk toward a preset (seed 004's limit).

Seed 004 sets its priors by hand and names that as a limit ("the reliability priors are defined
manually and not learned from data"). Here the prior of each source type is the share of
reliable items of that type in a labelled set, shrunk toward the preset by a pseudo-count:

    λ_t = (n_real_t + m · λ0_t) / (n_t + m)

the posterior mean of a Beta(m·λ0_t, m·(1 − λ0_t)) prior after ``n_real_t`` reliable items out
of ``n_t``. ``m`` (the prior strength) is how many labelled items the preset is worth: with
``n_t = 0`` the fitted prior is the preset, and as ``n_t`` grows it tends to the empirical rate.
Types come from the URL through :class:`~credrank.provenance.SourceTyper` (never from text).

:func:`evaluate_fitted_priors` fits on some CoAID release folders and scores the fitted and the
preset priors on the other folders (AUC of the prior as a real-vs-fake score, log-loss, Brier).
CoAID labels say whether an item was fact-checked fake or real news; "real" stands in for
"reliable", and its base rate (about 83% real) is a property of how CoAID was collected.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.maths import roc_auc, shrink
from credrank.core.validation import check_nonnegative, check_probability
from credrank.documents.schema import SOURCE_TYPES
from credrank.evaluate.experiment import System
from credrank.evaluate.tables import Cell, Column, ResultTable, Row, descriptive_table
from credrank.provenance import SourceTyper
from credrank.signals.prior import PriorTable, load_priors
from credrank_bench.datasets import DatasetError, read_coaid

#: predicted probabilities are clipped to [LOG_LOSS_EPS, 1 − LOG_LOSS_EPS] in the log-loss
LOG_LOSS_EPS = 1e-6



def _check_labels(labels: Iterable[object], n: int) -> list[bool]:
    out = []
    for i, label in enumerate(labels):
        if isinstance(label, bool | np.bool_):
            out.append(bool(label))
        elif isinstance(label, numbers.Integral) and int(label) in (0, 1):
            out.append(bool(label))
        else:
            raise ValueError(f"labels[{i}]: expected a bool (True = reliable/real) or 0/1, "
                             f"got {label!r}")
    if len(out) != n:
        raise ValueError(f"labels: expected {n} entries (one per item), got {len(out)}")
    return out


def type_counts(types: Sequence[str], labels: Sequence[object]) -> dict[str, dict[str, int]]:
    """``{type: {"n", "real", "fake"}}`` over every type of ``SOURCE_TYPES`` (zeros included)."""
    flags = _check_labels(labels, len(types))
    counts = {t: {"n": 0, "real": 0, "fake": 0} for t in SOURCE_TYPES}
    for i, (stype, real) in enumerate(zip(types, flags, strict=True)):
        if stype not in counts:
            raise ValueError(f"types[{i}]: expected one of {', '.join(SOURCE_TYPES)}, "
                             f"got {stype!r}")
        counts[stype]["n"] += 1
        counts[stype]["real" if real else "fake"] += 1
    return counts


def shrink_priors(counts: dict[str, dict[str, int]], base: PriorTable, strength: float = 10.0,
                  *, floor: float = 0.01, name: str | None = None) -> PriorTable:
    """``λ_t = (n_real_t + m·λ0_t) / (n_t + m)`` per type (seed 004's priors, learned).

    ``counts``: :func:`type_counts` output; ``base``: the preset λ0; ``strength``: m ≥ 0.
    Declared zero-division policy: with ``n_t + m = 0`` (no data, m = 0) the prior is λ0_t.
    The result is clipped to ``[floor, 1]`` (a prior table holds values in (0, 1]; with
    m = 0 a type with no reliable item would otherwise get 0).
    """
    m = check_nonnegative("strength", strength)
    floor = check_probability("floor", floor, open_low=True)
    empty = {"n": 0, "real": 0}
    n = np.array([counts.get(t, empty)["n"] for t in SOURCE_TYPES], dtype=np.float64)
    real = np.array([counts.get(t, empty)["real"] for t in SOURCE_TYPES], dtype=np.float64)
    lam0 = np.array([base[t] for t in SOURCE_TYPES], dtype=np.float64)
    fitted = np.clip(shrink(real, n, lam0, m), floor, 1.0)
    values = {t: float(v) for t, v in zip(SOURCE_TYPES, fitted, strict=True)}
    return PriorTable(name or f"fitted({base.name}, m={m:g})", values)


def fit_type_priors(urls: Sequence[str | None], labels: Sequence[object], typer: SourceTyper,
                    base: PriorTable | str = "current", strength: float = 10.0, *,
                    floor: float = 0.01) -> tuple[PriorTable, dict[str, dict[str, int]]]:
    """Fit per-type priors from labelled URLs: type each URL, count, shrink toward ``base``.

    ``labels[i]`` is True (or 1) when item i is reliable (CoAID: real news). Returns the fitted
    table (:func:`shrink_priors`) and the per-type counts.
    """
    base_table = load_priors(base) if isinstance(base, str) else base
    url_list = list(urls)
    types = [p.source_type for p in typer.classify_many(url_list)]
    counts = type_counts(types, _check_labels(labels, len(url_list)))
    return shrink_priors(counts, base_table, strength, floor=floor), counts


# ------------------------------------------------------------------------- held-out measures


def log_loss(probs: Sequence[float], labels: Sequence[object]) -> float | None:
    """Mean ``−[y·ln p + (1 − y)·ln(1 − p)]``, p clipped to ``[1e-6, 1 − 1e-6]``; None if empty."""
    y = np.asarray(_check_labels(labels, len(probs)), dtype=np.float64)
    if y.size == 0:
        return None
    p = np.clip(np.asarray(probs, dtype=np.float64), LOG_LOSS_EPS, 1 - LOG_LOSS_EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def brier(probs: Sequence[float], labels: Sequence[object]) -> float | None:
    """Mean ``(p − y)²``; None if empty."""
    y = np.asarray(_check_labels(labels, len(probs)), dtype=np.float64)
    if y.size == 0:
        return None
    return float(np.mean((np.asarray(probs, dtype=np.float64) - y) ** 2))


# ------------------------------------------------------------------------- CoAID


def coaid_releases(path: str | Path) -> tuple[dict[str, list[tuple[str, bool]]], list[str]]:
    """``(release -> [(news_url, real)] in date order, the reader's notes)``, from the one
    CoAID reader
    (:func:`credrank_bench.datasets.read_coaid`: rows without a URL or text are skipped and a
    ``(news_url, label)`` pair already seen in an earlier release is a duplicate, all counted
    in its notes)."""
    items, notes = _release_items(path)
    return ({r: [(url, real) for _, url, real in rows] for r, rows in items.items()}, notes)


def _release_items(path: str | Path
                   ) -> tuple[dict[str, list[tuple[str, str, bool]]], list[str]]:
    """:func:`coaid_releases` with each item's document id first: ``(id, news_url, real)``."""
    evalset = read_coaid(path)
    releases: dict[str, list[tuple[str, str, bool]]] = {}
    for doc in evalset.documents:
        labels = evalset.doc_labels[doc.id]
        assert doc.url is not None  # read_coaid keeps only rows with a news_url
        releases.setdefault(labels["release"], []).append(
            (doc.id, doc.url, labels["label"] == "real"))
    return releases, list(evalset.notes)


#: the pseudo-row of ``per_unit["predictors"]`` that holds each test item's label
LABEL_ROW = "label (CoAID real = 1)"


def per_item_values(ids: Sequence[str], probs: Sequence[float], labels: Sequence[bool]
                    ) -> dict[str, dict[str, float]]:
    """Per item: ``P(real)``, the log-loss term (p clipped as in :func:`log_loss`) and the
    Brier term of a predictor; the mean of each term over the items is the table's cell."""
    out: dict[str, dict[str, float]] = {"P(real)": {}, "log-loss": {}, "Brier": {}}
    for i, p, y in zip(ids, probs, labels, strict=True):
        q = min(max(float(p), LOG_LOSS_EPS), 1 - LOG_LOSS_EPS)
        out["P(real)"][i] = float(p)
        out["log-loss"][i] = -math.log(q) if y else -math.log(1 - q)
        out["Brier"][i] = (float(p) - float(y)) ** 2
    return out


def _scores(probs: list[float], labels: list[bool]) -> dict[str, float | None]:
    """AUC (:func:`credrank.core.maths.roc_auc`, ``None`` when a class is empty), log-loss
    and Brier score of ``probs`` as P(real)."""
    return {"auc": roc_auc(_check_labels(labels, len(probs)), probs),
            "log_loss": log_loss(probs, labels), "brier": brier(probs, labels)}


def evaluate_fitted_priors(
    path: str | Path,
    *,
    train_folders: Sequence[str] | None = None,
    typer: SourceTyper | None = None,
    base: PriorTable | str = "current",
    strength: float = 10.0,
    drop_train_urls: bool = True,
) -> dict[str, Any]:
    """Fit priors on some CoAID release folders and score them on the others.

    ``path``: the CoAID root. ``train_folders``: folder names to fit on (default: the earlier
    half by date, rounded up, so the test is later in time); every other folder is the test.
    ``drop_train_urls``: drop test items whose URL also occurs in the training folders (CoAID
    repeats URLs across releases). On the test items each predictor gives P(real) = its prior
    of the item's source type: ``fitted``, ``base`` (the preset) and ``constant`` (the training
    share of real items, the no-provenance baseline). Reported: per-type counts, the tables,
    AUC (real vs fake), log-loss and Brier score. JSON data; :func:`coaid_tables` turns
    it into the report's tables.
    """
    typer = typer or SourceTyper()
    base_table = load_priors(base) if isinstance(base, str) else base
    releases, reader_notes = _release_items(path)
    folders = list(releases)
    if train_folders is None:
        if len(folders) < 2:
            raise DatasetError(f"{path}: expected the CoAID root with at least 2 release "
                               "folders (fit on the earlier, test on the later); got "
                               f"{len(folders)}: {folders}")
        train = folders[: math.ceil(len(folders) / 2)]
    else:
        train = list(train_folders)
        unknown = [f for f in train if f not in folders]
        if unknown:
            raise ValueError(f"train_folders: {unknown} not found; folders are {folders}")
    test = [f for f in folders if f not in train]
    if not train or not test:
        raise ValueError(f"train_folders: need at least one training and one test folder; "
                         f"got train={train}, test={test} of {folders}")

    train_items = [item for name in train for item in releases[name]]
    test_items = [item for name in test for item in releases[name]]
    train_urls = {u for _, u, _ in train_items}
    n_overlap = sum(1 for _, u, _ in test_items if u in train_urls)
    if drop_train_urls:
        test_items = [item for item in test_items if item[1] not in train_urls]
    if not train_items or not test_items:
        raise ValueError(f"path: no labelled URLs in the training ({len(train_items)}) or "
                         f"test ({len(test_items)}) folders")

    fitted, train_counts = fit_type_priors([u for _, u, _ in train_items],
                                           [r for _, _, r in train_items], typer, base_table,
                                           strength)
    test_types = [p.source_type for p in typer.classify_many(u for _, u, _ in test_items)]
    test_labels = [r for _, _, r in test_items]
    test_counts = type_counts(test_types, test_labels)
    share = sum(r for _, _, r in train_items) / len(train_items)
    predictors = {
        "fitted": [fitted[t] for t in test_types],
        "base": [base_table[t] for t in test_types],
        "constant": [share] * len(test_types),
    }
    metrics = {name: _scores(p, test_labels) for name, p in predictors.items()}
    ids = [i for i, _, _ in test_items]
    per_unit = {name: per_item_values(ids, p, test_labels) for name, p in predictors.items()}
    per_unit[LABEL_ROW] = {"real": {i: float(r) for i, r in zip(ids, test_labels, strict=True)}}

    return {
        "train_folders": train,
        "test_folders": test,
        "strength": float(strength),
        "base": base_table.as_dict(),
        "fitted": fitted.as_dict(),
        "counts": {"train": train_counts, "test": test_counts},
        "n_train": len(train_items),
        "n_test": len(test_items),
        "train_real_share": share,
        "metrics": metrics,
        "skipped": {"test_urls_also_in_train": n_overlap if drop_train_urls else 0},
        # per test item (document id): each predictor's P(real), log-loss and Brier terms
        # (their means are the table's cells) and the label: --out's per_query.csv
        "per_unit": {"predictors": per_unit},
        "notes": [
            "items: the documents of credrank_bench.datasets.read_coaid (rows without news_url or "
            "text skipped; a (news_url, label) pair repeated in a later release counted once)",
            "label: CoAID real news = reliable (True), fake = unreliable; the source type "
            "comes from the URL only",
            "AUC depends only on the order of the priors: fitted and base tie when they rank "
            "the types alike on the test items",
            "constant = the training share of real items (no provenance); its AUC is 0.5",
            f"log-loss clips probabilities to [{LOG_LOSS_EPS}, 1 - {LOG_LOSS_EPS}]",
            *(f"reader: {note}" for note in reader_notes),
        ],
    }


#: the held-out predictors of P(real); none reads the labels of the evaluated (test) items
PREDICTORS: dict[str, System] = {
    "fitted": System(None, reads_labels=False, notes=(
        "per-type priors fitted on the labels of the training releases only; test items "
        "whose URL occurs in training are dropped",)),
    "base": System(None, reads_labels=False, notes=("the hand-set preset",)),
    "constant": System(None, reads_labels=False, notes=(
        "the training share of real items for every item (no provenance)",)),
}


def coaid_tables(res: dict[str, Any]) -> list[ResultTable]:
    """The tables of :func:`evaluate_fitted_priors`' result: per-type counts and priors
    (descriptive), and the held-out scores of each predictor of P(real)."""
    train, test = res["counts"]["train"], res["counts"]["test"]
    types = descriptive_table("type_priors", "Per-type priors (CoAID)", [
        (t, {"train_n": train[t]["n"], "train_real": train[t]["real"],
             "train_fake": train[t]["fake"], "base_prior": res["base"]["values"][t],
             "fitted_prior": res["fitted"]["values"][t], "test_n": test[t]["n"],
             "test_real_share": test[t]["real"] / test[t]["n"] if test[t]["n"] else None})
        for t in SOURCE_TYPES], row_header="source type", notes=[
        f"Fitted on {', '.join(res['train_folders'])} with strength m = {res['strength']:g} "
        "toward the preset (λ = (n_real + m·λ0) / (n + m)); source type from the URL only."])
    columns = [Column("AUC", "AUC"), Column("log-loss", "log-loss"), Column("Brier", "Brier")]
    keys = {"AUC": "auc", "log-loss": "log_loss", "Brier": "brier"}
    rows = [Row(name, system.reads_labels,
                {c.name: Cell(res["metrics"][name][keys[c.name]], n=res["n_test"])
                 for c in columns}, notes=list(system.notes))
            for name, system in PREDICTORS.items()]
    scores = ResultTable("predictors", "Held-out predictors of P(real) (CoAID)", columns, rows,
                         notes=[f"Held out: {res['n_test']} items from "
                                f"{', '.join(res['test_folders'])}; each predictor gives "
                                "P(real) = its prior of the item's source type. An undefined "
                                "AUC (one class only) is shown as —."])
    return [types, scores]
