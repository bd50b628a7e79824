"""Grouped cross-validation of a learned stage: one implementation for every learned model.

The credibility model (groups: topics or hosts), the stance model (groups: topics) and any
later learned stage estimate their accuracy here, so that no group is ever scored by a model,
or by a choice of configuration, that saw it.

**Why groups.** Pages judged for one topic (or served by one host) resemble each other far
more than pages of different topics: a model tested on pages of a topic it trained on is
tested on near-copies of its training data, and its score says little about a new topic. So
every split keeps a group whole — all its items train, or all are scored.

**Data** (:class:`GroupedData`). *Items* (pages, query–page pairs) with a feature row, a 0/1
training label (or none: an item whose labels tie trains nothing) and the groups it was
judged in; *pairs* ``(group, item, label)``, one per judgement, are what a fold scores. A
model for the groups ``G`` of a fold trains on the items judged in *none* of ``G`` (an item
judged in two groups is out of both groups' training sets) and scores the pairs of ``G``.
Feature rows are computed once per item (:attr:`GroupedData.x`); each configuration's columns
are sliced once per distinct column set and every fit only selects rows.

**Folds** (:func:`~credrank.core.folds.group_folds`). Leave-one-group-out while there are at
most ``max_logo`` (20) groups, in first-seen order; above that ``k`` (10) folds of groups: the
groups sorted, permuted by ``numpy.random.default_rng(seed)`` and dealt round-robin (fold sizes
differ by at most one group; the same input and seed give the same folds).

**Out-of-fold scores** (:class:`OutOfFold`): every pair of a fold's groups is scored by that
fold's model, fold by fold, a fold's pairs in the data's pair order.

**Configuration choice** (:func:`choose_config`). Each configuration (feature columns and
estimator, :class:`Learner`) is cross-validated over the given folds; a :class:`Criterion`
reads the pooled out-of-fold scores (:data:`HIGHEST_AUC`: the AUC, undefined AUCs never win,
none defined gives the first configuration; :data:`LOWEST_LOG_LOSS`: the log loss
``−(1/n) Σ [y log p + (1 − y) log(1 − p)]``, ``p`` clipped to ``[1e-6, 1 − 1e-6]``); ties go
to the first configuration.

**Nested CV** (:func:`nested_cross_validation`). For each outer fold ``F`` the configuration is
chosen by a grouped CV over the other groups only — its inner folds are the *other outer
folds* (leave-one-group-out: the other groups, one each; ``k`` folds: the other ``k − 1``
folds), never training on a group of ``F``; the model fitted on every group but ``F`` with that
configuration scores ``F``. So the pooled out-of-fold estimate is read on groups that neither
the model nor the choice of its configuration saw, and the inner fit that leaves out
``F ∪ G`` serves both outer ``F`` (scoring ``G``) and outer ``G`` (scoring ``F``). The final
configuration is chosen once more by (non-nested) grouped CV over all groups — its scores are
optimistic, the choice reads them — and refitted on every training item.

**Interval** (:func:`group_bootstrap`). A percentile bootstrap over groups: ``n_boot`` (2000)
resamples of the groups with replacement (``default_rng(seed)``), each the pooled statistic
(AUC, accuracy) over the resampled groups' pairs; the ``level`` (95%) interval is the
``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the resamples where the statistic is
defined, ``None`` when fewer than half are. A resample is evaluated as draw-count weights on
the pairs, from one sort of the scores.

**Cost.** With ``n`` items, ``G`` groups, ``F`` outer folds (``F = G`` up to 20 groups, else
``k``), ``C`` configurations and ``d`` feature columns: features are computed ``n`` times
(once per item) and sliced once per distinct column set (``O(n d)`` each). The nested CV runs
``C · F(F − 1)/2`` inner fits (each pair of outer folds shares one), ``F · C`` fits for the
final choice — which are also the outer models — and one refit: ``C (F² + F)/2 + 1`` fits,
``O(F² C)``, each L-BFGS ``O(T n d)`` for ``T ≤ 500`` iterations (10 folds, 9 configurations:
496 fits, was 991 with fresh inner folds per outer fold). Fits on the same training rows and
columns form a *chain* by decreasing L2, each warm-started from the previous optimum
(:meth:`~credrank.learn.estimator.LogisticEstimator.fit_warm`; never from a model that saw
other rows). The bootstrap is ``O(P log P + n_boot (P + G))`` for ``P`` pairs. Memory:
``O(n d)`` per column set. With ``n_jobs > 1`` the chains run in that many processes
(:mod:`concurrent.futures`, spawned: each worker receives the column views once; below
``5·10⁷`` feature cells in all, in the calling process), largest column set first; every
chain runs the same fits wherever it runs and the results are assembled by task, so any
``n_jobs`` gives the same numbers. ``on_progress(done, total)`` is called after every fit
(in parallel runs, as its chain completes). Fits hold one BLAS thread each
(:func:`one_blas_thread`): on a busy machine a threaded BLAS spinning on small products is an
order of magnitude slower.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.folds import MAX_LOGO_GROUPS, N_FOLDS, group_folds, group_resamples
from credrank.core.maths import roc_auc
from credrank.core.validation import check_int
from credrank.learn.estimator import Estimator, logistic_estimator

#: bootstrap resamples of the groups for an interval
N_BOOT = 2000
#: log-loss clipping of the probabilities
_CLIP = 1e-6
#: a better criterion value must beat the best by more than this (ties: the first config)
_TIE = 1e-12
#: below this many feature cells (columns × items, summed over the fits) the fits run in the
#: calling process whatever ``n_jobs`` says: starting worker processes (seconds) would cost
#: more than the fits (the numbers are the same either way)
_PARALLEL_CELLS = 5e7

Progress = Callable[[int, int], None]

__all__ = [
    "HIGHEST_AUC", "LOWEST_LOG_LOSS", "MAX_LOGO_GROUPS", "N_BOOT", "N_FOLDS", "ConfigChoice",
    "Criterion", "Fitted", "GroupedData", "Interval", "Learner", "NestedCV", "OutOfFold",
    "choose_config", "choose_per_fold", "cross_validate", "fit", "group_bootstrap",
    "group_folds", "group_resamples", "log_loss", "majority", "nested_cross_validation",
    "one_blas_thread", "out_of_fold",
]


# ---------------------------------------------------------------- measures


def log_loss(y: np.ndarray, p: np.ndarray) -> float:
    """``−(1/n) Σ [y log p + (1 − y) log(1 − p)]`` with ``p`` clipped to
    ``[1e-6, 1 − 1e-6]`` (finite); ``n = 0`` is an error."""
    y = np.asarray(y, dtype=np.float64)
    if len(y) == 0:
        raise ValueError("log_loss: expected at least one prediction; got 0")
    pc = np.clip(np.asarray(p, dtype=np.float64), _CLIP, 1 - _CLIP)
    return float(-np.mean(y * np.log(pc) + (1 - y) * np.log1p(-pc)))


def accuracy(y: np.ndarray, p: np.ndarray) -> float | None:
    """Share of rows with ``(p ≥ 0.5) = y``; ``None`` without rows."""
    y, p = np.asarray(y), np.asarray(p)
    return float(np.mean((p >= 0.5) == (y == 1))) if len(y) else None


def auc(y: np.ndarray, p: np.ndarray) -> float | None:
    """Pooled AUC (:func:`~credrank.core.maths.roc_auc`); ``None`` without rows or where one
    class is missing."""
    return roc_auc(y, p) if len(y) else None


#: the statistics :func:`group_bootstrap` and a :class:`Criterion` can read
STATISTICS: dict[str, Callable[[np.ndarray, np.ndarray], float | None]] = {
    "auc": auc, "accuracy": accuracy, "log_loss": log_loss,
}


# ---------------------------------------------------------------- data


class GroupedData:
    """Items with features, training labels and groups, and the pairs a fold scores (module
    docstring).

    Args:
        item_groups: the groups each item was judged in (at least one each).
        y: each item's training label, 0 or 1; ``None`` or NaN: never trained on.
        pairs: ``(group, item index, label)`` per judgement, in scoring order.
        ids: an id per item (doc ids), reported with the out-of-fold scores.
        x: the feature matrix, one row per item; or
        features: ``features(items) -> rows`` for an array of item indices, called once per
            item, lazily, in the order the cross-validation first reads the items (so a
            featuriser whose output depends on its batches sees the batches a one-fit-at-a-
            time run gave it).

    Use :meth:`from_rows` (one group per item) or :meth:`from_judgements` (items judged in
    several groups).
    """

    def __init__(self, item_groups: Sequence[Sequence[str]], y: Sequence[float | None],
                 pairs: Sequence[tuple[str, int, int]], *, ids: Sequence[str] | None = None,
                 x: np.ndarray | None = None,
                 features: Callable[[np.ndarray], np.ndarray] | None = None):
        n = len(item_groups)
        if len(y) != n:
            raise ValueError(f"y: expected {n} labels (one per item), got {len(y)}")
        if (x is None) == (features is None):
            raise ValueError("GroupedData: expected one of x (a feature matrix) or features "
                             "(a row function)")
        self.ids = [str(i) for i in (range(n) if ids is None else ids)]
        if len(self.ids) != n:
            raise ValueError(f"ids: expected {n} ids (one per item), got {len(self.ids)}")
        self.y = np.array([np.nan if v is None else float(v) for v in y], dtype=np.float64)
        defined = self.y[~np.isnan(self.y)]
        if not np.all((defined == 0) | (defined == 1)):
            raise ValueError("y: expected labels 0 or 1 (or None: not trained on)")
        #: every group, in first-seen order over the items
        self.groups: list[str] = list(dict.fromkeys(str(g) for gs in item_groups for g in gs))
        self._col = {g: j for j, g in enumerate(self.groups)}
        self.member = np.zeros((n, len(self.groups)), dtype=bool)
        for i, gs in enumerate(item_groups):
            if not gs:
                raise ValueError(f"item_groups[{i}]: expected at least one group")
            self.member[i, [self._col[str(g)] for g in gs]] = True
        self.pair_group = np.array([str(g) for g, _, _ in pairs], dtype=object)
        self._pair_col = np.array([self._col.get(str(g), -1) for g, _, _ in pairs],
                                  dtype=np.intp)
        self.pair_item = np.array([int(i) for _, i, _ in pairs], dtype=np.intp)
        self.pair_y = np.array([float(v) for _, _, v in pairs], dtype=np.float64)
        if (self._pair_col < 0).any() or (len(pairs) and (
                self.pair_item.min() < 0 or self.pair_item.max() >= n)):
            raise ValueError("pairs: expected (group of the item, item index, label) triples")
        bad = ~self.member[self.pair_item, np.maximum(self._pair_col, 0)]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"pairs[{i}]: item {int(self.pair_item[i])} is not judged in "
                             f"group {self.pair_group[i]!r}")
        self._features = features
        self._x: np.ndarray | None = None if x is None else np.asarray(x, dtype=np.float64)
        if self._x is not None and (self._x.ndim != 2 or len(self._x) != n):
            raise ValueError(f"x: expected a matrix of {n} rows (one per item), got shape "
                             f"{self._x.shape}")
        self._rows: list[np.ndarray | None] = [None] * n
        self._done = 0
        self._views: dict[tuple[int, ...], np.ndarray] = {}

    # ------------------------------------------------------------ constructors

    @classmethod
    def from_rows(cls, groups: Sequence[str], y: Sequence[float], *,
                  ids: Sequence[str] | None = None, x: np.ndarray | None = None,
                  features: Callable[[np.ndarray], np.ndarray] | None = None) -> GroupedData:
        """One group per item, scored once with its own label (the stance pairs)."""
        if len(groups) != len(y):
            raise ValueError(f"y: expected {len(groups)} labels (one per item), got {len(y)}")
        pairs = [(str(g), i, int(v)) for i, (g, v) in enumerate(zip(groups, y, strict=True))]
        return cls([(str(g),) for g in groups], list(y), pairs, ids=ids, x=x,
                   features=features)

    @classmethod
    def from_judgements(cls, judgements: Sequence[Mapping[str, int]], *,
                        y: Sequence[int | None] | None = None, ids: Sequence[str] | None = None,
                        x: np.ndarray | None = None,
                        features: Callable[[np.ndarray], np.ndarray] | None = None
                        ) -> GroupedData:
        """Items judged in one or more groups (``{group: label}`` each; the credibility
        pages). An item trains with ``y`` (default: the majority of its labels, a tie never
        trains) and is scored once per judgement. Pairs are ordered by group name, then item:
        a fold of sorted groups (as :func:`group_folds` makes them) is scored group by group,
        each group's items in order."""
        labels = [y_i if y is not None else majority(j.values())
                  for y_i, j in zip(y if y is not None else [None] * len(judgements),
                                    judgements, strict=True)]
        names = sorted({str(g) for j in judgements for g in j})
        pairs = [(g, i, int(j[g])) for g in names for i, j in enumerate(judgements) if g in j]
        return cls([list(j) for j in judgements], labels, pairs, ids=ids, x=x,
                   features=features)

    # ------------------------------------------------------------ rows, folds, features

    def __len__(self) -> int:
        return len(self.y)

    def _cols(self, groups: Iterable[str]) -> list[int]:
        return [self._col[g] for g in groups if g in self._col]

    def groups_of(self, item: int) -> list[str]:
        """The groups ``item`` was judged in."""
        return [self.groups[j] for j in np.flatnonzero(self.member[item])]

    def train_rows(self, exclude: Iterable[str] = ()) -> np.ndarray:
        """The items that train a model leaving out ``exclude``: a training label, judged in
        none of those groups (in item order)."""
        ok = ~np.isnan(self.y)
        cols = self._cols(exclude)
        if cols:
            ok &= ~self.member[:, cols].any(axis=1)
        return np.flatnonzero(ok)

    def items_in(self, groups: Iterable[str]) -> np.ndarray:
        """The items judged in any of ``groups`` (in item order)."""
        cols = self._cols(groups)
        if not cols:
            return np.zeros(0, dtype=np.intp)
        return np.flatnonzero(self.member[:, cols].any(axis=1))

    def pairs_in(self, groups: Iterable[str]) -> np.ndarray:
        """Indices of the pairs of ``groups`` (in pair order)."""
        return np.flatnonzero(np.isin(self._pair_col, self._cols(groups)))

    def require(self, items: np.ndarray) -> None:
        """Compute the feature rows of ``items`` not computed yet (in their order)."""
        if self._x is not None or self._features is None or self._done == len(self._rows):
            return
        todo = [int(i) for i in items if self._rows[int(i)] is None]
        if not todo:
            return
        rows = np.asarray(self._features(np.asarray(todo, dtype=np.intp)), dtype=np.float64)
        if rows.ndim != 2 or len(rows) != len(todo):
            raise ValueError(f"features: expected {len(todo)} rows, got shape {rows.shape}")
        for i, row in zip(todo, rows, strict=True):
            self._rows[i] = row
        self._done += len(todo)

    @property
    def x(self) -> np.ndarray:
        """The feature matrix (rows not computed yet are computed now, in item order)."""
        if self._x is None:
            self.require(np.arange(len(self._rows)))
            if len(self._rows):
                self._x = np.vstack(self._rows)  # type: ignore[arg-type]
            else:
                self._x = np.zeros((0, 0))
            if not np.all(np.isfinite(self._x)):
                raise ValueError("features: non-finite values")
            self._rows = [None] * len(self._rows)
        return self._x

    def view(self, columns: Sequence[int] | np.ndarray) -> np.ndarray:
        """``x[:, columns]``, computed once per column set."""
        key = tuple(int(c) for c in np.asarray(columns).reshape(-1))
        if key not in self._views:
            self._views[key] = np.ascontiguousarray(self.x[:, list(key)])
        return self._views[key]


def majority(values: Iterable[int]) -> int | None:
    """Majority of 0/1 labels; ``None`` on a tie or without labels. The one declared policy
    for conflicting duplicate labels of every learned stage: the rows of one item in one
    group (a page in a topic or host, a stance pair) give their majority label, a tie gives
    none (the item does not train there)."""
    vals = list(values)
    if not vals:
        return None
    mean = float(np.mean(vals))
    return None if mean == 0.5 else int(mean > 0.5)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class OutOfFold:
    """Out-of-fold predictions, one row per scored pair: its group, item id, fold and label,
    and ``P(y = 1)`` from the model of its fold."""

    groups: list[str]
    doc_ids: list[str]
    folds: list[int]
    y: np.ndarray
    p: np.ndarray

    @property
    def topics(self) -> list[str]:
        """:attr:`groups` (the stance model's groups are topics)."""
        return self.groups

    def auc(self) -> float | None:
        """Pooled AUC over every pair; ``None`` where one class is missing."""
        return auc(self.y, self.p)

    def accuracy(self) -> float | None:
        """Share of pairs with ``(p ≥ 0.5) = y``; ``None`` without pairs."""
        return accuracy(self.y, self.p)

    def log_loss(self) -> float:
        """Pooled log loss (:func:`log_loss`); ``ValueError`` without pairs."""
        return log_loss(self.y, self.p)


@dataclass(frozen=True)
class Criterion:
    """How a configuration choice reads pooled out-of-fold scores: ``measure`` (a key of
    :data:`STATISTICS`), maximised or minimised; ``report`` lists what each configuration's
    score entry holds (``n``: the number of pairs)."""

    measure: str
    maximise: bool
    report: tuple[str, ...]
    description: str

    def value(self, oof: OutOfFold) -> float | None:
        return STATISTICS[self.measure](oof.y, oof.p)

    def better(self, value: float, best: float) -> bool:
        return value > best + _TIE if self.maximise else value < best - _TIE

    def entry(self, oof: OutOfFold, value: float | None) -> dict[str, Any]:
        return {m: (value if m == self.measure else len(oof.y) if m == "n"
                    else STATISTICS[m](oof.y, oof.p)) for m in self.report}


#: the credibility model's criterion: the highest pooled out-of-fold AUC
HIGHEST_AUC = Criterion("auc", True, ("auc", "n"), "highest pooled out-of-fold AUC")
#: the stance model's criterion: the lowest pooled out-of-fold log loss
LOWEST_LOG_LOSS = Criterion("log_loss", False, ("log_loss", "accuracy", "auc", "n"),
                            "lowest pooled out-of-fold log loss")


@dataclass(frozen=True)
class ConfigChoice:
    """The chosen configuration, its criterion value (``None``: undefined, or no choice was
    made) and every configuration's score entry."""

    config: Any
    value: float | None
    scores: list[dict[str, Any]]
    criterion: str = "auc"

    def _as(self, name: str) -> float | None:
        if self.criterion != name:
            raise AttributeError(f"this configuration was chosen by {self.criterion}, "
                                 f"not {name}")
        return self.value

    @property
    def auc(self) -> float | None:
        """:attr:`value` of a choice by AUC."""
        return self._as("auc")

    @property
    def log_loss(self) -> float | None:
        """:attr:`value` of a choice by log loss."""
        return self._as("log_loss")


@dataclass
class Fitted:
    """A fitted estimator, its configuration, its training items (indices) and the groups
    left out."""

    config: Any
    estimator: Estimator
    rows: np.ndarray
    excluded: tuple[str, ...]


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval (``None`` when undefined) and the resamples it was read from."""

    bounds: tuple[float, float] | None
    n_defined: int


@dataclass(frozen=True)
class Learner:
    """How a configuration becomes a model: ``columns(config)`` (the feature columns it reads)
    and ``estimator(config)`` (an unfitted :class:`~credrank.learn.estimator.Estimator`;
    default: ``LogisticEstimator(config.l2)``). Configurations need ``to_dict()``."""

    columns: Callable[[Any], Sequence[int] | np.ndarray]
    estimator: Callable[[Any], Estimator] = logistic_estimator


# ---------------------------------------------------------------- the work: fits


@dataclass(frozen=True)
class _Task:
    config: int
    view: int
    exclude: tuple[str, ...]
    score: tuple[tuple[str, ...], ...]
    estimator: Estimator


class _Work:
    """What a fit needs (picklable, sent once to each worker): the column views, labels and
    group membership."""

    def __init__(self, data: GroupedData, views: list[np.ndarray]):
        self.views = views
        self.y = data.y
        self.member = data.member
        self.col = data._col

    def _mask(self, groups: Iterable[str]) -> np.ndarray:
        cols = [self.col[g] for g in groups if g in self.col]
        if not cols:
            return np.zeros(len(self.y), dtype=bool)
        return np.asarray(self.member[:, cols].any(axis=1))

    def run(self, task: _Task, start: Estimator | None = None
            ) -> tuple[Estimator, list[np.ndarray]]:
        """Fit ``task`` (warm from ``start`` when given and the estimator has ``fit_warm``)
        and score its folds."""
        rows = np.flatnonzero(~np.isnan(self.y) & ~self._mask(task.exclude))
        if not len(rows):
            raise ValueError(f"no training rows left once groups {list(task.exclude)} are "
                             "left out")
        x = self.views[task.view]
        warm = getattr(task.estimator, "fit_warm", None)
        if start is not None and callable(warm):
            est = warm(_rows_of(x, rows), self.y[rows], start)
        else:
            est = task.estimator.fit(_rows_of(x, rows), self.y[rows])
        preds = []
        for fold in task.score:
            items = np.flatnonzero(self._mask(fold))
            preds.append(est.predict_proba(_rows_of(x, items)) if len(items) else np.zeros(0))
        return est, preds

    def run_chain(self, chain: Sequence[_Task]) -> list[tuple[Estimator, list[np.ndarray]]]:
        """The tasks of one chain in order, each warm-started from the one before (they share
        their training rows and columns: :func:`_chains`)."""
        out: list[tuple[Estimator, list[np.ndarray]]] = []
        start: Estimator | None = None
        for task in chain:
            est, preds = self.run(task, start)
            out.append((est, preds))
            start = est
        return out


def _rows_of(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``x[rows]`` in column-major order: the memory order of a column selection
    (``features[:, columns]``), so that every sum (the standardising means, the products with
    the weights) adds in the same order as a model fitted on its own features, and gives the
    same bits."""
    return np.asfortranarray(x[rows])


_WORKER: dict[str, Any] = {}


def _start_worker(work: _Work) -> None:
    _WORKER["work"] = work
    _WORKER["blas"] = one_blas_thread().__enter__()


def _run_in_worker(chain: list[_Task]) -> list[tuple[Estimator, list[np.ndarray]]]:
    return _WORKER["work"].run_chain(chain)


def one_blas_thread() -> AbstractContextManager[Any]:
    """One BLAS thread while fitting (threadpoolctl, when installed): the thousands of small
    L-BFGS fits of a nested CV run several times faster than with a contended thread pool, and
    every process fits alike; the results are the same."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it the fits only run slower
        return nullcontext()
    import scipy.optimize  # noqa: F401  (loads SciPy's own BLAS, so that it is limited too)

    return threadpool_limits(limits=1, user_api="blas")


def _chains(tasks: Sequence[_Task], configs: Sequence[Any]) -> list[list[int]]:
    """Task indices in warm-start chains: the tasks of one training set (the groups left out)
    and one column view, by decreasing L2 (the most regularised fit converges fastest, then
    each weaker one starts from the stronger one's optimum). A task whose estimator has no
    ``fit_warm``, or a view whose configurations lack a numeric ``l2``, is a chain of one.
    Chains are ordered largest view first (the longest fits start first)."""
    by_key: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for i, task in enumerate(tasks):
        by_key.setdefault((task.view, task.exclude), []).append(i)
    chains: list[list[int]] = []
    for members in by_key.values():
        l2s = [getattr(configs[tasks[i].config], "l2", None) for i in members]
        numeric = [float(v) for v in l2s if isinstance(v, (int, float))]
        warm = all(callable(getattr(tasks[i].estimator, "fit_warm", None)) for i in members)
        if len(members) > 1 and warm and len(numeric) == len(l2s):
            chains.append([i for _, _, i in sorted(
                (-v, k, i) for k, (v, i) in enumerate(zip(numeric, members, strict=True)))])
        else:
            chains.extend([i] for i in members)
    return chains


def _execute(work: _Work, tasks: list[_Task], configs: Sequence[Any], n_jobs: int,
             tick: Callable[[], None]) -> list[tuple[Estimator, list[np.ndarray]]]:
    """Every task's fit and predictions, in task order: the warm-start chains of
    :func:`_chains`, in ``n_jobs`` processes when more than one (any order of completion: the
    results are placed by task, and a chain runs the same fits wherever it runs, so any
    ``n_jobs`` gives the same numbers). ``tick()`` once per fit, as its chain completes."""
    chains = _chains(tasks, configs)
    order = sorted(range(len(chains)), key=lambda c: (
        -int(work.views[tasks[chains[c][0]].view].shape[1]), c))
    results: list[Any] = [None] * len(tasks)
    cells = sum(float(work.views[t.view].shape[1]) * len(work.y) for t in tasks)
    if n_jobs == 1 or len(chains) < 2 or cells < _PARALLEL_CELLS:
        for c in order:
            start: Estimator | None = None
            for i in chains[c]:
                results[i] = work.run(tasks[i], start)
                start = results[i][0]
                tick()
        return results
    context = multiprocessing.get_context("spawn")  # no fork of a process with live threads
    with ProcessPoolExecutor(max_workers=min(n_jobs, len(chains)), mp_context=context,
                             initializer=_start_worker, initargs=(work,)) as pool:
        futures = {pool.submit(_run_in_worker, [tasks[i] for i in chains[c]]): c
                   for c in order}
        try:
            for fut in as_completed(futures):
                for i, out in zip(chains[futures[fut]], fut.result(), strict=True):
                    results[i] = out
                    tick()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    return results


def _key(groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(groups)))


class _Plan:
    """The fits a cross-validation needs, each once (a fit that leaves out the same groups
    with the same configuration serves every fold it scores), and the order in which a
    one-fit-at-a-time run read the items (for lazily computed features)."""

    def __init__(self, data: GroupedData, learner: Learner, configs: Sequence[Any]):
        if not configs:
            raise ValueError("configs: expected at least one configuration")
        self.data, self.learner, self.configs = data, learner, list(configs)
        self._columns = [np.asarray(learner.columns(c), dtype=np.intp).reshape(-1)
                         for c in self.configs]
        views: dict[tuple[int, ...], int] = {}
        self.view_of = [views.setdefault(tuple(c.tolist()), len(views)) for c in self._columns]
        self.fits: dict[tuple[int, tuple[str, ...]], list[tuple[str, ...]]] = {}
        self.reads: list[tuple[str, tuple[str, ...]]] = []
        self.tick: Callable[[], None] = lambda: None

    def fit(self, config: int, exclude: Iterable[str], score: Sequence[str] | None = None
            ) -> None:
        folds = self.fits.setdefault((config, _key(exclude)), [])
        if score is not None and tuple(score) not in folds:
            folds.append(tuple(score))

    def read_train(self, exclude: Iterable[str]) -> None:
        self.reads.append(("train", _key(exclude)))

    def read_items(self, groups: Sequence[str]) -> None:
        self.reads.append(("items", tuple(groups)))

    def choice(self, folds: Sequence[Sequence[str]], exclude: Sequence[str] = ()) -> None:
        """Every configuration fitted without each fold (and ``exclude``), scoring it."""
        for i in range(len(self.configs)):
            for fold in folds:
                self.fit(i, [*fold, *exclude], fold)
        for fold in folds:
            self.read_train([*fold, *exclude])
        for fold in folds:
            self.read_items(fold)

    def run(self, n_jobs: int, on_progress: Progress | None, extra: int = 0
            ) -> tuple[dict[tuple[int, tuple[str, ...]], Fitted],
                       dict[tuple[int, tuple[str, ...]], dict[tuple[str, ...], np.ndarray]]]:
        """Every planned fit (``extra`` more fits are counted for the progress total)."""
        data = self.data
        for kind, groups in self.reads:  # lazily computed features: in the order read
            if data._x is not None or data._done == len(data):
                break
            data.require(data.train_rows(groups) if kind == "train" else data.items_in(groups))
        views = [data.view(c) for c in _unique_views(self._columns, self.view_of)]
        keys = list(self.fits)
        tasks = [_Task(c, self.view_of[c], excl, tuple(self.fits[(c, excl)]),
                       self.learner.estimator(self.configs[c])) for c, excl in keys]
        total = len(tasks) + extra
        done = [0]

        def tick() -> None:
            done[0] += 1
            if on_progress is not None:
                on_progress(done[0], total)

        self.tick = tick
        results = _execute(_Work(data, views), tasks, self.configs, n_jobs, tick)
        fitted: dict[tuple[int, tuple[str, ...]], Fitted] = {}
        preds: dict[tuple[int, tuple[str, ...]], dict[tuple[str, ...], np.ndarray]] = {}
        for (c, excl), task, (est, p) in zip(keys, tasks, results, strict=True):
            fitted[(c, excl)] = Fitted(self.configs[c], est, data.train_rows(excl), excl)
            preds[(c, excl)] = dict(zip(task.score, p, strict=True))
        return fitted, preds


def _unique_views(columns: list[np.ndarray], view_of: list[int]) -> list[np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for cols, v in zip(columns, view_of, strict=True):
        out.setdefault(v, cols)
    return [out[v] for v in sorted(out)]


def _oof(data: GroupedData, folds: Sequence[Sequence[str]],
         preds: Sequence[np.ndarray | None]) -> OutOfFold:
    """Pool the pairs of each fold with its predictions (over the fold's items)."""
    groups: list[str] = []
    ids: list[str] = []
    fold_of: list[int] = []
    ys: list[np.ndarray] = []
    ps: list[np.ndarray] = []
    for i, (fold, p) in enumerate(zip(folds, preds, strict=True)):
        items = data.items_in(fold)
        if not len(items):
            continue
        if p is None or len(p) != len(items):
            raise ValueError(f"predictions of fold {i}: expected {len(items)} (one per item "
                             f"of groups {list(fold)}), got {None if p is None else len(p)}")
        pairs = data.pairs_in(fold)
        where = np.searchsorted(items, data.pair_item[pairs])
        groups += [str(g) for g in data.pair_group[pairs]]
        ids += [data.ids[j] for j in data.pair_item[pairs]]
        fold_of += [i] * len(pairs)
        ys.append(data.pair_y[pairs])
        ps.append(np.asarray(p, dtype=np.float64)[where])
    return OutOfFold(groups, ids, fold_of, _cat(ys), _cat(ps))


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)


def _choose(plan: _Plan, preds: Mapping[tuple[int, tuple[str, ...]],
                                        Mapping[tuple[str, ...], np.ndarray]],
            folds: Sequence[Sequence[str]], exclude: Sequence[str], criterion: Criterion
            ) -> tuple[ConfigChoice, int]:
    best: tuple[float, int] | None = None
    scores = []
    for i, config in enumerate(plan.configs):
        oof = _oof(plan.data, folds, [preds[(i, _key([*f, *exclude]))][tuple(f)]
                                      for f in folds])
        value = criterion.value(oof)
        scores.append({**config.to_dict(), **criterion.entry(oof, value)})
        if value is not None and (best is None or criterion.better(value, best[0])):
            best = (value, i)
    if best is None:
        return ConfigChoice(plan.configs[0], None, scores, criterion.measure), 0
    return ConfigChoice(plan.configs[best[1]], best[0], scores, criterion.measure), best[1]


def _check_jobs(n_jobs: int) -> int:
    return check_int("n_jobs", n_jobs, 1)


# ---------------------------------------------------------------- public entry points


def fit(data: GroupedData, learner: Learner, config: Any, exclude: Iterable[str] = ()
        ) -> Fitted:
    """One model of ``config`` fitted on the items judged in none of ``exclude``."""
    plan = _Plan(data, learner, [config])
    plan.fit(0, exclude)
    plan.read_train(exclude)
    with one_blas_thread():
        fitted, _ = plan.run(1, None)
    return fitted[(0, _key(exclude))]


def out_of_fold(data: GroupedData, folds: Sequence[Sequence[str]],
                predict: Sequence[Callable[[np.ndarray], np.ndarray]]) -> OutOfFold:
    """Every pair of each fold's groups scored by ``predict[i](items)`` (``P(y = 1)`` for the
    fold's items, an array of item indices). The caller vouches that fold ``i``'s predictor
    never trained on an item of the fold."""
    if len(folds) != len(predict):
        raise ValueError(f"models: expected {len(folds)} (one per fold), got {len(predict)}")
    preds: list[np.ndarray | None] = []
    for fold, fn in zip(folds, predict, strict=True):
        items = data.items_in(fold)
        preds.append(np.asarray(fn(items), dtype=np.float64) if len(items) else None)
    return _oof(data, folds, preds)


def cross_validate(data: GroupedData, learner: Learner, configs: Sequence[Any],
                   folds: Sequence[Sequence[str]], *, exclude: Sequence[str] = (),
                   n_jobs: int = 1, on_progress: Progress | None = None) -> list[OutOfFold]:
    """Grouped CV over ``folds`` for each configuration, never training on a group of
    ``exclude``: the pooled out-of-fold scores, one per configuration."""
    plan = _Plan(data, learner, configs)
    plan.choice(folds, exclude)
    with one_blas_thread():
        _, preds = plan.run(_check_jobs(n_jobs), on_progress)
    return [_oof(data, folds, [preds[(i, _key([*f, *exclude]))][tuple(f)] for f in folds])
            for i in range(len(plan.configs))]


def choose_config(data: GroupedData, learner: Learner, configs: Sequence[Any],
                  folds: Sequence[Sequence[str]], criterion: Criterion = HIGHEST_AUC, *,
                  exclude: Sequence[str] = (), n_jobs: int = 1,
                  on_progress: Progress | None = None) -> ConfigChoice:
    """The configuration of best pooled out-of-fold ``criterion`` over ``folds`` (never
    training on a group of ``exclude``); ties go to the first (module docstring)."""
    plan = _Plan(data, learner, configs)
    plan.choice(folds, exclude)
    with one_blas_thread():
        _, preds = plan.run(_check_jobs(n_jobs), on_progress)
    return _choose(plan, preds, folds, exclude, criterion)[0]


def choose_per_fold(data: GroupedData, learner: Learner, configs: Sequence[Any],
                    outer: Sequence[Sequence[str]], criterion: Criterion = HIGHEST_AUC, *,
                    inner: Callable[[list[str]], Sequence[Sequence[str]]] | None = None,
                    seed: int = 0, max_logo: int = MAX_LOGO_GROUPS, k: int = N_FOLDS,
                    n_jobs: int = 1, on_progress: Progress | None = None
                    ) -> list[ConfigChoice]:
    """The nested choice alone: per outer fold ``F``, :func:`choose_config` over the inner
    folds of the other groups (``inner(rest)``; default :func:`group_folds` with ``seed``,
    ``max_logo``, ``k``), never training on a group of ``F``."""
    rule = inner or (lambda rest: group_folds(rest, seed=seed, max_logo=max_logo, k=k))
    plan = _Plan(data, learner, configs)
    inner_folds = []
    for fold in outer:
        folds = [tuple(f) for f in rule([g for g in data.groups if g not in fold])]
        plan.choice(folds, fold)
        inner_folds.append(folds)
    with one_blas_thread():
        _, preds = plan.run(_check_jobs(n_jobs), on_progress)
    return [_choose(plan, preds, folds, fold, criterion)[0]
            for fold, folds in zip(outer, inner_folds, strict=True)]


@dataclass
class NestedCV:
    """What :func:`nested_cross_validation` found (module docstring)."""

    data: GroupedData
    criterion: Criterion
    configs: list[Any]
    folds: list[tuple[str, ...]]
    choices: list[ConfigChoice]
    outer: list[Fitted]
    oof: OutOfFold
    intervals: dict[str, Interval]
    final: ConfigChoice
    model: Fitted
    seed: int
    n_boot: int
    level: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def logo(self) -> bool:
        """Whether the folds are leave-one-group-out."""
        return all(len(f) == 1 for f in self.folds)

    def describe_cv(self, noun: str = "group") -> str:
        """``leave-one-{noun}-out`` or ``K-fold by {noun}s``."""
        return (f"leave-one-{noun}-out" if self.logo else f"{len(self.folds)}-fold by {noun}s")

    def fold_configs(self, key: str = "groups") -> list[dict[str, Any]]:
        """Per outer fold: its groups (under ``key``), the chosen configuration and its inner
        criterion value (``None``: no choice was made, or it was undefined)."""
        return [{key: list(f), "config": c.config.to_dict(),
                 f"inner_{self.criterion.measure}": c.value}
                for f, c in zip(self.folds, self.choices, strict=True)]

    def provenance(self, group_by: str, estimator: str | None = None) -> dict[str, Any]:
        """How the model was made, for a model file's ``provenance`` table
        (:func:`credrank.learn.modelfile.provenance`)."""
        from credrank.learn.modelfile import provenance

        name = estimator or str(getattr(self.model.estimator, "name",
                                        type(self.model.estimator).__name__))
        return provenance(estimator=name,
                          selection=f"nested grouped CV, {self.criterion.description}",
                          cv=self.describe_cv(), n_folds=len(self.folds), group_by=group_by,
                          seed=self.seed, n_boot=self.n_boot,
                          configs=[c.to_dict() for c in self.configs])


def nested_cross_validation(data: GroupedData, learner: Learner, configs: Sequence[Any],
                            criterion: Criterion = HIGHEST_AUC, *, seed: int = 0,
                            n_boot: int = N_BOOT, max_logo: int = MAX_LOGO_GROUPS,
                            k: int = N_FOLDS, statistics: Sequence[str] = ("auc",),
                            level: float = 0.95, n_jobs: int = 1,
                            on_progress: Progress | None = None) -> NestedCV:
    """Nested grouped CV, the bootstrap intervals of ``statistics`` over groups and the final
    refit (module docstring). Needs at least 3 groups. ``n_jobs``: processes for the fits
    (the same numbers for any value); ``on_progress(done, total)`` after every fit."""
    n_jobs = _check_jobs(n_jobs)
    groups = list(data.groups)
    if len(groups) < 3:
        raise ValueError(f"grouped cross-validation needs at least 3 groups; got {len(groups)}"
                         f" ({', '.join(groups) or 'none'})")
    plan = _Plan(data, learner, configs)
    configs = plan.configs
    folds = group_folds(groups, seed=seed, max_logo=max_logo, k=k)
    inner_folds: list[list[tuple[str, ...]] | None] = []
    for fold in folds:
        rest = [g for g in groups if g not in fold]
        inner = None
        if len(configs) > 1 and len(rest) >= 2:
            inner = [f for f in folds if f != fold]  # the other outer folds (shared fits)
            plan.choice(inner, fold)
        plan.read_train(fold)  # the outer model (its configuration is chosen by the inner CV)
        inner_folds.append(inner)
    for fold in folds:
        plan.read_items(fold)
    plan.choice(folds)  # the final choice; its fits without each fold are the outer models
    plan.read_train(())
    with one_blas_thread():
        fitted, preds = plan.run(n_jobs, on_progress, extra=1)
        choices: list[ConfigChoice] = []
        outer: list[Fitted] = []
        outer_preds: list[np.ndarray] = []
        for fold, inner in zip(folds, inner_folds, strict=True):
            if inner is None:
                choice, ci = ConfigChoice(configs[0], None, [], criterion.measure), 0
            else:
                choice, ci = _choose(plan, preds, inner, fold, criterion)
            choices.append(choice)
            outer.append(fitted[(ci, _key(fold))])
            outer_preds.append(preds[(ci, _key(fold))][tuple(fold)])
        oof = _oof(data, folds, outer_preds)
        intervals = group_bootstrap(oof.groups, oof.y, oof.p, statistics, n_boot=n_boot,
                                    seed=seed, level=level)
        final, best = _choose(plan, preds, folds, (), criterion)
        work = _Work(data, [data.view(plan._columns[best])])
        est, _ = work.run(_Task(best, 0, (), (), learner.estimator(configs[best])))
        plan.tick()
    model = Fitted(configs[best], est, data.train_rows(()), ())
    return NestedCV(data=data, criterion=criterion, configs=configs, folds=folds,
                    choices=choices, outer=outer, oof=oof, intervals=intervals, final=final,
                    model=model, seed=seed, n_boot=n_boot, level=level)


# ---------------------------------------------------------------- bootstrap over groups


def group_bootstrap(groups: Sequence[str], y: np.ndarray, p: np.ndarray,
                    statistics: Sequence[str] = ("auc",), *, n_boot: int = N_BOOT,
                    seed: int = 0, level: float = 0.95) -> dict[str, Interval]:
    """Percentile intervals of pooled ``statistics`` (keys of :data:`STATISTICS`) over
    ``n_boot`` resamples of the groups with replacement (the draws of
    :func:`~credrank.core.folds.group_resamples`; all statistics read the same resamples).
    An interval is ``None`` when fewer than half the resamples define it (a resampled AUC
    needs both classes).

    A resample is read as a weight per row — the number of times its group was drawn, ``c_g``
    — rather than as the concatenated rows: the pooled AUC of the resample is
    ``Σ_{i⁺, j⁻} c_i c_j ([p_i > p_j] + ½ [p_i = p_j]) / (Σ_{i⁺} c_i · Σ_{j⁻} c_j)`` (exactly
    the Mann–Whitney AUC of the duplicated rows), computed from one sort of the scores; the
    accuracy and the log loss are ``c``-weighted means. Cost ``O(P log P + n_boot · (P + G))``
    for ``P`` rows and ``G`` groups (was ``O(n_boot · P log P)``); the numbers are those of
    the concatenated resamples up to float rounding."""
    unknown = [s for s in statistics if s not in STATISTICS]
    if unknown:
        raise ValueError(f"statistics: expected some of {', '.join(STATISTICS)}; got "
                         f"{unknown}")
    if not 0.0 < level < 1.0 or math.isnan(level):
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    check_int("n_boot", n_boot, 1)
    y, p = np.asarray(y, dtype=np.float64), np.asarray(p, dtype=np.float64)
    values: dict[str, list[float]] = {s: [] for s in statistics}
    names = list(dict.fromkeys(groups))
    if names:
        where = {g: j for j, g in enumerate(names)}
        row_group = np.array([where[g] for g in groups], dtype=np.intp)
        weighted = _Weighted(y, p)
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):
            counts = np.bincount(rng.integers(0, len(names), size=len(names)),
                                 minlength=len(names)).astype(np.float64)
            w = counts[row_group]
            for s in statistics:
                v = weighted.value(s, w)
                if v is not None:
                    values[s].append(v)
    alpha = (1.0 - level) / 2.0
    out = {}
    for s, vals in values.items():
        if not vals or len(vals) < max(1, n_boot // 2):
            out[s] = Interval(None, len(vals))
            continue
        lo, hi = np.quantile(np.asarray(vals), [alpha, 1.0 - alpha])
        out[s] = Interval((float(lo), float(hi)), len(vals))
    return out


class _Weighted:
    """The statistics of :data:`STATISTICS` on rows weighted by ``w`` (a bootstrap resample's
    draw counts): one sort of the scores, then ``O(P + U)`` per call for ``U`` distinct
    scores (:func:`group_bootstrap`)."""

    def __init__(self, y: np.ndarray, p: np.ndarray):
        self.y, self.p = y, p
        self.pos = y == 1
        if p.size and not np.all(np.isfinite(p)):
            raise ValueError("scores: expected finite numbers")
        _, self.level = np.unique(p, return_inverse=True)  # rows → distinct score, ascending
        self.n_levels = int(self.level.max()) + 1 if len(p) else 0
        self.correct = ((p >= 0.5) == self.pos).astype(np.float64)
        pc = np.clip(p, _CLIP, 1 - _CLIP)
        self.loss = -(y * np.log(pc) + (1 - y) * np.log1p(-pc)) if len(y) else y

    def value(self, statistic: str, w: np.ndarray) -> float | None:
        total = float(w.sum())
        if total <= 0:
            return None
        if statistic == "accuracy":
            return float(w @ self.correct) / total
        if statistic == "log_loss":
            return float(w @ self.loss) / total
        w_pos = np.bincount(self.level, weights=np.where(self.pos, w, 0.0),
                            minlength=self.n_levels)
        w_neg = np.bincount(self.level, weights=np.where(self.pos, 0.0, w),
                            minlength=self.n_levels)
        n_pos, n_neg = float(w_pos.sum()), float(w_neg.sum())
        if n_pos == 0 or n_neg == 0:
            return None
        below = np.cumsum(w_neg) - w_neg
        return float(w_pos @ (below + 0.5 * w_neg)) / (n_pos * n_neg)
