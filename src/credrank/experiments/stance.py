"""A small stance model: P(a document says the treatment in the query helps).

Used by :class:`credrank.signals.agreement.AnswerAgreement` as the per-document *answer* of a
yes/no health question (chapter 35.3 takes answers from source-specific generations; here the
answer is read from each retrieved page by a classifier). It is trained on labelled
``(query, document, stance)`` pairs of *other* topics only: :func:`loto_splits` gives the
leave-one-topic-out folds, and nothing in this module ever sees the evaluated topic's labels.

**Features** (:class:`StanceFeaturizer`), for a query ``q`` and a page ``d``:

* *query-focused snippet*: the page is split into sentences (:func:`split_sentences`); the
  ``k`` sentences that contain the most distinct query content terms (:func:`query_terms`,
  matched on 5-letter prefixes; ties by position) are joined in page order. Pages are long
  (median ≈ 5,000 characters) and MiniLM reads 256 word pieces, so the snippet, not the page
  head, is what carries the page's claim about the treatment;
* ``e_s``: the MiniLM embedding of the snippet (384 values) and, optionally, ``e_q ⊙ e_s``
  (the query embedding times the snippet embedding, element-wise);
* *anchor contrast*: ``mean_a cos(e_s, a⁺) − mean_a cos(e_s, a⁻)`` over a few fixed statements
  of efficacy (``a⁺``) and of no efficacy (``a⁻``), :data:`POSITIVE_ANCHORS` /
  :data:`NEGATIVE_ANCHORS`;
* *lexical cues*: counts of efficacy and negation phrases (:data:`POSITIVE_CUES`,
  :data:`NEGATIVE_CUES`) in the snippet sentences and in the whole page, as
  ``log(1 + count)`` and as the balance ``(pos − neg) / (pos + neg + 1)``.

**Classifier**: L2-regularised logistic regression (:func:`fit_logistic`), features
standardised on the training rows, fitted by L-BFGS from a zero start (deterministic).

**Limits.** About 140 training pairs per fold; MiniLM is not trained for negation, so
"traction is not effective" and "traction is effective" embed close together; the lexical cues
are an English health-domain list. The stance says what a page claims, not whether it is true.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from credrank.core.embedder import Embedder
from credrank.core.maths import roc_auc
from credrank.core.validation import as_matrix, check_int, check_positive
from credrank.index.embed import CachedEmbedder

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


# ---------------------------------------------------------------- logistic regression


@dataclass(frozen=True)
class LogisticModel:
    """A fitted logistic regression on standardised features:
    ``P(y = 1 | x) = σ(b + w · (x − μ) / s)``."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray
    l2: float

    def decision(self, x: np.ndarray) -> np.ndarray:
        """``b + w · (x − μ) / s`` per row."""
        x = _check_matrix(x, "x", len(self.weights))
        return self.bias + ((x - self.mean) / self.scale) @ self.weights

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``σ(decision(x))``, computed without overflow."""
        return _sigmoid(self.decision(x))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _check_matrix(x: Any, name: str, columns: int | None = None) -> np.ndarray:
    arr = as_matrix(name, x)
    if columns is not None and arr.shape[1] != columns:
        raise ValueError(f"{name}: expected {columns} feature columns; got {arr.shape[1]}")
    return arr


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, *,
                 max_iter: int = 500) -> LogisticModel:
    """L2-regularised logistic regression, fitted by L-BFGS-B from ``w = 0, b = 0``.

    Features are standardised with the training mean ``μ`` and standard deviation ``s``
    (a constant column gets ``s = 1``, so it contributes nothing). The objective is

    ``L(w, b) = (1/n) Σ_i [log(1 + e^{z_i}) − y_i z_i] + (l2 / 2n) ‖w‖²``,
    ``z_i = b + w · (x_i − μ) / s``; the intercept is not penalised.

    A single-class ``y`` is allowed: the intercept then moves towards that class, held back
    only by L-BFGS's stopping rule (predictions stay finite). Deterministic: same input, same
    model.
    """
    x = _check_matrix(x, "x")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if len(y) != len(x):
        raise ValueError(f"y: expected {len(x)} labels (one per row of x); got {len(y)}")
    if len(y) == 0:
        raise ValueError("x, y: expected at least one training row; got 0")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y: expected labels 0 or 1")
    l2 = check_positive("l2", l2)
    n, dim = x.shape
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    xs = (x - mean) / scale

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:dim], theta[dim]
        z = b + xs @ w
        loss = float(np.sum(np.logaddexp(0.0, z) - y * z)) / n + 0.5 * l2 * float(w @ w) / n
        r = (_sigmoid(z) - y) / n
        grad = np.empty(dim + 1)
        grad[:dim] = xs.T @ r + l2 * w / n
        grad[dim] = r.sum()
        return loss, grad

    res = minimize(objective, np.zeros(dim + 1), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter})
    theta = np.asarray(res.x, dtype=np.float64)
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"fit_logistic: the optimiser returned non-finite weights "
                         f"({res.message}); check the features for extreme values")
    return LogisticModel(weights=theta[:dim].copy(), bias=float(theta[dim]), mean=mean,
                         scale=scale, l2=float(l2))


# ---------------------------------------------------------------- features


class StanceFeaturizer:
    """Feature vectors for ``(query, page)`` pairs (see the module docstring).

    ``embedder`` is any :class:`~credrank.index.embed.Embedder` (MiniLM in experiments, the
    hashing embedder in tests) or ``None`` for lexical features only. Embeddings go through a
    :class:`~credrank.index.embed.CachedEmbedder` (the given one, or one wrapped around the
    embedder), so a snippet shared by several folds is encoded once; feature rows are cached
    in memory by ``(query, hash of the page)``.
    """

    def __init__(self, embedder: Embedder | None, *, k_sentences: int = 3,
                 max_words: int = 60, use_embedding: bool = True,
                 use_interaction: bool = True, use_anchors: bool = True,
                 use_cues: bool = True):
        check_int("k_sentences", k_sentences, 1)
        needs_model = use_embedding or use_interaction or use_anchors
        if embedder is None and needs_model:
            raise ValueError("embedder: None, but use_embedding/use_interaction/use_anchors "
                             "need one; pass an embedder or switch them off")
        if not (needs_model or use_cues):
            raise ValueError("StanceFeaturizer: every feature group is switched off")
        self.embedder: CachedEmbedder | None = (
            None if embedder is None else
            embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder))
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

        Rows are cached in memory by ``(query, hash of the page)``."""
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
                pos = self.embed(list(POSITIVE_ANCHORS))
                neg = self.embed(list(NEGATIVE_ANCHORS))
                contrast = (es @ pos.T).mean(axis=1) - (es @ neg.T).mean(axis=1)
                blocks.append(contrast[:, None])
        if self.use_cues:
            blocks.append(np.vstack([cue_features(s, t) for s, t in
                                     zip(snippets, texts, strict=True)])
                          if texts else np.zeros((0, 6)))
        return np.hstack(blocks) if blocks else np.zeros((len(texts), 0))


def text_key(text: str) -> str:
    """A short hash of ``text`` (the key of the feature-row caches)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


# ---------------------------------------------------------------- model and folds


@dataclass(frozen=True)
class StanceExample:
    """One labelled pair: ``stance`` 1 = the page says the treatment helps, 0 = it does not."""

    qid: str
    query: str
    text: str
    stance: int
    doc_id: str = ""


@dataclass
class StanceModel:
    """Featurizer + logistic regression; :meth:`fit` on labelled pairs, :meth:`predict`."""

    featurizer: StanceFeaturizer
    l2: float = 10.0
    model: LogisticModel | None = field(default=None, repr=False)
    trained_on: tuple[str, ...] = ()

    def fit(self, examples: Sequence[StanceExample]) -> StanceModel:
        """Fit on ``examples`` (their topics are recorded in ``trained_on``)."""
        if not examples:
            raise ValueError("examples: expected at least one labelled pair; got none")
        x = self._matrix(examples)
        y = np.array([e.stance for e in examples], dtype=np.float64)
        self.model = fit_logistic(x, y, self.l2)
        self.trained_on = tuple(sorted({e.qid for e in examples}))
        return self

    def _matrix(self, examples: Sequence[StanceExample]) -> np.ndarray:
        by_query: dict[str, list[int]] = {}
        for i, e in enumerate(examples):
            by_query.setdefault(e.query, []).append(i)
        out: list[np.ndarray | None] = [None] * len(examples)
        for query, idx in by_query.items():
            feats = self.featurizer.features(query, [examples[i].text for i in idx])
            for i, row in zip(idx, feats, strict=True):
                out[i] = row
        rows = [r for r in out if r is not None]
        return np.vstack(rows)

    def predict(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """``P(stance = 1)`` per page, in (0, 1); an empty list gives an empty array."""
        if self.model is None:
            raise ValueError("StanceModel.predict: the model is not fitted; call fit() first")
        if len(texts) == 0:
            return np.zeros(0)
        p = self.model.predict_proba(self.featurizer.features(query, list(texts)))
        if not np.all(np.isfinite(p)):
            raise ValueError("StanceModel.predict: non-finite probability; the features of "
                             "these texts are not finite")
        return np.clip(p, 0.0, 1.0)


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
