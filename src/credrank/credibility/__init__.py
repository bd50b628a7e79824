"""A learned page-credibility prior: ``P(page is credible)`` from its text and URL.

Where no rule or table knows a page's source, a page-level credibility estimate has to come
from the page itself. This package learns one from labelled pages and applies it in search:

* :mod:`~credrank.credibility.features` — the ``cues``, ``url`` and ``embedding`` features;
* :mod:`~credrank.credibility.model` — labelled pages, configurations, the classifier;
* :mod:`~credrank.credibility.cv` — grouped (by topic or host) nested cross-validation, the
  bootstrap interval over groups (both :mod:`credrank.learn.cv`, shared with the stance
  model), the leave-one-topic-out helpers of the TREC experiment;
* :mod:`~credrank.credibility.labels` — the labels file and its matching to an index;
* :mod:`~credrank.credibility.modelfile` — the versioned JSON model file
  (:mod:`credrank.learn.modelfile`);
* :mod:`~credrank.credibility.train` — labels + index → model file (``credrank credibility
  fit``);
* :mod:`~credrank.credibility.indexed` — ``p`` computed at index time and kept in the payload
  (``credrank score credibility``, ``credrank index … --credibility-model``);

The stage that applies a model in search (the factor ``λ = floor + (1 − floor) · p``, read from
the payload and scored in the engine where the index holds it) is
:mod:`credrank.stages.credibility`.

**Limits.** A model learns what its labels call credible (NIST's 0/1 judgement of a page as a
whole says nothing about whether the page's claim is correct); the cue lists are English and
hand-written; a model does not transfer to another corpus or embedder without refitting.
"""

from credrank.credibility.cv import (
    CrossValidation,
    OutOfFold,
    bootstrap_auc,
    choose_config,
    credibility_report,
    group_folds,
    grouped_cross_validation,
    held_out,
    loto_credibility_models,
    nested_config_choice,
    out_of_fold,
)
from credrank.credibility.features import (
    CUE_GROUPS,
    CUE_NAMES,
    EMBEDDING_SOURCES,
    GROUPS,
    TLDS,
    URL_NAMES,
    CredibilityFeaturizer,
    cue_features,
    head,
    url_features,
)
from credrank.credibility.indexed import credibility_job, score_index
from credrank.credibility.labels import LabelsFile, MatchReport, match_labels, read_labels
from credrank.credibility.model import (
    DEFAULT_CONFIGS,
    Config,
    CredibilityExample,
    CredibilityModel,
    examples_from_labels,
    topics_of,
    training_set,
)
from credrank.credibility.modelfile import SavedCredibilityModel, load_model, save_model
from credrank.credibility.train import FitResult, fit_from_labels

__all__ = [
    "CUE_GROUPS", "CUE_NAMES", "DEFAULT_CONFIGS", "EMBEDDING_SOURCES", "GROUPS", "TLDS",
    "URL_NAMES", "Config",
    "CredibilityExample", "CredibilityFeaturizer", "CredibilityModel",
    "CrossValidation", "FitResult", "LabelsFile", "MatchReport",
    "OutOfFold", "SavedCredibilityModel", "bootstrap_auc",
    "choose_config", "credibility_job", "credibility_report", "cue_features",
    "examples_from_labels", "fit_from_labels",
    "group_folds", "grouped_cross_validation", "head", "held_out", "load_model",
    "loto_credibility_models", "match_labels", "nested_config_choice", "out_of_fold",
    "read_labels", "save_model", "score_index", "topics_of", "training_set", "url_features",
]
