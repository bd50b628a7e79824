"""The page-credibility classifier: labelled pages, configurations and the model.

A :class:`CredibilityExample` is one page (one doc id) with one 0/1 credibility label per
*group* it was judged in (a topic, or its host: see :mod:`credrank.credibility.cv`). A
:class:`CredibilityModel` is a :class:`~credrank.credibility.features.CredibilityFeaturizer`
plus an L2 logistic regression (:class:`~credrank.learn.estimator.LogisticEstimator` on
:func:`~credrank.core.logistic.fit_logistic`, ``P(credible | x) = σ(b + w · (x − μ) / s)`` on
standardised features) over the columns of its :class:`Config`'s feature groups.

**Training set** (:func:`training_set`): the pages judged in *none* of the excluded groups,
each with the majority of its labels; a tie is dropped (declared, and counted by the caller).
So a page judged in two groups is out of both groups' folds' training sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.logistic import LogisticModel
from credrank.credibility.features import CredibilityFeaturizer
from credrank.learn.estimator import LogisticEstimator


@dataclass(frozen=True)
class CredibilityExample:
    """One page (one doc id) with its credibility label per judging topic (0/1); ``title``
    and ``vector`` (the index's stored vector) feed the ``document`` embedding source
    (:class:`~credrank.credibility.features.CredibilityFeaturizer`)."""

    doc_id: str
    text: str
    url: str | None
    labels: Mapping[str, int]
    title: str | None = field(default=None, compare=False)
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)

    def label(self) -> int | None:
        """Majority of :attr:`labels`; ``None`` on a tie (declared: such a page is not used
        for training)."""
        values = list(self.labels.values())
        if not values:
            return None
        mean = float(np.mean(values))
        return None if mean == 0.5 else int(mean > 0.5)


@dataclass(frozen=True)
class Config:
    """A model configuration: feature groups and the L2 strength of :func:`fit_logistic`."""

    groups: tuple[str, ...]
    l2: float

    def to_dict(self) -> dict[str, Any]:
        """``{"groups": [...], "l2": l2}``."""
        return {"groups": list(self.groups), "l2": self.l2}


#: the configuration grid of the nested choice (feature groups × L2), fixed a priori
DEFAULT_CONFIGS: tuple[Config, ...] = tuple(
    Config(g, l2) for g in (("cues", "url"), ("embedding",), ("cues", "url", "embedding"))
    for l2 in (10.0, 100.0, 1000.0))


@dataclass
class CredibilityModel:
    """Featuriser + logistic regression on the columns of ``config.groups``.

    ``trained_on`` holds the doc ids of the training pages and ``excluded`` the groups whose
    pages were kept out (for audit and for the out-of-fold checks).
    """

    featurizer: CredibilityFeaturizer
    config: Config
    model: LogisticModel | None = field(default=None, repr=False)
    trained_on: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()

    def fit(self, examples: Sequence[CredibilityExample], exclude: Iterable[str] = ()
            ) -> CredibilityModel:
        """Fit on :func:`training_set` ``(examples, exclude)``."""
        exclude = tuple(sorted(set(exclude)))
        train, y = training_set(examples, exclude)
        if not train:
            raise ValueError(f"no training page left after excluding topics {list(exclude)}; "
                             "a leave-one-topic-out fit needs pages of at least one other topic")
        x = self._x([e.text for e in train], [e.url for e in train],
                    titles=[e.title for e in train], vectors=[e.vector for e in train])
        self.model = LogisticEstimator(self.config.l2).fit(x, y).model
        self.trained_on = tuple(e.doc_id for e in train)
        self.excluded = exclude
        return self

    def _x(self, texts: Sequence[str], urls: Sequence[str | None], *,
           titles: Sequence[str | None] | None = None,
           vectors: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        cols = self.featurizer.columns(self.config.groups)
        if "embedding" not in self.config.groups:
            titles = vectors = None  # nothing reads them
        return self.featurizer.features(texts, urls, titles=titles, vectors=vectors)[:, cols]

    def predict(self, texts: Sequence[str], urls: Sequence[str | None], *,
                titles: Sequence[str | None] | None = None,
                vectors: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """``P(credible)`` per page in ``[0, 1]``; an empty list gives an empty array.
        ``titles`` and ``vectors`` (the index's stored vectors, ``None`` where unknown) feed
        a ``document`` embedding source; the ``head`` source ignores them."""
        if self.model is None:
            raise ValueError("CredibilityModel.predict: the model is not fitted; call fit()")
        if len(texts) == 0:
            return np.zeros(0)
        p = self.model.predict_proba(self._x(list(texts), list(urls), titles=titles,
                                             vectors=vectors))
        if not np.all(np.isfinite(p)):
            raise ValueError("CredibilityModel.predict: non-finite probability")
        return np.clip(p, 0.0, 1.0)

    def __call__(self, texts: Sequence[str], urls: Sequence[str | None], *,
                 titles: Sequence[str | None] | None = None,
                 vectors: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """:meth:`predict`."""
        return self.predict(texts, urls, titles=titles, vectors=vectors)


def examples_from_labels(documents: Iterable[Any], doc_labels: Mapping[str, Mapping[str, Any]]
                         ) -> list[CredibilityExample]:
    """One :class:`CredibilityExample` per doc id from an :class:`EvalSet`'s ``documents``
    (with ``id``, ``text``, ``url``) and ``doc_labels[id]["judgements"][topic]["credibility"]``.
    Pages without a judgement are skipped; a repeated doc id is an error (the corpus is
    deduplicated by id)."""
    out: list[CredibilityExample] = []
    seen: set[str] = set()
    for doc in documents:
        did = str(doc.id)
        if did in seen:
            raise ValueError(f"documents: doc id {did!r} appears twice; expected one entry "
                             "per page")
        seen.add(did)
        judgements = doc_labels.get(did, {}).get("judgements", {})
        labels = {str(t): int(j["credibility"]) for t, j in judgements.items()
                  if j.get("credibility") in (0, 1)}
        if labels:
            out.append(CredibilityExample(did, doc.text, doc.url, labels))
    return out


def training_set(examples: Sequence[CredibilityExample], exclude: Iterable[str]
                 ) -> tuple[list[CredibilityExample], np.ndarray]:
    """Pages judged for none of the topics in ``exclude``, with their majority label (ties
    dropped). A doc id may appear once only."""
    excluded = set(exclude)
    ids = [e.doc_id for e in examples]
    if len(set(ids)) != len(ids):
        raise ValueError("examples: a doc id appears twice; deduplicate pages by doc id")
    train, y = [], []
    for e in examples:
        if excluded & set(e.labels):
            continue
        label = e.label()
        if label is None:
            continue
        train.append(e)
        y.append(label)
    return train, np.asarray(y, dtype=np.float64)


def topics_of(examples: Sequence[CredibilityExample]) -> list[str]:
    """Every judging group (topic), in first-seen order."""
    return list(dict.fromkeys(t for e in examples for t in e.labels))
