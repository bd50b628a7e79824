"""The learned-model stack: one estimator protocol, one grouped cross-validation, one model file.

Every learned stage (the page-credibility prior, :mod:`credrank.credibility`; the stance model,
:mod:`credrank.signals.stance`) brings a featuriser and a configuration grid and uses:

* :mod:`~credrank.learn.estimator` — the :class:`Estimator` protocol (``fit`` /
  ``predict_proba``) and :class:`LogisticEstimator`, the L2 logistic regression
  ``P(y = 1 | x) = σ(b + w · (x − μ) / s)`` of :mod:`credrank.core.logistic`;
* :mod:`~credrank.learn.cv` — grouped folds (no group split between training and scoring),
  out-of-fold scores, configuration choice on inner folds, nested CV, grouped bootstrap
  intervals; features computed once per item, fits run in ``n_jobs`` processes with the same
  numbers, ``on_progress(done, total)``;
* :mod:`~credrank.learn.modelfile` — the versioned JSON model file: header key and format,
  ``created_by``, training provenance, schema-checked reading of every format a kind has had.

This package imports nothing of credrank but :mod:`credrank.core`.
"""

from credrank.learn.cv import (
    HIGHEST_AUC,
    LOWEST_LOG_LOSS,
    N_BOOT,
    ConfigChoice,
    Criterion,
    Fitted,
    GroupedData,
    Interval,
    Learner,
    NestedCV,
    OutOfFold,
    choose_config,
    choose_per_fold,
    cross_validate,
    fit,
    group_bootstrap,
    group_folds,
    log_loss,
    nested_cross_validation,
    out_of_fold,
)
from credrank.learn.estimator import Estimator, LogisticEstimator, logistic_estimator
from credrank.learn.modelfile import ModelFileFormat, created_by, provenance

__all__ = [
    "HIGHEST_AUC", "LOWEST_LOG_LOSS", "N_BOOT", "ConfigChoice", "Criterion", "Estimator",
    "Fitted", "GroupedData", "Interval", "Learner", "LogisticEstimator", "ModelFileFormat",
    "NestedCV", "OutOfFold", "choose_config", "choose_per_fold", "created_by",
    "cross_validate", "fit", "group_bootstrap", "group_folds", "log_loss",
    "logistic_estimator", "nested_cross_validation", "out_of_fold", "provenance",
]
