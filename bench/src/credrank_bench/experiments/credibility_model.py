"""The learned page-credibility prior of the TREC 2019 HM experiment: now product code.

Everything lives in :mod:`credrank.credibility` (features, model, leave-one-topic-out and
grouped cross-validation, the stage); this module re-exports the names the experiment and its
tests use, so ``credrank_bench.experiments.trec_hm`` runs the product code path.
"""

from credrank.credibility import (
    CUE_GROUPS,
    CUE_NAMES,
    DEFAULT_CONFIGS,
    GROUPS,
    TLDS,
    URL_NAMES,
    Config,
    CredibilityExample,
    CredibilityFeaturizer,
    CredibilityModel,
    credibility_report,
    cue_features,
    examples_from_labels,
    head,
    held_out,
    loto_credibility_models,
    nested_config_choice,
    topics_of,
    training_set,
    url_features,
)
from credrank.stages.credibility import CredibilityFn, LearnedCredibilityPrior

__all__ = [
    "CUE_GROUPS", "CUE_NAMES", "DEFAULT_CONFIGS", "GROUPS", "TLDS", "URL_NAMES", "Config",
    "CredibilityExample", "CredibilityFeaturizer", "CredibilityFn", "CredibilityModel",
    "LearnedCredibilityPrior", "credibility_report", "cue_features", "examples_from_labels",
    "head", "held_out", "loto_credibility_models", "nested_config_choice", "topics_of",
    "training_set", "url_features",
]
