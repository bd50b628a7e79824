"""Grouped cross-validation of the credibility model: no group is scored by a model that saw it.

**Groups.** Every labelled page carries its labels per group (a topic, or the site it comes
from: :mod:`credrank.credibility.labels`). A model for the groups ``G`` of a fold is fitted on
:func:`~credrank.credibility.model.training_set` ``(examples, G)``: the pages judged in *none*
of ``G`` (a page judged in two groups is out of both groups' folds).

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

The leave-one-topic-out helpers of the TREC experiment (:func:`loto_credibility_models`,
:func:`held_out`, :func:`nested_config_choice`, :func:`credibility_report`) are the
one-group-per-fold case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.folds import MAX_LOGO_GROUPS, N_FOLDS, group_folds, group_resamples
from credrank.core.maths import roc_auc
from credrank.credibility.features import CredibilityFeaturizer
from credrank.credibility.model import (
    DEFAULT_CONFIGS,
    Config,
    CredibilityExample,
    CredibilityModel,
    topics_of,
    training_set,
)

#: bootstrap resamples of the groups for the interval
N_BOOT = 2000


# ---------------------------------------------------------------- out-of-fold scoring


@dataclass(frozen=True)
class OutOfFold:
    """Out-of-fold predictions, one row per scored (group, page) pair."""

    groups: list[str]
    doc_ids: list[str]
    folds: list[int]
    y: np.ndarray
    p: np.ndarray

    def auc(self) -> float | None:
        """Pooled AUC over every pair; ``None`` where one class is missing."""
        return roc_auc(self.y, self.p) if len(self.y) else None


def _check_unseen(fold: Sequence[str], pages: Sequence[CredibilityExample],
                  model: CredibilityModel) -> None:
    leaked = {e.doc_id for e in pages} & set(model.trained_on)
    if leaked:
        raise ValueError(f"model of fold {list(fold)} was trained on {len(leaked)} of its pages "
                         f"(e.g. {sorted(leaked)[0]!r}); expected out-of-fold scoring")


def out_of_fold(examples: Sequence[CredibilityExample], folds: Sequence[Sequence[str]],
                models: Sequence[CredibilityModel]) -> OutOfFold:
    """Every (group, page) pair of each fold's groups, scored by that fold's model, which must
    not have trained on the page (checked: ``ValueError``)."""
    if len(folds) != len(models):
        raise ValueError(f"models: expected {len(folds)} (one per fold), got {len(models)}")
    groups: list[str] = []
    ids: list[str] = []
    fold_of: list[int] = []
    ys: list[int] = []
    ps: list[float] = []
    for i, (fold, model) in enumerate(zip(folds, models, strict=True)):
        in_fold = set(fold)
        pages = [e for e in examples if in_fold & set(e.labels)]
        if not pages:
            continue
        _check_unseen(fold, pages, model)
        p = model.predict([e.text for e in pages], [e.url for e in pages])
        for g in fold:
            for e, pe in zip(pages, p, strict=True):
                if g in e.labels:
                    groups.append(g)
                    ids.append(e.doc_id)
                    fold_of.append(i)
                    ys.append(int(e.labels[g]))
                    ps.append(float(pe))
    return OutOfFold(groups, ids, fold_of, np.asarray(ys, dtype=np.float64),
                     np.asarray(ps, dtype=np.float64))


def fit_folds(examples: Sequence[CredibilityExample], featurizer: CredibilityFeaturizer,
              config: Config, folds: Sequence[Sequence[str]], exclude: Sequence[str] = ()
              ) -> list[CredibilityModel]:
    """One model per fold, fitted on the pages judged in neither the fold's groups nor
    ``exclude``."""
    return [CredibilityModel(featurizer, config).fit(examples, [*fold, *exclude])
            for fold in folds]


def usable_configs(featurizer: CredibilityFeaturizer, configs: Sequence[Config]
                   ) -> list[Config]:
    """The configurations whose feature groups ``featurizer`` produces (at least one)."""
    if not configs:
        raise ValueError("configs: expected at least one configuration")
    available = [c for c in configs if set(c.groups) <= set(featurizer.groups)]
    if not available:
        raise ValueError(f"configs: none usable with feature groups {featurizer.groups}")
    return available


@dataclass(frozen=True)
class ConfigChoice:
    """The configuration of highest pooled out-of-fold AUC, and every configuration's AUC."""

    config: Config
    auc: float | None
    scores: list[dict[str, Any]]


def choose_config(examples: Sequence[CredibilityExample], featurizer: CredibilityFeaturizer,
                  configs: Sequence[Config], folds: Sequence[Sequence[str]],
                  exclude: Sequence[str] = ()) -> ConfigChoice:
    """Grouped CV over ``folds`` (never reading a group of ``exclude``) for each configuration;
    the highest pooled out-of-fold AUC wins (ties: the first; undefined AUCs never win; none
    defined: the first configuration with ``auc = None``)."""
    available = usable_configs(featurizer, configs)
    best: tuple[float, Config] | None = None
    scores = []
    for config in available:
        oof = out_of_fold(examples, folds, fit_folds(examples, featurizer, config, folds,
                                                     exclude))
        value = oof.auc()
        scores.append({**config.to_dict(), "auc": value, "n": len(oof.y)})
        if value is not None and (best is None or value > best[0] + 1e-12):
            best = (value, config)
    if best is None:
        return ConfigChoice(available[0], None, scores)
    return ConfigChoice(best[1], best[0], scores)


# ---------------------------------------------------------------- bootstrap over groups


def bootstrap_auc(groups: Sequence[str], y: np.ndarray, p: np.ndarray, *, n_boot: int = N_BOOT,
                  seed: int = 0, level: float = 0.95
                  ) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval of the pooled AUC over ``n_boot`` resamples of the groups (with
    replacement, :func:`~credrank.core.folds.group_resamples`); returns ``(interval or None,
    resamples with a defined AUC)``. ``None`` when fewer than half the resamples have both
    classes."""
    values = [v for idx in group_resamples(groups, n_boot, seed)
              if (v := roc_auc(y[idx], p[idx])) is not None]
    if not values or len(values) < max(1, n_boot // 2):
        return None, len(values)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(values), [alpha, 1.0 - alpha])
    return (float(lo), float(hi)), len(values)


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


def grouped_cross_validation(examples: Sequence[CredibilityExample],
                             featurizer: CredibilityFeaturizer,
                             configs: Sequence[Config] = DEFAULT_CONFIGS, *, seed: int = 0,
                             n_boot: int = N_BOOT, max_logo: int = MAX_LOGO_GROUPS,
                             k: int = N_FOLDS) -> CrossValidation:
    """Nested grouped CV, bootstrap interval over groups and the final refit (module
    docstring). Needs at least 3 groups and both classes among the training labels."""
    groups = topics_of(examples)
    if len(groups) < 3:
        raise ValueError(f"grouped cross-validation needs at least 3 groups; got {len(groups)}"
                         f" ({', '.join(groups) or 'none'})")
    configs = usable_configs(featurizer, configs)
    folds = group_folds(groups, seed=seed, max_logo=max_logo, k=k)
    models: list[CredibilityModel] = []
    fold_configs: list[dict[str, Any]] = []
    for fold in folds:
        rest = [g for g in groups if g not in fold]
        inner = group_folds(rest, seed=seed, max_logo=max_logo, k=k)
        choice = (ConfigChoice(configs[0], None, []) if len(configs) == 1 else
                  choose_config(examples, featurizer, configs, inner, exclude=fold))
        models.append(CredibilityModel(featurizer, choice.config).fit(examples, fold))
        fold_configs.append({"groups": list(fold), "config": choice.config.to_dict(),
                             "inner_auc": choice.auc})
    oof = out_of_fold(examples, folds, models)
    auc = oof.auc()
    interval, defined = bootstrap_auc(oof.groups, oof.y, oof.p, n_boot=n_boot, seed=seed)
    final = choose_config(examples, featurizer, configs, folds)
    model = CredibilityModel(featurizer, final.config).fit(examples)
    train, _ = training_set(examples, [])
    return CrossValidation(oof=oof, folds=folds, fold_configs=fold_configs, auc=auc,
                           interval=interval, n_boot=n_boot, n_boot_defined=defined, seed=seed,
                           final=final, model=model, n_groups=len(groups),
                           n_pages=len(examples), n_train_pages=len(train),
                           dropped_ties=len(examples) - len(train))


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
    topics: list[str] = []
    ys: list[int] = []
    ps: list[float] = []
    for t, model in models.items():
        pages = [e for e in examples if t in e.labels]
        if not pages:
            continue
        leaked = {e.doc_id for e in pages} & set(model.trained_on)
        if leaked:
            raise ValueError(f"model of topic {t!r} was trained on {len(leaked)} of its pages "
                             f"(e.g. {sorted(leaked)[0]!r}); expected leave-one-topic-out")
        p = model.predict([e.text for e in pages], [e.url for e in pages])
        topics += [t] * len(pages)
        ys += [int(e.labels[t]) for e in pages]
        ps += list(map(float, p))
    return topics, np.asarray(ys, dtype=np.float64), np.asarray(ps, dtype=np.float64)


def nested_config_choice(examples: Sequence[CredibilityExample],
                         featurizer: CredibilityFeaturizer,
                         configs: Sequence[Config] = DEFAULT_CONFIGS
                         ) -> dict[str, dict[str, Any]]:
    """Per outer topic ``t``: :func:`choose_config` over leave-one-topic-out folds of the other
    topics, never reading ``t`` (each inner topic ``u`` is scored by a model fitted on pages
    judged for neither ``t`` nor ``u``). Returns
    ``{t: {"config": Config, "inner_auc": float | None}}``."""
    usable_configs(featurizer, configs)
    topics = topics_of(examples)
    if len(topics) < 3:
        raise ValueError(f"nested LOTO needs at least 3 topics; got {len(topics)}")
    out: dict[str, dict[str, Any]] = {}
    for outer in topics:
        inner = [(u,) for u in topics if u != outer]
        choice = choose_config(examples, featurizer, configs, inner, exclude=[outer])
        out[outer] = {"config": choice.config, "inner_auc": choice.auc}
    return out


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
