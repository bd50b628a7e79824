"""The stance model of the TREC experiments: now product code, re-exported here.

The features, the classifier and the leave-one-topic-out helpers live in
:mod:`credrank.signals.stance_model` (the product stage in :mod:`credrank.stages.stance`, the
model file in :mod:`credrank.signals.stance`); this module keeps the names the experiments and
their tests import. Nothing here differs from the product code path.
"""

from __future__ import annotations

from credrank.core.logistic import LogisticModel, fit_logistic, text_key
from credrank.signals.stance_model import (
    NEGATIVE_ANCHORS,
    NEGATIVE_CUES,
    POSITIVE_ANCHORS,
    POSITIVE_CUES,
    STOPWORDS,
    StanceExample,
    StanceFeaturizer,
    StanceModel,
    cue_counts,
    cue_features,
    loto_models,
    loto_report,
    loto_splits,
    query_terms,
    relevant_sentences,
    split_sentences,
)

__all__ = [
    "NEGATIVE_ANCHORS",
    "NEGATIVE_CUES",
    "POSITIVE_ANCHORS",
    "POSITIVE_CUES",
    "STOPWORDS",
    "LogisticModel",
    "StanceExample",
    "StanceFeaturizer",
    "StanceModel",
    "cue_counts",
    "cue_features",
    "fit_logistic",
    "loto_models",
    "loto_report",
    "loto_splits",
    "query_terms",
    "relevant_sentences",
    "split_sentences",
    "text_key",
]
