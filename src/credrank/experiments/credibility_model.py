"""An estimated page-credibility prior: ``P(page is credible)`` from its text and URL.

Where no rule or table knows a page's source (on TREC 2019 HM, 150 of 156 pages come from
long-tail hosts that the URL typer calls ``unknown``), a *page-level* credibility estimate has
to come from the page itself. This module learns one from labelled pages of **other** topics
(NIST's 0/1 credibility judgements on TREC) and turns it into a pipeline factor.

**Features** (:class:`CredibilityFeaturizer`), three groups, all fixed a priori:

* ``cues`` — page-quality cues from the text: ``log(1 + words)``, the share of digits among
  characters, of upper-case letters among letters and of non-ASCII characters, ``log`` of the
  mean sentence length, and, for each cue group of :data:`CUE_GROUPS` (commerce, phone numbers,
  testimonials, hype, science, authority, disclaimers, ads, user content), the rate
  ``log(1 + 1000 · count / words)`` of non-overlapping matches (case-insensitive);
* ``url`` — the top-level domain one-hot over :data:`TLDS` (else ``other``), the path depth,
  ``log(1 + len(url))``, a hyphen or a digit in the host, the number of sub-domain labels, a
  query string or a script extension (``.php .asp .aspx .cfm .cgi .jsp``), and a ``no url``
  flag (a missing URL zeroes the other URL features);
* ``embedding`` — the embedder's vector (MiniLM in experiments) of the page's first
  ``head_words`` words (default 200; MiniLM reads at most 256 word pieces anyway).

**Classifier**: :func:`~credrank.experiments.stance.fit_logistic` (L2 logistic regression on
standardised features, deterministic L-BFGS).

**Leave-one-topic-out** (:func:`training_set`, :func:`loto_credibility_models`): the model used
for topic ``t`` is fitted on every page that was judged for *none* of the excluded topics
(``t``, and in nested loops also the inner held-out topic). A page judged for two topics
appears once (one :class:`CredibilityExample` per doc id, with one label per topic); when it is
judged for ``t`` it is out of ``t``'s training set, whatever its other judgements. A training
page's label is the majority of its per-topic credibility labels (all from non-excluded topics
by construction); a tie is dropped (declared). Model *configuration* (feature groups and L2
strength) is either fixed by the caller or chosen per evaluated topic by **nested LOTO**
(:func:`nested_config_choice`) on the held-out AUC of the other topics' pages; no retrieval
metric is ever read.

**Prior** (:class:`LearnedCredibilityPrior`): ``λ = floor + (1 − floor) · p`` with
``p = P(credible)``, so ``λ ∈ [floor, 1]``; a page the model is sure is not credible is
demoted by at most ``floor`` (default 0.3, the NIST reference prior's value for non-credible
pages), never removed.

**Limits.** About 90–150 labelled pages per fold; NIST credibility is a judgement of the page
as a whole (it says nothing about whether the page's claim is correct), it is noisy and topic
dependent; the cue lists are English and hand-written before any fit; a prior learnt on
2012 ClueWeb health pages does not transfer to other corpora without refitting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.embedder import Embedder
from credrank.core.maths import roc_auc
from credrank.core.pipeline import Stage
from credrank.core.validation import check_int, check_probability
from credrank.experiments.stance import LogisticModel, fit_logistic, text_key

# ---------------------------------------------------------------- features

#: cue groups of the ``cues`` feature block (fixed a priori, never tuned on data)
CUE_GROUPS: dict[str, tuple[str, ...]] = {
    "commerce": (r"\bbuy\b", r"order now", r"\bprices?\b", r"\$\s?\d", r"add to cart",
                 r"shopping cart", r"\bcart\b", r"free shipping", r"\bdiscount", r"\bcoupon",
                 r"money[- ]back", r"\bguaranteed?\b", r"\bproducts?\b", r"\bsale\b"),
    "phone": (r"\(?\b\d{3}\)?[-. ]\d{3}[-. ]\d{4}\b", r"\b1-800\b", r"toll[- ]free",
              r"call (?:us|now|today)"),
    "testimonial": (r"testimonial", r"\bi tried\b", r"my story", r"changed my life",
                    r"success stor"),
    "hype": (r"miracle", r"\bcures?\b", r"amazing", r"\bsecrets?\b", r"natural remed",
             r"\bdetox", r"100\s?%", r"breakthrough", r"!"),
    "science": (r"\bet al\b", r"\bdoi\b", r"\bjournal", r"\bstud(?:y|ies)\b", r"clinical trial",
                r"randomi[sz]ed", r"pubmed|medline", r"meta-analys", r"systematic review",
                r"\breferences?\b", r"bibliography", r"\bcitations?\b", r"\bevidence\b"),
    "authority": (r"\.gov\b", r"\.edu\b", r"\bm\.?d\.?\b", r"\bph\.?d\.?\b", r"reviewed by",
                  r"medical review", r"\buniversity\b", r"\bhospital\b", r"\binstitute\b",
                  r"\bnational\b", r"\bassociation\b", r"\bsociety\b", r"\bcenters? for\b"),
    "disclaimer": (r"disclaimer", r"not intended to", r"consult (?:your|a) (?:doctor|physician)",
                   r"medical advice", r"privacy policy", r"copyright|\u00a9",
                   r"all rights reserved"),
    "ads": (r"advertis", r"\bsponsor", r"\bads?\b", r"affiliate"),
    "user_content": (r"\bforums?\b", r"posted by", r"\breply\b", r"\bcomments?\b", r"\blog ?in\b",
                     r"\bregister\b", r"\bmembers?\b", r"\bblog\b"),
}
_CUE_RES = {g: re.compile("|".join(f"(?:{p})" for p in ps), re.IGNORECASE)
            for g, ps in CUE_GROUPS.items()}
#: top-level domains with their own one-hot column (others go to ``other``)
TLDS: tuple[str, ...] = ("com", "org", "net", "gov", "edu", "uk", "ca", "au")
_SCRIPT_EXT = (".php", ".asp", ".aspx", ".cfm", ".cgi", ".jsp")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
GROUPS: tuple[str, ...] = ("cues", "url", "embedding")

CUE_NAMES: tuple[str, ...] = ("log_words", "digit_share", "upper_share", "non_ascii_share",
                              "log_mean_sentence_words",
                              *(f"rate_{g}" for g in CUE_GROUPS))
URL_NAMES: tuple[str, ...] = (*(f"tld_{t}" for t in TLDS), "tld_other", "path_depth",
                              "log_url_length", "host_hyphen", "host_digit", "subdomains",
                              "dynamic", "no_url")


def cue_features(text: str) -> np.ndarray:
    """The ``cues`` block of one page (:data:`CUE_NAMES`, in order)."""
    if not isinstance(text, str):
        raise ValueError(f"text: expected a string, got {type(text).__name__}")
    words = len(text.split())
    chars = max(len(text), 1)
    letters = sum(1 for c in text if c.isalpha())
    upper = sum(1 for c in text if c.isupper())
    digits = sum(1 for c in text if c.isdigit())
    non_ascii = sum(1 for c in text if ord(c) > 127)
    sentences = [s for s in _SENT_SPLIT.split(text) if s.strip()]
    mean_sentence = words / max(len(sentences), 1)
    out = [math.log1p(words), digits / chars, upper / max(letters, 1), non_ascii / chars,
           math.log1p(mean_sentence)]
    for regex in _CUE_RES.values():
        out.append(math.log1p(1000.0 * len(regex.findall(text)) / max(words, 1)))
    return np.asarray(out, dtype=np.float64)


def url_features(url: str | None) -> np.ndarray:
    """The ``url`` block of one page (:data:`URL_NAMES`, in order); ``None`` or an empty URL
    gives zeros with ``no_url = 1``."""
    out = np.zeros(len(URL_NAMES))
    if url is None or not str(url).strip():
        out[-1] = 1.0
        return out
    url = str(url).strip()
    parts = urlsplit(url if "//" in url else "//" + url)
    host = (parts.hostname or "").lower()
    labels = [x for x in host.split(".") if x]
    tld = labels[-1] if labels else ""
    out[TLDS.index(tld) if tld in TLDS else len(TLDS)] = 1.0
    base = len(TLDS) + 1
    path = parts.path or ""
    out[base] = float(len([p for p in path.split("/") if p]))
    out[base + 1] = math.log1p(len(url))
    out[base + 2] = float("-" in host)
    out[base + 3] = float(any(c.isdigit() for c in host))
    core = labels[1:] if labels[:1] == ["www"] else labels
    out[base + 4] = float(max(len(core) - 2, 0))
    out[base + 5] = float(bool(parts.query) or path.lower().endswith(_SCRIPT_EXT))
    return out


def head(text: str, words: int) -> str:
    """The first ``words`` white-space separated words of ``text``, joined by single spaces."""
    return " ".join(text.split()[:words])


class CredibilityFeaturizer:
    """Feature rows ``[cues | url | embedding]`` for ``(text, url)`` pairs (module docstring).

    ``embedder`` is any :class:`~credrank.index.embed.Embedder` (MiniLM in experiments, the
    hashing embedder in tests) or ``None``, in which case the ``embedding`` group is absent.
    Rows are cached in memory by ``(hash of text, url)``, so a page shared by many folds is
    featurised (and embedded) once.
    """

    def __init__(self, embedder: Embedder | None, *, head_words: int = 200):
        check_int("head_words", head_words, 1)
        self.embedder = embedder
        self.head_words = head_words
        dim = int(getattr(embedder, "dim", 0)) if embedder is not None else 0
        n_cue, n_url = len(CUE_NAMES), len(URL_NAMES)
        self.slices: dict[str, slice] = {"cues": slice(0, n_cue),
                                         "url": slice(n_cue, n_cue + n_url)}
        if embedder is not None:
            self.slices["embedding"] = slice(n_cue + n_url, n_cue + n_url + dim)
        self.width = n_cue + n_url + dim
        self._rows: dict[tuple[str, str | None], np.ndarray] = {}

    @property
    def groups(self) -> tuple[str, ...]:
        """The feature groups this featuriser can produce."""
        return tuple(self.slices)

    def config(self) -> dict[str, Any]:
        return {"embedder": getattr(self.embedder, "name", None), "head_words": self.head_words,
                "groups": list(self.groups), "cues": list(CUE_NAMES), "url": list(URL_NAMES)}

    def columns(self, groups: Iterable[str]) -> np.ndarray:
        """Column indices of ``groups`` (in :data:`GROUPS` order)."""
        groups = set(groups)
        unknown = groups - set(GROUPS)
        if unknown or not groups:
            raise ValueError(f"groups: expected a non-empty subset of {', '.join(GROUPS)}; "
                             f"got {sorted(groups)}")
        missing = groups - set(self.slices)
        if missing:
            raise ValueError(f"groups: {sorted(missing)} need an embedder; this featuriser "
                             "has none")
        return np.concatenate([np.arange(self.width)[self.slices[g]]
                               for g in GROUPS if g in groups])

    def features(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray:
        """All feature columns, one row per page, shape ``(len(texts), width)``."""
        if len(texts) != len(urls):
            raise ValueError(f"urls: expected {len(texts)} values (one per text); "
                             f"got {len(urls)}")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"texts[{i}]: expected a string (the page text), got "
                                 f"{type(t).__name__}")
        keys = [(text_key(t), None if u is None else str(u)) for t, u in zip(texts, urls,
                                                                           strict=True)]
        todo = list(dict.fromkeys(k for k in keys if k not in self._rows))
        if todo:
            first = {k: (t, u) for k, t, u in zip(keys, texts, urls, strict=True)}
            pages = [first[k] for k in todo]
            hand = [np.concatenate([cue_features(t), url_features(u)]) for t, u in pages]
            if self.embedder is not None:
                emb = np.asarray(self.embedder.embed([head(t, self.head_words)
                                                      for t, _ in pages]), dtype=np.float64)
                hand = [np.concatenate([h, e]) for h, e in zip(hand, emb, strict=True)]
            for k, row in zip(todo, hand, strict=True):
                self._rows[k] = row
        if not keys:
            return np.zeros((0, self.width))
        return np.vstack([self._rows[k] for k in keys])


# ---------------------------------------------------------------- model


@dataclass(frozen=True)
class CredibilityExample:
    """One page (one doc id) with its credibility label per judging topic (0/1)."""

    doc_id: str
    text: str
    url: str | None
    labels: Mapping[str, int]

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
        return {"groups": list(self.groups), "l2": self.l2}


#: nested-LOTO grid of the credibility model (feature groups × L2), fixed a priori
DEFAULT_CONFIGS: tuple[Config, ...] = tuple(
    Config(g, l2) for g in (("cues", "url"), ("embedding",), ("cues", "url", "embedding"))
    for l2 in (10.0, 100.0, 1000.0))


@dataclass
class CredibilityModel:
    """Featuriser + logistic regression on the columns of ``config.groups``.

    ``trained_on`` holds the doc ids of the training pages and ``excluded`` the topics whose
    pages were kept out (for audit and for the LOTO tests).
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
        x = self._x([e.text for e in train], [e.url for e in train])
        self.model = fit_logistic(x, y, self.config.l2)
        self.trained_on = tuple(e.doc_id for e in train)
        self.excluded = exclude
        return self

    def _x(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray:
        cols = self.featurizer.columns(self.config.groups)
        return self.featurizer.features(texts, urls)[:, cols]

    def predict(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray:
        """``P(credible)`` per page in ``[0, 1]``; an empty list gives an empty array."""
        if self.model is None:
            raise ValueError("CredibilityModel.predict: the model is not fitted; call fit()")
        if len(texts) == 0:
            return np.zeros(0)
        p = self.model.predict_proba(self._x(list(texts), list(urls)))
        if not np.all(np.isfinite(p)):
            raise ValueError("CredibilityModel.predict: non-finite probability")
        return np.clip(p, 0.0, 1.0)

    def __call__(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray:
        return self.predict(texts, urls)


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
    """Every judging topic, in first-seen order."""
    return list(dict.fromkeys(t for e in examples for t in e.labels))


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
    """Per outer topic ``t``: the configuration with the highest pooled held-out AUC over the
    other topics ``u``, each ``u`` scored by a model fitted on pages judged for neither ``t``
    nor ``u`` (ties: the first configuration; only credibility labels of topics other than
    ``t`` are read). A configuration whose pooled AUC is undefined (one class only,
    :func:`~credrank.core.maths.roc_auc` gives ``None``) cannot win; if none is defined the
    first configuration is used with ``inner_auc = None``. Returns
    ``{t: {"config": Config, "inner_auc": float | None}}``."""
    if not configs:
        raise ValueError("configs: expected at least one configuration")
    available = [c for c in configs if set(c.groups) <= set(featurizer.groups)]
    if not available:
        raise ValueError(f"configs: none usable with feature groups {featurizer.groups}")
    topics = topics_of(examples)
    if len(topics) < 3:
        raise ValueError(f"nested LOTO needs at least 3 topics; got {len(topics)}")
    out: dict[str, dict[str, Any]] = {}
    for outer in topics:
        best: tuple[float, Config] | None = None
        for config in available:
            inner = loto_credibility_models(examples, featurizer, config, exclude=[outer])
            _, y, p = held_out(examples, inner)
            value = roc_auc(y, p)
            if value is not None and (best is None or value > best[0] + 1e-12):
                best = (value, config)
        out[outer] = ({"config": available[0], "inner_auc": None} if best is None else
                      {"config": best[1], "inner_auc": best[0]})
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


# ---------------------------------------------------------------- pipeline stage


class CredibilityFn(Protocol):
    def __call__(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray: ...


class LearnedCredibilityPrior(Stage):
    """Adds the factor ``name`` (default ``prior``) ``λ = floor + (1 − floor) · p``, with
    ``p = P(credible)`` of each candidate from its meta columns ``text`` and ``url``.

    Args:
        model_or_callable: a fitted :class:`CredibilityModel`, or any callable
            ``(texts, urls) -> p`` returning one probability in ``[0, 1]`` per page.
        name: the factor name; ``prior`` lets :class:`AnswerAgreement` use ``λ`` as the
            credibility of its vote weight ``w = λ · sim``.
        floor: the smallest factor, in ``[0, 1]`` (``λ ∈ [floor, 1]``).

    A candidate without text raises :class:`~credrank.core.candidates.StageError` (the model needs
    it); a missing URL is allowed (its URL features are zero, ``no_url = 1``). ``p`` goes to
    the meta column ``p_credible`` and a summary to ``info["credibility_prior"]``.
    """

    def __init__(self, model_or_callable: CredibilityModel | CredibilityFn | Callable[..., Any],
                 name: str = "prior", floor: float = 0.3):
        if not callable(model_or_callable):
            raise ValueError("model_or_callable: expected a CredibilityModel or a callable "
                             f"(texts, urls) -> p; got {type(model_or_callable).__name__}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        self.model = model_or_callable
        self.name = name
        self.floor = check_probability("floor", floor)

    def transform(self, batch: Candidates) -> Candidates:
        if len(batch) == 0:
            out = batch.with_factor(self.name, np.zeros(0), low=0.0, high=1.0)
            return out.with_info(credibility_prior={"floor": self.floor, "n": 0})
        texts = batch.column("text")
        missing = [str(d) for d, t in zip(batch.doc_ids, texts, strict=True)
                   if not isinstance(t, str)]
        if missing:
            raise StageError(f"LearnedCredibilityPrior needs document text; {len(missing)} "
                             f"candidates have none (e.g. {missing[0]!r}): fill the meta "
                             "column 'text' (retrieve with with_text=True)")
        urls = [None if u is None else str(u) for u in batch.column("url")]
        p = np.asarray(self.model([str(t) for t in texts], urls),
                       dtype=np.float64).reshape(-1)
        if len(p) != len(batch):
            raise StageError(f"credibility model returned {len(p)} probabilities; expected "
                             f"{len(batch)} (one per candidate)")
        if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
            raise StageError("credibility model: expected finite probabilities in [0, 1]; got "
                             f"range [{np.nanmin(p):.6g}, {np.nanmax(p):.6g}]")
        lam = np.clip(self.floor + (1.0 - self.floor) * p, self.floor, 1.0)
        out = batch.with_factor(self.name, lam, low=0.0, high=1.0).with_meta(
            "p_credible", list(p))
        return out.with_info(credibility_prior={"floor": self.floor, "n": len(p),
                                                "mean_p": float(p.mean())})

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"floor": self.floor}
        if isinstance(self.model, CredibilityModel):
            cfg["model"] = self.model.config.to_dict()
            cfg["excluded_topics"] = list(self.model.excluded)
        return cfg
