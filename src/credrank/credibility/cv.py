"""Grouped cross-validation of the credibility model: no group is scored by a model that saw it.

The cross-validation itself is :mod:`credrank.learn.cv` (shared by every learned stage); this
module binds it to labelled pages and keeps the names the experiments use.

**Groups.** Every labelled page carries its labels per group (a topic, or the site it comes
from: :mod:`credrank.credibility.labels`). A model for the groups ``G`` of a fold is fitted on
:func:`~credrank.credibility.model.training_set` ``(examples, G)``: the pages judged in *none*
of ``G`` (a page judged in two groups is out of both groups' folds), each with the majority of
its labels (a tie trains nothing). So a model is never tested on a near-copy of its training
pages — pages of one topic or host resemble each other far more than pages of two.

**Folds** (:func:`group_folds`). Leave-one-group-out while there are at most ``max_logo`` (20)
groups, in first-seen order; above that ``k`` (10) folds of groups: the groups sorted, permuted
by ``numpy.random.default_rng(seed)`` and dealt round-robin, so fold sizes differ by at most one
group and the same input gives the same folds.

**Out-of-fold scores** (:func:`out_of_fold`). Every (group, page) pair of a fold's groups is
scored by that fold's model, which is checked never to have trained on the page. The pooled
out-of-fold AUC (:func:`~credrank.core.maths.roc_auc`, ``None`` where a class is missing) is
computed over all pairs.

**Nested choice** (:func:`grouped_cross_validation`). For each outer fold ``F`` the
configuration (feature groups, L2) is chosen from ``configs`` (:data:`DEFAULT_CONFIGS`) by the
pooled out-of-fold AUC of an *inner* grouped CV over the other groups only (inner folds built by
the same rule), ties to the first configuration; a configuration with an undefined AUC cannot
win (none defined: the first). The model fitted on all groups but ``F`` with that configuration
scores ``F``. So the reported AUC is read on groups that neither the model nor the choice of its
configuration saw.

**Interval.** A percentile bootstrap over groups: ``n_boot`` (2000) resamples of the groups with
replacement (``default_rng(seed)``), each the pooled AUC of the resampled groups' pairs; the
95% interval is the 2.5th and 97.5th percentile of the resamples whose AUC is defined (the
number of those is reported).

**Final model.** The configuration is chosen once more by (non-nested) grouped CV over all
groups — the per-configuration pooled AUCs are reported as ``config_scores`` — and the model is
refitted on every labelled page with it. Those scores are optimistic (the choice reads them);
the nested AUC above is the estimate.

**Cost** (:mod:`credrank.learn.cv`): every page is featurised (and embedded) once, each
feature-group set sliced once; ``O(F² C)`` logistic fits for ``F`` outer folds and ``C``
configurations (half of the inner ones shared under leave-one-group-out), in ``n_jobs``
processes with the same numbers; ``on_progress(done, total)`` after every fit.

The leave-one-topic-out helpers of the TREC experiment (:func:`loto_credibility_models`,
:func:`held_out`, :func:`nested_config_choice`, :func:`credibility_report`) are the
one-group-per-fold case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.folds import MAX_LOGO_GROUPS, N_FOLDS, group_folds
from credrank.core.maths import roc_auc
from credrank.credibility.features import CredibilityFeaturizer
from credrank.credibility.model import (
    DEFAULT_CONFIGS,
    Config,
    CredibilityExample,
    CredibilityModel,
    topics_of,
)
from credrank.learn import cv as learn_cv
from credrank.learn.cv import (
    HIGHEST_AUC,
    N_BOOT,
    ConfigChoice,
    Fitted,
    GroupedData,
    Learner,
    NestedCV,
    OutOfFold,
    Progress,
    group_bootstrap,
)

__all__ = [
    "MAX_LOGO_GROUPS", "N_BOOT", "N_FOLDS", "ConfigChoice", "CrossValidation", "OutOfFold",
    "bootstrap_auc", "choose_config", "credibility_report", "fit_folds", "group_folds",
    "grouped_cross_validation", "grouped_data", "held_out", "learner",
    "loto_credibility_models", "nested_config_choice", "out_of_fold", "usable_configs",
]


# ---------------------------------------------------------------- pages as grouped data


def grouped_data(examples: Sequence[CredibilityExample], featurizer: CredibilityFeaturizer
                 ) -> GroupedData:
    """The labelled pages as :class:`~credrank.learn.cv.GroupedData`: one item per page
    (trained with its majority label, ties never), one pair per (group, page) judgement, the
    feature rows computed by ``featurizer`` when the CV first reads them. A doc id may appear
    once only; a page without a label plays no part."""
    pages = [e for e in examples if e.labels]
    ids = [e.doc_id for e in pages]
    if len(set(ids)) != len(ids) or len({e.doc_id for e in examples}) != len(examples):
        raise ValueError("examples: a doc id appears twice; deduplicate pages by doc id")

    def features(items: np.ndarray) -> np.ndarray:
        return featurizer.features([pages[i].text for i in items],
                                   [pages[i].url for i in items],
                                   titles=[pages[i].title for i in items],
                                   vectors=[pages[i].vector for i in items])

    return GroupedData.from_judgements([e.labels for e in pages],
                                       y=[e.label() for e in pages], ids=ids,
                                       features=features)


def learner(featurizer: CredibilityFeaturizer) -> Learner:
    """A configuration's columns (its feature groups) and its logistic estimator (its L2)."""
    return Learner(columns=lambda config: featurizer.columns(config.groups))


def _model(featurizer: CredibilityFeaturizer, data: GroupedData, fitted: Fitted
           ) -> CredibilityModel:
    est = fitted.estimator
    return CredibilityModel(featurizer, fitted.config, getattr(est, "model", None),
                            trained_on=tuple(data.ids[i] for i in fitted.rows),
                            excluded=fitted.excluded)


def usable_configs(featurizer: CredibilityFeaturizer, configs: Sequence[Config]
                   ) -> list[Config]:
    """The configurations whose feature groups ``featurizer`` produces (at least one)."""
    if not configs:
        raise ValueError("configs: expected at least one configuration")
    available = [c for c in configs if set(c.groups) <= set(featurizer.groups)]
    if not available:
        raise ValueError(f"configs: none usable with feature groups {featurizer.groups}")
    return available


# ---------------------------------------------------------------- out-of-fold scoring


def _scored(examples: Sequence[CredibilityExample], folds: Sequence[Sequence[str]],
            models: Sequence[CredibilityModel], leak: Callable[[Sequence[str], int, str], str]
            ) -> OutOfFold:
    """Every (group, page) pair of each fold, scored by that fold's model after checking that
    it never trained on one of the fold's pages (``leak(fold, n, example)``: the message)."""
    if len(folds) != len(models):
        raise ValueError(f"models: expected {len(folds)} (one per fold), got {len(models)}")
    pages = [e for e in examples if e.labels]
    data = GroupedData.from_judgements([e.labels for e in pages],
                                       y=[e.label() for e in pages],
                                       ids=[e.doc_id for e in pages], x=np.zeros((len(pages), 0)))
    predict = []
    for fold, model in zip(folds, models, strict=True):
        items = data.items_in(fold)
        leaked = {pages[i].doc_id for i in items} & set(model.trained_on)
        if leaked:
            raise ValueError(leak(fold, len(leaked), sorted(leaked)[0]))

        def fn(rows: np.ndarray, model: CredibilityModel = model) -> np.ndarray:
            return model.predict([pages[i].text for i in rows], [pages[i].url for i in rows])

        predict.append(fn)
    return learn_cv.out_of_fold(data, folds, predict)


def out_of_fold(examples: Sequence[CredibilityExample], folds: Sequence[Sequence[str]],
                models: Sequence[CredibilityModel]) -> OutOfFold:
    """Every (group, page) pair of each fold's groups, scored by that fold's model, which must
    not have trained on the page (checked: ``ValueError``)."""
    return _scored(examples, folds, models, lambda fold, n, e: (
        f"model of fold {list(fold)} was trained on {n} of its pages (e.g. {e!r}); expected "
        "out-of-fold scoring"))


def fit_folds(examples: Sequence[CredibilityExample], featurizer: CredibilityFeaturizer,
              config: Config, folds: Sequence[Sequence[str]], exclude: Sequence[str] = ()
              ) -> list[CredibilityModel]:
    """One model per fold, fitted on the pages judged in neither the fold's groups nor
    ``exclude``."""
    return [CredibilityModel(featurizer, config).fit(examples, [*fold, *exclude])
            for fold in folds]


def choose_config(examples: Sequence[CredibilityExample], featurizer: CredibilityFeaturizer,
                  configs: Sequence[Config], folds: Sequence[Sequence[str]],
                  exclude: Sequence[str] = (), *, n_jobs: int = 1,
                  on_progress: Progress | None = None) -> ConfigChoice:
    """Grouped CV over ``folds`` (never reading a group of ``exclude``) for each configuration;
    the highest pooled out-of-fold AUC wins (ties: the first; undefined AUCs never win; none
    defined: the first configuration with ``auc = None``)."""
    available = usable_configs(featurizer, configs)
    return learn_cv.choose_config(grouped_data(examples, featurizer), learner(featurizer),
                                  available, folds, HIGHEST_AUC, exclude=exclude,
                                  n_jobs=n_jobs, on_progress=on_progress)


# ---------------------------------------------------------------- bootstrap over groups


def bootstrap_auc(groups: Sequence[str], y: np.ndarray, p: np.ndarray, *, n_boot: int = N_BOOT,
                  seed: int = 0, level: float = 0.95
                  ) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval of the pooled AUC over ``n_boot`` resamples of the groups (with
    replacement, :func:`~credrank.learn.cv.group_bootstrap`); returns ``(interval or None,
    resamples with a defined AUC)``. ``None`` when fewer than half the resamples have both
    classes."""
    interval = group_bootstrap(groups, y, p, ("auc",), n_boot=n_boot, seed=seed,
                               level=level)["auc"]
    return interval.bounds, interval.n_defined


# ---------------------------------------------------------------- the nested grouped CV


@dataclass
class CrossValidation:
    """What :func:`grouped_cross_validation` found (module docstring)."""

    oof: OutOfFold
    folds: list[tuple[str, ...]]
    fold_configs: list[dict[str, Any]]
    auc: float | None
    interval: tuple[float, float] | None
    n_boot: int
    n_boot_defined: int
    seed: int
    final: ConfigChoice
    model: CredibilityModel
    n_groups: int
    n_pages: int
    n_train_pages: int
    dropped_ties: int
    extra: dict[str, Any] = field(default_factory=dict)
    nested: NestedCV | None = field(default=None, repr=False)

    def metrics(self) -> dict[str, Any]:
        """The JSON summary (``credrank credibility fit --json``, the model file's metrics)."""
        return {
            "cv_auc": self.auc,
            "cv_auc_interval": list(self.interval) if self.interval else None,
            "interval": f"95% percentile bootstrap over groups ({self.n_boot} resamples, "
                        f"seed {self.seed}; {self.n_boot_defined} with both classes)",
            "cv": ("leave-one-group-out" if all(len(f) == 1 for f in self.folds)
                   else f"{len(self.folds)}-fold by groups"),
            "n_folds": len(self.folds), "n_pairs": len(self.oof.y),
            "credible_share": float(self.oof.y.mean()) if len(self.oof.y) else None,
            "fold_configs": self.fold_configs,
            "config_scores": self.final.scores,
            "chosen_config": self.final.config.to_dict(),
        }

    def provenance(self, group_by: str) -> dict[str, Any]:
        """The model file's ``provenance`` (:mod:`credrank.learn.modelfile`)."""
        if self.nested is None:
            raise ValueError("provenance: this cross-validation kept no record of its run")
        return self.nested.provenance(group_by)


def grouped_cross_validation(examples: Sequence[CredibilityExample],
                             featurizer: CredibilityFeaturizer,
                             configs: Sequence[Config] = DEFAULT_CONFIGS, *, seed: int = 0,
                             n_boot: int = N_BOOT, max_logo: int = MAX_LOGO_GROUPS,
                             k: int = N_FOLDS, n_jobs: int = 1,
                             on_progress: Progress | None = None) -> CrossValidation:
    """Nested grouped CV, bootstrap interval over groups and the final refit (module
    docstring), by :func:`credrank.learn.cv.nested_cross_validation`. Needs at least 3 groups
    and both classes among the training labels. ``n_jobs``: processes for the fits (the same
    numbers for any value); ``on_progress(done, total)`` after every fit."""
    groups = topics_of(examples)
    if len(groups) < 3:
        raise ValueError(f"grouped cross-validation needs at least 3 groups; got {len(groups)}"
                         f" ({', '.join(groups) or 'none'})")
    configs = usable_configs(featurizer, configs)
    data = grouped_data(examples, featurizer)
    cv = learn_cv.nested_cross_validation(data, learner(featurizer), configs, HIGHEST_AUC,
                                          seed=seed, n_boot=n_boot, max_logo=max_logo, k=k,
                                          statistics=("auc",), n_jobs=n_jobs,
                                          on_progress=on_progress)
    interval = cv.intervals["auc"]
    n_train = len(data.train_rows())
    return CrossValidation(oof=cv.oof, folds=cv.folds, fold_configs=cv.fold_configs("groups"),
                           auc=cv.oof.auc(), interval=interval.bounds, n_boot=n_boot,
                           n_boot_defined=interval.n_defined, seed=seed, final=cv.final,
                           model=_model(featurizer, data, cv.model), n_groups=len(groups),
                           n_pages=len(examples), n_train_pages=n_train,
                           dropped_ties=len(examples) - n_train, nested=cv)


# ---------------------------------------------------------------- leave-one-topic-out (TREC)


def loto_credibility_models(examples: Sequence[CredibilityExample],
                            featurizer: CredibilityFeaturizer,
                            configs: Config | Mapping[str, Config],
                            exclude: Sequence[str] = ()) -> dict[str, CredibilityModel]:
    """``{t: model}`` for every topic ``t`` not in ``exclude``, each fitted on the pages judged
    for neither ``t`` nor any topic of ``exclude``. ``configs`` is one configuration for all
    topics or one per topic."""
    out: dict[str, CredibilityModel] = {}
    for t in topics_of(examples):
        if t in exclude:
            continue
        config = configs if isinstance(configs, Config) else configs[t]
        out[t] = CredibilityModel(featurizer, config).fit(examples, [t, *exclude])
    return out


def held_out(examples: Sequence[CredibilityExample], models: Mapping[str, CredibilityModel]
             ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Held-out ``(topics, labels, P(credible))`` over every (topic, judged page) pair of the
    topics in ``models``: each pair is scored by its topic's model, which must not have been
    trained on that page (checked)."""
    oof = _scored(examples, [(t,) for t in models], list(models.values()), lambda fold, n, e: (
        f"model of topic {fold[0]!r} was trained on {n} of its pages (e.g. {e!r}); expected "
        "leave-one-topic-out"))
    return list(oof.groups), oof.y, oof.p


def nested_config_choice(examples: Sequence[CredibilityExample],
                         featurizer: CredibilityFeaturizer,
                         configs: Sequence[Config] = DEFAULT_CONFIGS, *, n_jobs: int = 1,
                         on_progress: Progress | None = None) -> dict[str, dict[str, Any]]:
    """Per outer topic ``t``: :func:`choose_config` over leave-one-topic-out folds of the other
    topics, never reading ``t`` (each inner topic ``u`` is scored by a model fitted on pages
    judged for neither ``t`` nor ``u``). Returns
    ``{t: {"config": Config, "inner_auc": float | None}}``."""
    available = usable_configs(featurizer, configs)
    topics = topics_of(examples)
    if len(topics) < 3:
        raise ValueError(f"nested LOTO needs at least 3 topics; got {len(topics)}")
    choices = learn_cv.choose_per_fold(grouped_data(examples, featurizer), learner(featurizer),
                                       available, [(t,) for t in topics], HIGHEST_AUC,
                                       inner=lambda rest: [(u,) for u in rest], n_jobs=n_jobs,
                                       on_progress=on_progress)
    return {t: {"config": c.config, "inner_auc": c.auc}
            for t, c in zip(topics, choices, strict=True)}


def credibility_report(examples: Sequence[CredibilityExample],
                       models: Mapping[str, CredibilityModel]) -> dict[str, Any]:
    """Held-out accuracy (threshold 0.5) and AUC, pooled over every (topic, judged page) pair
    and per topic, with the share of credible pages (the accuracy of "always credible").
    An AUC is ``None`` where one class is missing (undefined), never a stand-in 0.5."""
    topics, y, p = held_out(examples, models)
    t_arr = np.asarray(topics, dtype=object)
    per_topic: dict[str, dict[str, Any]] = {}
    for t in models:
        mask = t_arr == t
        if not mask.any():
            continue
        per_topic[t] = {"n": int(mask.sum()), "credible_share": float(y[mask].mean()),
                        "accuracy": float(np.mean((p[mask] >= 0.5) == y[mask])),
                        "auc": roc_auc(y[mask], p[mask]),
                        "config": models[t].config.to_dict(),
                        "trained_on_pages": len(models[t].trained_on)}
    two_class = [v["auc"] for t, v in per_topic.items()
                 if 0 < v["credible_share"] < 1]
    return {"n": len(y), "credible_share": float(y.mean()) if len(y) else 0.0,
            "accuracy": float(np.mean((p >= 0.5) == y)) if len(y) else 0.0,
            "auc": roc_auc(y, p),
            "mean_topic_auc": float(np.mean(two_class)) if two_class else None,
            "topics_with_both_classes": len(two_class), "per_topic": per_topic}
