"""The stance model: P(a page says the treatment in a health query helps) (chapter 35.3).

The per-document *answer* of a yes/no health question ("does X help Y?") for
:class:`~credrank.signals.agreement.AnswerAgreement`: chapter 35.3 takes answers from
source-specific generations; here the answer is read from each retrieved page by a classifier
fitted on labelled ``(topic, query, page, stance)`` pairs. The product stage and the model file
are in :mod:`credrank.signals.stance`; this module holds the features and the classifier, and
binds them to the grouped (nested) cross-validation of :mod:`credrank.learn.cv` (shared with
the credibility model), which estimates it without ever scoring a topic with a model that saw
it.

**Features** (:class:`StanceFeaturizer`), for a query ``q`` and a page ``d``:

* *query-focused snippet*: the page is split into sentences (:func:`split_sentences`); the
  ``k`` sentences that contain the most distinct query content terms (:func:`query_terms`,
  matched on 5-letter prefixes; ties by position) are joined in page order. Pages are long
  (median ≈ 5,000 characters) and MiniLM reads 256 word pieces, so the snippet, not the page
  head, is what carries the page's claim about the treatment;
* ``e_s``: the embedding of the snippet and, optionally, ``e_q ⊙ e_s`` (the query embedding
  times the snippet embedding, element-wise);
* *anchor contrast*: ``mean_a cos(e_s, a⁺) − mean_a cos(e_s, a⁻)`` over a few fixed statements
  of efficacy (``a⁺``) and of no efficacy (``a⁻``), :data:`POSITIVE_ANCHORS` /
  :data:`NEGATIVE_ANCHORS`;
* *lexical cues*: counts of efficacy and negation phrases (:data:`POSITIVE_CUES`,
  :data:`NEGATIVE_CUES`) in the snippet sentences and in the whole page, as
  ``log(1 + count)`` and as the balance ``(pos − neg) / (pos + neg + 1)``.

**Classifier** (:class:`StanceModel`): ``P(stance = 1 | x) = σ(b + w · (x − μ) / s)``, L2-
regularised logistic regression (:func:`~credrank.core.logistic.fit_logistic`), features
standardised on the training rows, fitted by L-BFGS from a zero start (deterministic). A
:class:`StanceConfig` fixes the L2 strength and whether the ``e_q ⊙ e_s`` block (when the
featuriser computes it) is used.

**Grouped cross-validation** (:func:`grouped_cross_validation`, by
:func:`credrank.learn.cv.nested_cross_validation`). Groups are topics: pages about one
treatment resemble each other far more than pages about two, so a topic is never split between
training and scoring.

* *Folds* (:func:`group_folds`): leave-one-topic-out while there are at most 20 topics (in
  first-seen order); above that ``K = 10`` folds of topics: the sorted topics permuted by
  ``numpy.random.default_rng(seed)`` and dealt round-robin (fold sizes differ by at most one
  topic; the same input and seed give the same folds).
* *Nested choice*: for each outer fold ``F`` the configuration is chosen among ``configs``
  (:func:`default_configs`: L2 in :data:`L2_GRID`, with and without ``e_q ⊙ e_s``) by the pooled
  out-of-fold log loss ``−(1/n) Σ [y log p + (1 − y) log(1 − p)]`` (``p`` clipped to
  ``[1e-6, 1 − 1e-6]``) of an *inner* grouped CV over the other topics (folds by the same rule);
  ties go to the first configuration. The model fitted on every topic but ``F`` with that
  configuration scores ``F`` (checked: :func:`out_of_fold` raises if a fold's model saw one of
  its topics). So no topic is scored by a model, or a configuration choice, that saw it.
* *Metrics*: pooled out-of-fold accuracy (threshold 0.5) and AUC
  (:func:`~credrank.core.maths.roc_auc`; ``None`` where a class is missing), each with a 95%
  percentile interval from ``n_boot`` (2000) resamples of the *topics* with replacement
  (``default_rng(seed)``), :func:`~credrank.learn.cv.group_bootstrap`.
* *Final model*: the configuration is chosen once more by (non-nested) grouped CV over all
  topics (its per-configuration log losses are reported, optimistic since the choice reads
  them) and the model is refitted on every pair.
* *Cost* (:mod:`credrank.learn.cv`): every pair is featurised once (:func:`feature_matrix`),
  each column set sliced once; ``O(F² C)`` logistic fits for ``F`` outer folds and ``C``
  configurations (half the inner ones shared under leave-one-topic-out), in ``n_jobs``
  processes with the same numbers; ``on_progress(done, total)`` after every fit.

**Limits.** A few hundred pairs at most in the data we have; MiniLM is not trained for
negation, so "traction is not effective" and "traction is effective" embed close together;
the lexical cues are an English health-domain list. The stance says what a page claims, not
whether it is true.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.folds import MAX_LOGO_GROUPS, N_FOLDS
from credrank.core.folds import group_folds as group_folds  # re-exported
from credrank.core.logistic import LogisticModel, text_key
from credrank.core.maths import roc_auc
from credrank.core.validation import check_int, check_positive
from credrank.index.embed import CachedEmbedder
from credrank.learn import cv as learn_cv
from credrank.learn.cv import (
    LOWEST_LOG_LOSS,
    N_BOOT,
    ConfigChoice,
    Fitted,
    GroupedData,
    Learner,
    NestedCV,
    OutOfFold,
    Progress,
    log_loss,
)
from credrank.learn.estimator import LogisticEstimator

# ---------------------------------------------------------------- text handling

#: words of a query that name no treatment or condition (question words, generic verbs)
STOPWORDS = frozenset("""
a an the and or of to in on for with by at from as is are was were be been being do does did
can could should would will may might must shall is it its this that these those there their
what which who whom whose when where why how whether if than then so such any some all
find documents document discuss discussing using use used uses helping help helps helpful
manage managing relieve relieving treat treating treatment treatments effective effectively
taking take prevent preventing reduce reducing cure curing good work works way ways
""".split())

#: phrases that say a treatment does not work / should not be used (case-insensitive)
NEGATIVE_CUES: tuple[str, ...] = (
    r"no (?:good |strong |clear |convincing |scientific |real )?evidence",
    r"(?:little|insufficient|limited|weak|inconclusive|lack of|lacks) (?:\w+ )?evidence",
    r"not (?:been )?(?:proven|shown|effective|recommended|supported|helpful|useful)",
    r"no (?:significant |real |clear )?(?:benefit|effect|difference|improvement)",
    r"(?:does|do|did|has|have)(?: not|n't) (?:\w+ )?(?:work|help|prevent|reduce|improve|treat)",
    r"ineffective", r"unproven", r"useless", r"myth", r"placebo", r"no better than",
    r"fail(?:s|ed)? to", r"harmful", r"dangerous", r"side effects?", r"risks?",
    r"should not", r"avoid", r"scam", r"controvers\w+", r"not (?:a )?cure",
)

#: phrases that say a treatment works / is recommended (case-insensitive)
POSITIVE_CUES: tuple[str, ...] = (
    r"(?<!not )(?<!in)effective", r"(?<!not )recommended", r"reduc(?:es|ed|ing)",
    r"improv(?:es|ed|ement|ing)", r"relie(?:f|ves?|ved)", r"benefi(?:t|ts|cial)",
    r"helps?", r"helped", r"works?", r"success(?:ful|fully)?", r"(?<!un)proven",
    r"first[- ]line", r"standard (?:of )?(?:care|treatment)", r"shown to", r"evidence (?:shows|"
    r"suggests|supports)", r"safe and effective", r"cures?", r"prevents?", r"treats?",
)

_NEG_RE = re.compile("|".join(f"(?:{p})" for p in NEGATIVE_CUES), re.IGNORECASE)
_POS_RE = re.compile("|".join(f"(?:{p})" for p in POSITIVE_CUES), re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")

#: fixed statements for the anchor-contrast feature (a priori, never tuned on data)
POSITIVE_ANCHORS: tuple[str, ...] = (
    "This treatment is effective and is recommended.",
    "Studies show that it works and helps patients.",
    "It significantly reduces symptoms and improves outcomes.",
)
NEGATIVE_ANCHORS: tuple[str, ...] = (
    "There is no evidence that this treatment works.",
    "Studies show it is not effective and is no better than placebo.",
    "It is not recommended and may be harmful.",
)

_PREFIX = 5


def query_terms(query: str) -> list[str]:
    """Content terms of a query: lower-cased words of ≥ 3 letters not in :data:`STOPWORDS`,
    cut to their first 5 letters (a crude stem: ``infections`` → ``infec``), unique, in order.
    """
    if not isinstance(query, str):
        raise ValueError(f"query: expected a string, got {type(query).__name__}")
    out: list[str] = []
    for word in _WORD.findall(query.lower()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        stem = word[:_PREFIX]
        if stem not in out:
            out.append(stem)
    return out


def split_sentences(text: str, max_words: int = 60) -> list[str]:
    """Sentences of a page: split after ``. ! ?`` followed by white space and at line breaks;
    a piece longer than ``max_words`` words is cut into chunks of ``max_words``; empty pieces
    are dropped."""
    if not isinstance(text, str):
        raise ValueError(f"text: expected a string, got {type(text).__name__}")
    check_int("max_words", max_words, 1)
    out: list[str] = []
    for piece in _SENT_SPLIT.split(text):
        words = piece.split()
        for start in range(0, len(words), max_words):
            out.append(" ".join(words[start:start + max_words]))
    return out


def relevant_sentences(query: str, text: str, k: int = 3, max_words: int = 60) -> list[str]:
    """The ``k`` sentences of ``text`` matching the most distinct query terms, in page order.

    A sentence's score is the number of distinct :func:`query_terms` whose 5-letter prefix
    starts one of its words; ties go to the earlier sentence. Sentences that match no term are
    used only when fewer than ``k`` match (then the page's first sentences fill in); a page
    with no text gives ``[]``.
    """
    check_int("k", k, 1)
    terms = query_terms(query)
    sentences = split_sentences(text, max_words)
    scored = []
    for i, sent in enumerate(sentences):
        stems = {w[:_PREFIX] for w in _WORD.findall(sent.lower())}
        scored.append((-sum(1 for t in terms if t in stems), i))
    chosen = sorted(i for _, i in sorted(scored)[:k])
    return [sentences[i] for i in chosen]


def cue_counts(text: str) -> tuple[int, int]:
    """``(positive, negative)``: non-overlapping matches of :data:`POSITIVE_CUES` and
    :data:`NEGATIVE_CUES` in ``text`` (case-insensitive)."""
    return len(_POS_RE.findall(text)), len(_NEG_RE.findall(text))


def cue_features(snippet: str, page: str) -> np.ndarray:
    """Six lexical features: for the snippet and for the whole page,
    ``log(1 + pos)``, ``log(1 + neg)`` and ``(pos − neg) / (pos + neg + 1)``."""
    out = []
    for text in (snippet, page):
        pos, neg = cue_counts(text)
        out += [math.log1p(pos), math.log1p(neg), (pos - neg) / (pos + neg + 1.0)]
    return np.asarray(out, dtype=np.float64)


# ---------------------------------------------------------------- features


class StanceFeaturizer:
    """Feature vectors for ``(query, page)`` pairs (see the module docstring).

    ``embedder`` is any :class:`~credrank.index.embed.Embedder` (MiniLM in experiments, the
    hashing embedder in tests) or ``None`` for lexical features only. With ``cache`` (the
    default) embeddings go through a :class:`~credrank.index.embed.CachedEmbedder` (the given
    one, or one wrapped around the embedder), so a snippet shared by several folds is encoded
    once, and feature rows are cached in memory by ``(query, hash of the page)``; a stage
    serving queries uses ``cache=False`` (only the fixed anchor embeddings are kept).
    """

    def __init__(self, embedder: Embedder | None, *, k_sentences: int = 3,
                 max_words: int = 60, use_embedding: bool = True,
                 use_interaction: bool = True, use_anchors: bool = True,
                 use_cues: bool = True, cache: bool = True):
        check_int("k_sentences", k_sentences, 1)
        needs_model = use_embedding or use_interaction or use_anchors
        if embedder is None and needs_model:
            raise ValueError("embedder: None, but use_embedding/use_interaction/use_anchors "
                             "need one; pass an embedder or switch them off")
        if not (needs_model or use_cues):
            raise ValueError("StanceFeaturizer: every feature group is switched off")
        self.cache = bool(cache)
        self.embedder: Embedder | None = (
            None if embedder is None else embedder
            if isinstance(embedder, CachedEmbedder) or not self.cache
            else CachedEmbedder(embedder))
        self._anchors: tuple[np.ndarray, np.ndarray] | None = None
        self.k_sentences = k_sentences
        self.max_words = max_words
        self.use_embedding = use_embedding
        self.use_interaction = use_interaction
        self.use_anchors = use_anchors
        self.use_cues = use_cues
        self._rows: dict[tuple[str, str], np.ndarray] = {}

    def config(self) -> dict[str, Any]:
        return {"embedder": getattr(self.embedder, "name", None),
                "k_sentences": self.k_sentences, "max_words": self.max_words,
                "use_embedding": self.use_embedding, "use_interaction": self.use_interaction,
                "use_anchors": self.use_anchors, "use_cues": self.use_cues}

    def blocks(self) -> list[tuple[str, int]]:
        """The feature blocks of a row, in order, as ``(name, width)``: ``embedding`` and
        ``interaction`` (the embedder's ``dim`` each), ``anchor_contrast`` (1), ``cues`` (6)."""
        dim = 0 if self.embedder is None else int(self.embedder.dim)
        out = []
        if self.embedder is not None:
            if self.use_embedding:
                out.append(("embedding", dim))
            if self.use_interaction:
                out.append(("interaction", dim))
            if self.use_anchors:
                out.append(("anchor_contrast", 1))
        if self.use_cues:
            out.append(("cues", 6))
        return out

    def columns(self, interaction: bool = True) -> np.ndarray:
        """Indices of the feature columns a model uses: every column, less the
        ``e_q ⊙ e_s`` block when ``interaction`` is false."""
        out: list[int] = []
        start = 0
        for name, width in self.blocks():
            if interaction or name != "interaction":
                out += range(start, start + width)
            start += width
        return np.asarray(out, dtype=np.intp)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (float64) through the embedding cache."""
        if self.embedder is None:
            raise ValueError("StanceFeaturizer.embed: this featuriser has no embedder")
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float64)

    def snippet(self, query: str, text: str) -> str:
        """The query-focused snippet of a page (:func:`relevant_sentences`, joined)."""
        return " ".join(relevant_sentences(query, text, self.k_sentences, self.max_words))

    def features(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One row per page: ``[e_s, e_q ⊙ e_s, anchor contrast, cues]`` (enabled groups).

        With ``cache`` (the default, for training) rows are cached in memory by
        ``(query, hash of the page)`` and embeddings by text; without it (a stage serving
        queries) nothing but the anchor embeddings is kept, so memory does not grow."""
        if not self.cache:
            return self._compute(query, list(texts))
        keys = [(query, text_key(t)) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._rows]
        if missing:
            rows = self._compute(query, [texts[i] for i in missing])
            for i, row in zip(missing, rows, strict=True):
                self._rows[keys[i]] = row
        if not keys:
            return self._compute(query, [])
        return np.vstack([self._rows[k] for k in keys])

    def _compute(self, query: str, texts: Sequence[str]) -> np.ndarray:
        snippets = [self.snippet(query, t) for t in texts]
        blocks: list[np.ndarray] = []
        if self.embedder is not None and (self.use_embedding or self.use_interaction
                                          or self.use_anchors):
            es = self.embed(snippets)
            if self.use_embedding:
                blocks.append(es)
            if self.use_interaction:
                eq = self.embed([query])[0]
                blocks.append(es * eq[None, :])
            if self.use_anchors:
                if self._anchors is None:
                    self._anchors = (self.embed(list(POSITIVE_ANCHORS)),
                                     self.embed(list(NEGATIVE_ANCHORS)))
                pos, neg = self._anchors
                contrast = (es @ pos.T).mean(axis=1) - (es @ neg.T).mean(axis=1)
                blocks.append(contrast[:, None])
        if self.use_cues:
            blocks.append(np.vstack([cue_features(s, t) for s, t in
                                     zip(snippets, texts, strict=True)])
                          if texts else np.zeros((0, 6)))
        return np.hstack(blocks) if blocks else np.zeros((len(texts), 0))


def lexicon_hash() -> str:
    """SHA-256 of the fixed lexicon the features read (stop words, cue patterns, anchors,
    prefix length): a model file written with another lexicon is refused on load."""
    data = json.dumps({"stopwords": sorted(STOPWORDS), "negative": list(NEGATIVE_CUES),
                       "positive": list(POSITIVE_CUES), "pos_anchors": list(POSITIVE_ANCHORS),
                       "neg_anchors": list(NEGATIVE_ANCHORS), "prefix": _PREFIX},
                      ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- model


@dataclass(frozen=True)
class StanceExample:
    """One labelled pair: ``stance`` 1 = the page says the treatment helps, 0 = it does not.
    ``qid`` is the topic (the cross-validation group)."""

    qid: str
    query: str
    text: str
    stance: int
    doc_id: str = ""


@dataclass(frozen=True)
class StanceConfig:
    """The settings a grouped CV chooses: the L2 strength and whether the ``e_q ⊙ e_s`` block
    is used (meaningful only when the featuriser computes it)."""

    l2: float
    interaction: bool = True

    def __post_init__(self) -> None:
        check_positive("l2", self.l2)
        if not isinstance(self.interaction, bool):
            raise ValueError(f"interaction: expected true or false, got {self.interaction!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"l2": float(self.l2), "interaction": self.interaction}


@dataclass
class StanceModel:
    """Featurizer + logistic regression; :meth:`fit` on labelled pairs, :meth:`predict`.

    ``interaction=False`` leaves out the featuriser's ``e_q ⊙ e_s`` block (if it has one)."""

    featurizer: StanceFeaturizer
    l2: float = 10.0
    model: LogisticModel | None = field(default=None, repr=False)
    trained_on: tuple[str, ...] = ()
    interaction: bool = True

    @property
    def config(self) -> StanceConfig:
        return StanceConfig(float(self.l2), bool(self.interaction))

    def columns(self) -> np.ndarray:
        """The featuriser columns this model reads."""
        return self.featurizer.columns(self.interaction)

    def fit(self, examples: Sequence[StanceExample]) -> StanceModel:
        """Fit on ``examples`` (their topics are recorded in ``trained_on``)."""
        if not examples:
            raise ValueError("examples: expected at least one labelled pair; got none")
        x = feature_matrix(self.featurizer, examples)[:, self.columns()]
        y = np.array([e.stance for e in examples], dtype=np.float64)
        self.model = LogisticEstimator(self.l2).fit(x, y).model
        self.trained_on = tuple(sorted({e.qid for e in examples}))
        return self

    def predict(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """``P(stance = 1)`` per page, in [0, 1]; an empty list gives an empty array."""
        if self.model is None:
            raise ValueError("StanceModel.predict: the model is not fitted; call fit() first")
        if len(texts) == 0:
            return np.zeros(0)
        x = self.featurizer.features(query, list(texts))[:, self.columns()]
        p = self.model.predict_proba(x)
        if not np.all(np.isfinite(p)):
            raise ValueError("StanceModel.predict: non-finite probability; the features of "
                             "these texts are not finite")
        return np.clip(p, 0.0, 1.0)


def feature_matrix(featurizer: StanceFeaturizer, examples: Sequence[StanceExample]
                   ) -> np.ndarray:
    """Every feature column of ``examples``, one row per example, in order (rows computed per
    query, so a query's pages are embedded in one call)."""
    by_query: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        by_query.setdefault(e.query, []).append(i)
    width = sum(w for _, w in featurizer.blocks())
    out = np.zeros((len(examples), width))
    for query, idx in by_query.items():
        out[idx] = featurizer.features(query, [examples[i].text for i in idx])
    if not np.all(np.isfinite(out)):
        raise ValueError("stance features: non-finite values; check the embedder")
    return out


# ---------------------------------------------------------------- leave-one-topic-out


def loto_splits(qids: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """Leave-one-topic-out folds: ``(held_out, training topics)`` for every distinct qid, in
    first-seen order; the training list never contains ``held_out``."""
    topics = list(dict.fromkeys(qids))
    for held in topics:
        yield held, [t for t in topics if t != held]


def loto_models(examples: Sequence[StanceExample],
                make_model: Callable[[], StanceModel]) -> dict[str, StanceModel]:
    """One model per topic, fitted on the examples of every *other* topic (LOTO)."""
    out: dict[str, StanceModel] = {}
    for held, train in loto_splits([e.qid for e in examples]):
        keep = set(train)
        out[held] = make_model().fit([e for e in examples if e.qid in keep])
    return out


def loto_report(examples: Sequence[StanceExample], models: dict[str, StanceModel]
                ) -> dict[str, Any]:
    """Held-out stance accuracy (threshold 0.5) and AUC, pooled and per topic: each example is
    scored by the model of its own topic, which never saw that topic. An AUC is ``None`` where
    only one stance occurs (undefined; :func:`~credrank.core.maths.roc_auc`)."""
    ys: list[int] = []
    ps: list[float] = []
    per_topic: dict[str, dict[str, float | None]] = {}
    for qid in dict.fromkeys(e.qid for e in examples):
        ex = [e for e in examples if e.qid == qid]
        model = models[qid]
        if qid in model.trained_on:
            raise ValueError(f"models[{qid!r}] was trained on topic {qid!r}; expected LOTO")
        p = model.predict(ex[0].query, [e.text for e in ex])
        y = [e.stance for e in ex]
        per_topic[qid] = {"n": len(ex), "accuracy": float(np.mean((p >= 0.5) == np.array(y))),
                          "auc": roc_auc(y, p)}
        ys += y
        ps += list(map(float, p))
    y_arr, p_arr = np.array(ys), np.array(ps)
    return {"n": len(ys),
            "accuracy": float(np.mean((p_arr >= 0.5) == y_arr)) if ys else 0.0,
            "auc": roc_auc(y_arr, p_arr), "per_topic": per_topic}


# ---------------------------------------------------------------- grouped cross-validation

#: leave-one-topic-out up to this many topics, K-fold by topics above (core.folds)
MAX_LOGO_TOPICS = MAX_LOGO_GROUPS
#: L2 strengths the nested CV chooses from
L2_GRID: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0)


def default_configs(featurizer: StanceFeaturizer, l2_grid: Sequence[float] = L2_GRID
                    ) -> list[StanceConfig]:
    """Every L2 of ``l2_grid`` without the ``e_q ⊙ e_s`` block, then (when the featuriser
    computes it) with it; the simpler configurations come first and win ties."""
    if not l2_grid:
        raise ValueError("l2_grid: expected at least one L2 strength")
    has = any(name == "interaction" for name, _ in featurizer.blocks())
    return [StanceConfig(float(l2), inter) for inter in ((False, True) if has else (False,))
            for l2 in l2_grid]


def grouped_data(examples: Sequence[StanceExample], featurizer: StanceFeaturizer
                 ) -> GroupedData:
    """The pairs as :class:`~credrank.learn.cv.GroupedData`: one item per pair, grouped by
    its topic, every feature column computed once (:func:`feature_matrix`)."""
    examples = list(examples)
    return GroupedData.from_rows([e.qid for e in examples], [e.stance for e in examples],
                                 ids=[e.doc_id for e in examples],
                                 x=feature_matrix(featurizer, examples))


def learner(featurizer: StanceFeaturizer) -> Learner:
    """A configuration's columns (with or without ``e_q ⊙ e_s``) and its logistic estimator."""
    return Learner(columns=lambda config: featurizer.columns(config.interaction))


def _model(featurizer: StanceFeaturizer, data: GroupedData, fitted: Fitted) -> StanceModel:
    config = fitted.config
    return StanceModel(featurizer, l2=config.l2, model=getattr(fitted.estimator, "model", None),
                       trained_on=tuple(sorted({g for i in fitted.rows
                                                for g in data.groups_of(int(i))})),
                       interaction=config.interaction)


def out_of_fold(examples: Sequence[StanceExample], folds: Sequence[Sequence[str]],
                models: Sequence[StanceModel]) -> OutOfFold:
    """Every pair of each fold's topics, scored by that fold's model, which must not have
    been trained on any topic of the fold (``ValueError`` naming the fold and topics)."""
    if not models:
        raise ValueError("models: expected one per fold; got none")
    if len(folds) != len(models):
        raise ValueError(f"models: expected {len(folds)} (one per fold), got {len(models)}")
    for i, (fold, model) in enumerate(zip(folds, models, strict=True)):
        seen = sorted(set(fold) & set(model.trained_on))
        if seen:
            raise ValueError(f"the model of fold {i} ({list(fold)}) was trained on topic(s) "
                             f"{seen}; expected out-of-fold scoring")
    data = grouped_data(examples, models[0].featurizer)

    def scorer(model: StanceModel) -> Any:
        def predict(items: np.ndarray) -> np.ndarray:
            assert model.model is not None
            return np.clip(model.model.predict_proba(data.x[items][:, model.columns()]),
                           0.0, 1.0)
        return predict

    return learn_cv.out_of_fold(data, folds, [scorer(m) for m in models])


def choose_config(examples: Sequence[StanceExample], featurizer: StanceFeaturizer,
                  configs: Sequence[StanceConfig], folds: Sequence[Sequence[str]],
                  exclude: Sequence[str] = (), *, n_jobs: int = 1,
                  on_progress: Progress | None = None) -> ConfigChoice:
    """Grouped CV over ``folds`` (never training on a topic of ``exclude``) for each
    configuration; the lowest pooled out-of-fold log loss wins (ties: the first)."""
    if not configs:
        raise ValueError("configs: expected at least one configuration")
    return learn_cv.choose_config(grouped_data(examples, featurizer), learner(featurizer),
                                  configs, folds, LOWEST_LOG_LOSS, exclude=exclude,
                                  n_jobs=n_jobs, on_progress=on_progress)


@dataclass
class StanceCV:
    """What :func:`grouped_cross_validation` found (module docstring)."""

    oof: OutOfFold
    folds: list[tuple[str, ...]]
    fold_configs: list[dict[str, Any]]
    intervals: dict[str, Any]
    n_boot: int
    seed: int
    final: ConfigChoice
    model: StanceModel
    n_topics: int
    nested: NestedCV | None = field(default=None, repr=False)

    def metrics(self) -> dict[str, Any]:
        """The JSON summary (``credrank stance fit --json``, the model file's metrics)."""
        acc, auc = self.intervals["accuracy"], self.intervals["auc"]
        return {
            "cv": ("leave-one-topic-out" if all(len(f) == 1 for f in self.folds)
                   else f"{len(self.folds)}-fold by topics"),
            "n_folds": len(self.folds), "n_pairs": len(self.oof.y), "n_topics": self.n_topics,
            "cv_accuracy": self.oof.accuracy(),
            "cv_accuracy_interval": list(acc) if acc else None,
            "cv_auc": self.oof.auc(),
            "cv_auc_interval": list(auc) if auc else None,
            "cv_log_loss": log_loss(self.oof.y, self.oof.p) if len(self.oof.y) else None,
            "helps_share": float(self.oof.y.mean()) if len(self.oof.y) else None,
            "interval": f"95% percentile bootstrap over topics ({self.n_boot} resamples, "
                        f"seed {self.seed}; {self.intervals['n_boot_auc']} with both classes "
                        "for the AUC)",
            "selection": "nested grouped CV, lowest pooled out-of-fold log loss",
            "fold_configs": self.fold_configs,
            "config_scores": self.final.scores,
            "chosen_config": self.final.config.to_dict(),
        }

    def provenance(self) -> dict[str, Any]:
        """The model file's ``provenance`` (:mod:`credrank.learn.modelfile`)."""
        if self.nested is None:
            raise ValueError("provenance: this cross-validation kept no record of its run")
        return self.nested.provenance("topic")


def grouped_cross_validation(examples: Sequence[StanceExample], featurizer: StanceFeaturizer,
                             configs: Sequence[StanceConfig] | None = None, *, seed: int = 0,
                             n_boot: int = N_BOOT, max_logo: int = MAX_LOGO_TOPICS,
                             k: int = N_FOLDS, n_jobs: int = 1,
                             on_progress: Progress | None = None) -> StanceCV:
    """Nested grouped CV, bootstrap intervals over topics and the final refit on every pair
    (module docstring), by :func:`credrank.learn.cv.nested_cross_validation`. Needs at least
    3 topics and both stances among the pairs. ``n_jobs``: processes for the fits (the same
    numbers for any value); ``on_progress(done, total)`` after every fit."""
    if not examples:
        raise ValueError("pairs: expected labelled pairs; got none")
    stances = sorted({int(e.stance) for e in examples})
    if not set(stances) <= {0, 1}:
        raise ValueError(f"stance: expected 0 or 1, got values {stances}")
    if len(stances) < 2:
        raise ValueError(f"pairs: every usable pair has stance {stances[0]}; a stance model "
                         "needs pairs of both stances (0 = does not help, 1 = helps)")
    topics = list(dict.fromkeys(e.qid for e in examples))
    if len(topics) < 3:
        raise ValueError(f"grouped cross-validation needs at least 3 topics; got {len(topics)}"
                         f" ({', '.join(topics)})")
    configs = list(configs) if configs is not None else default_configs(featurizer)
    if not configs:
        raise ValueError("configs: expected at least one configuration")
    data = grouped_data(examples, featurizer)
    cv = learn_cv.nested_cross_validation(data, learner(featurizer), configs, LOWEST_LOG_LOSS,
                                          seed=seed, n_boot=n_boot, max_logo=max_logo, k=k,
                                          statistics=("accuracy", "auc"), n_jobs=n_jobs,
                                          on_progress=on_progress)
    intervals = {"accuracy": cv.intervals["accuracy"].bounds,
                 "auc": cv.intervals["auc"].bounds, "n_boot_auc": cv.intervals["auc"].n_defined}
    return StanceCV(oof=cv.oof, folds=cv.folds, fold_configs=cv.fold_configs("topics"),
                    intervals=intervals, n_boot=n_boot, seed=seed, final=cv.final,
                    model=_model(featurizer, data, cv.model), n_topics=len(topics), nested=cv)
