"""Does a learned page-credibility model transfer? Leave-one-dataset-out (issue 25, item 3).

For every set of the shared data with labelled fakes (or labelled page credibility), a model is
fitted on the union of the *other* sets and scores the held-out one; its AUC and, where the
set has per-question pools, its harmful@1 are set beside the in-domain estimate (nested
grouped CV inside the set) and beside the models of each other set alone (single-source
transfer). ``python -m credrank_bench.experiments.credibility_transfer --data ../shared/data --out
DIR [--cache DIR]`` prints the table and writes ``DIR/report.md`` and ``DIR/result.json``
(numbers only, no data). The product recipe is ``credrank credibility fit A.csv B.csv …
[--leave-one-set-out]``: the user's own labelled sets, each its own group namespace.

**Sets** (:data:`SETS`, :func:`load_sets`; SOURCES.md of the shared data). Every page is one
judgement ``(group, label)`` with ``label = 1`` credible, ``0`` not:

* ``cram-nq`` — 1,000 NQ questions × (4 Wikipedia passages + 1 GPT fake); group = question.
  About 80% of the fakes open with a spoofed "CNN news:", which the model may learn (kept:
  it is what the set is).
* ``newspolluted`` — real news snippet vs 3 LLM fakes per question; the leaked
  "Low credibility of text:" label is stripped by the reader before anything reads a text.
* ``evotemp`` — 7 documents per time-sensitive question, ``cred`` high/low (CAG's
  low-credibility *or outdated* documents: a label about time as much as about truth);
  group = question.
* ``ramdocs`` — ``correct`` (1) vs ``misinfo`` (0) documents per ambiguous question; ``noise``
  documents (off-topic, not false) carry no credibility label and are left out of training and
  AUC (they stay in the retrieval corpus of harmful@1).
* ``poisonedrag`` — the 5 adversarial texts of each of 100 NQ targets (0) against the real
  Wikipedia passages retrieved with them (1) from the PoisonedRAG bench's corpus (CrAM NQ's
  real passages + the poisons,
  :func:`~credrank_bench.datasets.poisonedrag.poisoned_corpus`); group = target question; its
  pages = the target's own poisons and every document of its top ``fetch_k`` pool.
* ``trec2019-hm`` — 156 real web pages with NIST's 0/1 credibility per topic (the only set with
  URLs besides CoAID); group = topic.
* ``coaid`` — COVID-19 news items, real (1) vs fake (0); group = the registered domain of the
  URL (labels follow the site, so a group is a site: the model must judge unseen sites).

Left out (:data:`LEFT_OUT`): LIAR (one-sentence political claims with a 6-level truth label —
a claim-verification set, not pages; its credit-history columns leak the label; SOURCES.md's
intended use is speaker and venue reliability), RealTimeQA (no credibility labels),
Golden-Gaze hosts (a stance model's predictions, not labels), the domain ratings (domains, not
pages).

**Leave-one-dataset-out** (:func:`transfer`). All sets' pages become one
:class:`~credrank.learn.cv.GroupedData`: one item per distinct ``(text, url)`` — a text in two
sets (CrAM's real passages are also PoisonedRAG's clean passages) is one item judged in groups
of both — with groups namespaced ``<set>:<group>``. The fold of set ``S`` is all of ``S``'s
groups; the model for ``S`` trains on the items judged in no group of ``S``
(:meth:`~credrank.learn.cv.GroupedData.train_rows`), so a page ``S`` labels never trains the
model that scores ``S``, whichever set also labels it (asserted for every fold, together with
the texts of ``S``'s retrieval pools). Its configuration (feature groups × L2 of
:data:`~credrank.credibility.model.DEFAULT_CONFIGS`, plus the ``extra`` block when supplied) is
chosen by leave-one-dataset-out CV *among the training sets only* (pooled out-of-fold AUC,
:func:`~credrank.learn.cv.choose_per_fold`; the inner fit leaving out ``{S, T}`` is shared by
outer ``S`` and ``T``; with a single training set, grouped CV over its groups) — never
reading ``S``'s labels.

**Question links** (:func:`question_link`). 30 PoisonedRAG targets are CrAM NQ questions and
17 NewsPolluted questions are EvoTemp questions: a model scoring a set must not have trained
on another set's pages of the same question (a fake about the same question is a near-copy of
the held-out one's topic). Every labelled page of a question is also in the question's link
group ``~q:<hash>`` (no pairs), and holding out ``S`` leaves out ``S``'s groups *and* its
links (:meth:`Items.fold`), so those pages train neither the LODO model of ``S`` nor its
configuration choice (counted as ``left_out_by_links``).

**Single source** (:func:`single_source`). For each pair of sets ``(T, S)``: the model of
``T`` alone — the configuration its own grouped CV chose (the in-domain final choice), fitted
on ``T``'s pages that are neither judged in nor linked to ``S`` — scores ``S``. Per held-out
set the mean and the best of these AUCs are reported beside the LODO AUC (the best is picked
after seeing ``S``'s labels: a reference, not an estimate); the matrix is in ``report.md``.
This is the comparison the multi-set recipe has to win.

**Measures.** AUC over ``S``'s (group, page) pairs with a 95% percentile bootstrap over
``S``'s groups (:func:`~credrank.learn.cv.group_bootstrap`). harmful@1 where ``S`` has
questions (CrAM NQ, NewsPolluted, EvoTemp, RAMDocs, PoisonedRAG), as the pooled benches do
(:func:`~credrank_bench.experiments.bench.prepare`,
:func:`~credrank_bench.experiments.bench.pools_for`): the set's documents are one corpus, each
question retrieves its ``fetch_k`` (15) nearest by cosine (MiniLM of the whitespace-normalised
title and text), and the pool is ranked by ``max(cos, 0) · λ``, ``λ = floor + (1 − floor) · p``
(floor 0.3, the model file's default);
harmful@1 = the share of questions whose top document is labelled bad for it. Reported for
similarity only, the LODO model and the in-domain out-of-fold scores (each pool document scored
by the in-domain model of its own question's fold; where a pool holds unlabelled documents —
RAMDocs' noise — the in-domain column is left empty). In-domain AUC: nested grouped CV inside
``S`` (:func:`~credrank.learn.cv.nested_cross_validation`, 10 folds of groups above 20).

**Machine-text hooks.** (1) The column ``machine-text AUC`` (:func:`machine_text_auc`,
``--machine-text scores.csv`` with ``set,doc_id,score``, higher = more likely machine-written):
the AUC of ``1 − score`` read as ``P(credible)`` on the held-out set's pairs, nothing fitted; a
set without scores has no value and the table has no such column when no set has one — it is
never filled in. (2) Extra features: ``extra`` maps ``<set>/<doc id>`` to a vector (one
length for all), e.g. a machine-text statistic; it becomes the feature block ``extra`` and
every configuration is tried with and without it. A merged item takes the vector of its first
``(set, doc id)``; a labelled page or pool document without one is an error unless
``extra_missing`` gives the vector to use instead. ``--machine-text-feature`` makes the block
from the ``--machine-text`` scores (:func:`score_features`): ``[score, 0]`` for a scored page,
``[0, 1]`` for one without a score (a text too short to score: the second column is a missing
indicator, so that the fit weighs an unscored page on its own instead of reading 0 as a score).
``--score-machine-text`` computes those scores instead of reading a file
(:func:`machine_text_scores`): Fast-DetectGPT's ``d`` with SmolLM2-135M (the ``lm`` extra, the
product scorer at its defaults) for every labelled page and pool document, each distinct text
once, kept in the benches' cache (``--cache DIR``: ``DIR/machine-text/<key>.jsonl``, so a
rerun or a bench over the same passages pays nothing); a text too short to score has no
score. About 0.2 s per text on two free cores: ≈ 1 h for the 17,000 distinct texts cold.

**Cost.** Featurising: one embedder call per distinct text (cached on disk with ``cache_dir``;
the dominant cost cold, about 20,000 texts). Fits: ``C · S(S − 1)/2`` inner fits on about
``n (S − 2)/S`` items and ``S`` refits, each L-BFGS ``O(T n d)`` (``S`` = 7 sets, ``C`` = 9
configurations: 189 + 7 fits on ≈ 20,000 × 414 features), plus the in-domain nested CVs
(``C (F² + F)/2 + 1`` fits per set, 496 for 10 folds) and ``S (S − 1)`` single-source fits.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.logistic import text_key
from credrank.core.maths import roc_auc
from credrank.core.pipeline import Pipeline, Stage
from credrank.credibility.features import CredibilityFeaturizer
from credrank.credibility.labels import page_group
from credrank.credibility.model import DEFAULT_CONFIGS, Config
from credrank.evaluate.metrics import evaluate, run_from_batches
from credrank.learn import cv as learn_cv
from credrank.learn.cv import HIGHEST_AUC, N_BOOT, GroupedData, Learner, group_bootstrap
from credrank.learn.estimator import logistic_estimator
from credrank.select.topk import TopK
from credrank_bench.datasets import EvalSet, load_dataset
from credrank_bench.datasets.base import DEFAULT_PATHS

#: the sets with labelled fakes or labelled page credibility, in report order
SETS: tuple[str, ...] = ("cram-nq", "newspolluted", "evotemp", "ramdocs", "poisonedrag",
                         "trec2019-hm", "coaid")
#: sets of the shared data not used, and why
LEFT_OUT: dict[str, str] = {
    "liar": "one-sentence political claims with a 6-level truth label: claim verification, "
            "not pages; the credit-history columns include the statement's own label; "
            "SOURCES.md's intended use is speaker and venue reliability",
    "realtimeqa": "no credibility labels (dated news search results)",
    "goldengaze": "helpful_probability is a stance model's prediction, not a label",
    "domain_ratings": "ratings of domains, not of pages",
}
#: where each set lives under the shared data root
PATHS: dict[str, str] = {**DEFAULT_PATHS, "poisonedrag": "poisonedrag/nq.json"}
#: the retrieval pool of harmful@1 (the pooled benches' ``fetch_k``)
FETCH_K = 15
#: ``λ = floor + (1 − floor) · p`` (the model file's default floor)
FLOOR = 0.3
#: the namespace separator of ``<set>:<group>`` and the key separator of ``<set>/<doc id>``
SEP, DOC_SEP = ":", "/"
#: the group (without pairs) of a set's pool documents, ``<set>:~pool``
POOL = "~pool"


# ---------------------------------------------------------------- labelled sets


@dataclass(frozen=True)
class Page:
    """One labelled page of a set: its doc id, text, url, group and label (1 credible)."""

    doc_id: str
    text: str
    url: str | None
    group: str
    label: int


@dataclass
class LabelledSet:
    """A set's labelled pages and, for harmful@1, its evaluation set (``evalset``: one corpus
    with per-question ``bad`` documents) and each question's retrieved pool (``batches``,
    :func:`retrieval_pools`)."""

    name: str
    pages: list[Page]
    evalset: EvalSet | None = None
    batches: dict[str, Candidates] | None = None
    notes: list[str] = field(default_factory=list)
    #: group -> its question text (sets of questions), for the question links
    questions: dict[str, str] = field(default_factory=dict)

    @property
    def groups(self) -> list[str]:
        """The set's groups, first-seen order."""
        return list(dict.fromkeys(p.group for p in self.pages))

    @property
    def pools(self) -> dict[str, list[str]] | None:
        """``qid -> doc ids`` of the retrieved pools (``None`` without)."""
        if self.batches is None:
            return None
        return {q: [str(d) for d in b.doc_ids] for q, b in self.batches.items()}


def _pooled_pages(evalset: EvalSet, keep: Callable[[str], bool] = lambda d: True
                  ) -> list[Page]:
    """One page per (question, pool document): label 0 when the document is bad for the
    question; documents ``keep`` rejects are left out."""
    docs = {d.id: d for d in evalset.documents}
    out = []
    for qid, ids in (evalset.pools or {}).items():
        bad = evalset.bad.get(qid, set())
        for d in ids:
            if keep(str(d)):
                doc = docs[str(d)]
                out.append(Page(str(d), doc.text, doc.url, qid, int(str(d) not in bad)))
    return out


def load_set(name: str, root: str | Path, embedder: Any = None, *,
             fetch_k: int = FETCH_K) -> LabelledSet:
    """The labelled pages of set ``name`` under the shared data ``root`` (module docstring).
    ``poisonedrag`` needs ``embedder`` (its pages come from retrieval)."""
    root = Path(root)
    if name in ("cram-nq", "newspolluted", "evotemp"):
        ev = load_dataset(name, root / PATHS[name])
        return LabelledSet(name, _pooled_pages(ev), ev, notes=list(ev.notes),
                           questions=dict(ev.queries))
    if name == "ramdocs":
        ev = load_dataset(name, root / PATHS[name])
        kinds = {d: ev.doc_labels[d]["type"] for d in ev.doc_labels}
        pages = _pooled_pages(ev, lambda d: kinds.get(d) in ("correct", "misinfo"))
        noise = sum(1 for k in kinds.values() if k == "noise")
        return LabelledSet(name, pages, ev, notes=[
            f"{noise} noise documents carry no credibility label: not trained on or scored "
            "for AUC (they stay in the harmful@1 corpus)"], questions=dict(ev.queries))
    if name == "trec2019-hm":
        ev = load_dataset(name, root / PATHS[name])
        pages = [Page(d.id, d.text, d.url, str(t), int(j["credibility"]))
                 for d in ev.documents
                 for t, j in ev.doc_labels.get(d.id, {}).get("judgements", {}).items()
                 if j.get("credibility") in (0, 1)]
        return LabelledSet(name, pages, None, notes=["NIST credibility per topic judgement"])
    if name == "coaid":
        ev = load_dataset(name, root / PATHS[name])
        pages, no_host = [], 0
        for d in ev.documents:
            host = page_group(d.url)
            if host is None:
                no_host += 1
                continue
            pages.append(Page(d.id, d.text, d.url, host,
                              int(ev.doc_labels[d.id]["label"] == "real")))
        return LabelledSet(name, pages, None, notes=[
            f"group = the registered domain of the URL ({no_host} without a host left out)"])
    if name == "poisonedrag":
        return _poisonedrag(root, embedder, fetch_k)
    raise ValueError(f"set: expected one of {', '.join(SETS)}, got {name!r}")


def _poisonedrag(root: Path, embedder: Any, fetch_k: int) -> LabelledSet:
    from credrank_bench.datasets import read_cram_nq
    from credrank_bench.datasets.poisonedrag import poisoned_corpus, read_poisonedrag

    if embedder is None:
        raise ValueError("poisonedrag: an embedder is needed (its pages come from retrieval)")
    targets = read_poisonedrag(root / PATHS["poisonedrag"])
    ev = poisoned_corpus(targets, read_cram_nq(root / PATHS["cram-nq"]), 5)
    batches = retrieval_pools(ev, embedder, fetch_k)
    docs = {d.id: d for d in ev.documents}
    poison = {d for d, lab in ev.doc_labels.items() if lab.get("poison")}
    pages = []
    for qid, _ in ev.queries:
        pool = [str(d) for d in batches[qid].doc_ids]
        ids = list(dict.fromkeys([*sorted(ev.bad.get(qid, set())), *pool]))
        pages += [Page(d, docs[d].text, docs[d].url, qid, int(d not in poison)) for d in ids]
    return LabelledSet("poisonedrag", pages, ev, batches, notes=[
        f"per target: its own poisons and the {fetch_k} documents retrieved for it from CrAM "
        "NQ's real passages + all poisons; a poison is 0 wherever it appears"],
        questions=dict(ev.queries))


class Normalised:
    """An embedder that embeds each text with its white space collapsed (``" ".join(split)``):
    MiniLM's tokenizer splits on white space, so the vector is the same, and a passage of at
    most ``head_words`` words shares one cached vector with its credibility feature row."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed([" ".join(str(t).split()) for t in texts])


def retrieval_pools(evalset: EvalSet, embedder: Any, fetch_k: int = FETCH_K
                    ) -> dict[str, Candidates]:
    """``qid -> batch`` of the ``fetch_k`` nearest documents of the set's corpus by cosine
    (:func:`~credrank_bench.experiments.bench.prepare` and
    :func:`~credrank_bench.experiments.bench.pools_for`, embedder wrapped in
    :class:`Normalised`)."""
    from credrank_bench.experiments.bench import pools_for, prepare

    return pools_for(prepare(evalset, Normalised(embedder)), fetch_k)


def load_sets(root: str | Path, names: Sequence[str] = SETS, embedder: Any = None, *,
              fetch_k: int = FETCH_K, pools: bool = True) -> dict[str, LabelledSet]:
    """:func:`load_set` for each of ``names``, with retrieval pools for the sets that have
    questions when ``pools`` (needs ``embedder``)."""
    out = {}
    for name in names:
        s = load_set(name, root, embedder, fetch_k=fetch_k)
        if pools and s.evalset is not None and s.batches is None:
            s.batches = retrieval_pools(s.evalset, embedder, fetch_k)
        out[name] = s
    return out


# ---------------------------------------------------------------- one grouped data set


@dataclass
class Items:
    """All sets' pages as one :class:`GroupedData` (one item per distinct ``(text, url)``),
    with the item of each ``(set, doc id)`` and the feature matrix."""

    data: GroupedData
    item_of: dict[tuple[str, str], int]
    keys: list[tuple[str, str | None]]
    slices: dict[str, slice]
    dropped: int
    #: set -> the question links of its questions (``~q:<hash>``, :func:`question_link`)
    links: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: items labelled or pooled in more than one set (one text, several sets)
    shared: int = 0

    def fold(self, name: str) -> tuple[str, ...]:
        """What holding out set ``name`` leaves out: its groups and its question links."""
        return (*_set_groups(self, name), *self.links.get(name, ()))


def question_link(question: str) -> str:
    """The link group of a question, ``~q:<hash>`` of its lower-cased alphanumeric words: the
    same question in two sets (30 PoisonedRAG targets are CrAM NQ questions, 17 NewsPolluted
    questions are EvoTemp's) gets one link, so holding out one set also holds out the other
    set's pages of that question."""
    words = " ".join(re.sub(r"[^0-9a-z]+", " ", question.lower()).split())
    return "~q:" + text_key(words)


def _key(text: str, url: str | None) -> tuple[str, str | None]:
    return text_key(text), None if url is None else str(url)


def build_items(sets: Mapping[str, LabelledSet], featurizer: CredibilityFeaturizer,
                extra: Mapping[str, Sequence[float]] | None = None,
                extra_missing: Sequence[float] | None = None) -> Items:
    """One item per distinct ``(text, url)`` over every set's labelled pages *and* pool
    documents (pool documents without a label are items with no judgement: scored, never
    trained), judged in ``<set>:<group>``; two labels of one item in one group that disagree
    drop that judgement (counted in ``dropped``). Features: the featuriser's columns, then
    ``extra`` (module docstring)."""
    keys: list[tuple[str, str | None]] = []
    index: dict[tuple[str, str | None], int] = {}
    texts: list[str] = []
    urls: list[str | None] = []
    refs: list[str] = []
    judged: list[dict[str, int]] = []
    pooled: list[set[str]] = []
    conflict: set[tuple[int, str]] = set()
    item_of: dict[tuple[str, str], int] = {}

    def item(set_name: str, doc_id: str, text: str, url: str | None) -> int:
        k = _key(text, url)
        if k not in index:
            index[k] = len(keys)
            keys.append(k)
            texts.append(text)
            urls.append(url)
            refs.append(f"{set_name}{DOC_SEP}{doc_id}")
            judged.append({})
            pooled.append(set())
        i = index[k]
        item_of.setdefault((set_name, doc_id), i)
        return i

    linked: list[set[str]] = []
    links: dict[str, set[str]] = {}
    for name, s in sets.items():
        for p in s.pages:
            i = item(name, p.doc_id, p.text, p.url)
            while len(linked) < len(keys):
                linked.append(set())
            g = f"{name}{SEP}{p.group}"
            if judged[i].get(g, p.label) != p.label:
                conflict.add((i, g))
            judged[i][g] = p.label
            if p.group in s.questions:
                link = question_link(s.questions[p.group])
                linked[i].add(link)
                links.setdefault(name, set()).add(link)
        if s.evalset is not None and s.pools is not None:
            docs = {d.id: d for d in s.evalset.documents}
            for ids in s.pools.values():
                for d in ids:
                    pooled[item(name, d, docs[d].text, docs[d].url)].add(f"{name}{SEP}{POOL}")
    for i, g in conflict:
        judged[i].pop(g, None)
    x = featurizer.features(texts, urls)
    slices = dict(featurizer.slices)
    if extra is not None:
        rows = []
        for r in refs:
            if r not in extra and extra_missing is not None:
                rows.append(np.asarray(extra_missing, dtype=np.float64).reshape(-1))
                continue
            if r not in extra:
                raise ValueError(f"extra: no feature vector for {r!r} (expected one for every "
                                 "labelled page and pool document, keyed <set>/<doc id>)")
            rows.append(np.asarray(extra[r], dtype=np.float64).reshape(-1))
        width = {len(r) for r in rows}
        if len(width) != 1:
            raise ValueError(f"extra: expected vectors of one length; got lengths "
                             f"{sorted(width)}")
        slices["extra"] = slice(x.shape[1], x.shape[1] + width.pop())
        x = np.hstack([x, np.vstack(rows)])
    if not np.all(np.isfinite(x)):
        raise ValueError("features: non-finite values (check the extra features)")
    # a pool document is also in its set's group "<set>:~pool" (no pairs): left out with the
    # set whether or not the set labels it
    # an item whose only judgements disagreed: "<its first set>:~pool", never trained on
    while len(linked) < len(keys):
        linked.append(set())
    # a labelled page of a question is also in the question's link "~q:<hash>" (no pairs)
    groups = [[*j, *sorted(pooled[i] - set(j)), *sorted(linked[i])]
              or [refs[i].split(DOC_SEP, 1)[0] + SEP + POOL] for i, j in enumerate(judged)]
    y = [_majority(j.values()) if j else None for j in judged]
    by_group: dict[str, list[tuple[int, int]]] = {}
    for i, j in enumerate(judged):
        for g, v in j.items():
            by_group.setdefault(g, []).append((i, v))
    pairs = [(g, i, v) for g in sorted(by_group) for i, v in by_group[g]]
    data = GroupedData(groups, y, pairs, ids=refs, x=x)
    in_sets: dict[int, set[str]] = {}
    for (name, _), i in item_of.items():
        in_sets.setdefault(i, set()).add(name)
    return Items(data, item_of, keys, slices, len(conflict),
                 {n: tuple(sorted(v)) for n, v in links.items()},
                 sum(1 for v in in_sets.values() if len(v) > 1))


def _majority(values: Any) -> int | None:
    vals = list(values)
    mean = float(np.mean(vals))
    return None if mean == 0.5 else int(mean > 0.5)


def configs_for(items: Items) -> list[Config]:
    """:data:`DEFAULT_CONFIGS`, and each again with ``extra`` when the items have it."""
    out = list(DEFAULT_CONFIGS)
    if "extra" in items.slices:
        out += [Config((*c.groups, "extra"), c.l2) for c in DEFAULT_CONFIGS]
    return out


def learner_for(items: Items) -> Learner:
    """A configuration's columns: its feature groups' slices, in order."""
    def columns(config: Config) -> np.ndarray:
        width = items.data.x.shape[1]
        return np.concatenate([np.arange(width)[items.slices[g]] for g in config.groups])
    return Learner(columns=columns)


# ---------------------------------------------------------------- the experiment


def _set_groups(items: Items, name: str) -> tuple[str, ...]:
    return tuple(g for g in items.data.groups if g.split(SEP, 1)[0] == name)


def _judged(group: str) -> bool:
    """Whether ``group`` is a set's group of judgements (not a question link, not a pool)."""
    return not group.startswith("~") and not group.endswith(f"{SEP}{POOL}")


def _pool_items(items: Items, s: LabelledSet) -> set[int]:
    return {items.item_of[(s.name, d)] for ids in (s.pools or {}).values() for d in ids}


def _interval(groups: Sequence[str], y: np.ndarray, p: np.ndarray, n_boot: int,
              seed: int) -> list[float] | None:
    bounds = group_bootstrap(groups, y, p, ("auc",), n_boot=n_boot, seed=seed)["auc"].bounds
    return list(bounds) if bounds else None


def _pairs_of(items: Items, fold: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    idx = items.data.pairs_in(fold)
    return ([str(g) for g in items.data.pair_group[idx]], items.data.pair_item[idx],
            items.data.pair_y[idx])


class _Factor(Stage):
    """Adds the factor ``credibility`` ``λ = floor + (1 − floor) · p`` from ``p`` by doc id."""

    def __init__(self, p: Mapping[str, float], floor: float):
        self.p, self.floor = p, floor

    def transform(self, batch: Candidates) -> Candidates:
        lam = np.array([self.floor + (1 - self.floor) * self.p[str(d)] for d in batch.doc_ids])
        return batch.with_factor("credibility", lam, low=0.0, high=1.0)


def harmful_at_1(s: LabelledSet, p: Mapping[str, float] | None, floor: float = FLOOR
                 ) -> float | None:
    """Mean harmful@1 over ``s``'s questions of its retrieved pools ranked by
    ``max(cos, 0) · λ`` (``p is None``: similarity only); ``None`` without pools."""
    if s.evalset is None or s.batches is None:
        return None
    batches = s.batches
    stages: list[Stage] = [] if p is None else [_Factor(p, floor)]
    pipe = Pipeline([*stages, Combine("multiply"), TopK(1)])
    run = run_from_batches({q: pipe(b) for q, b in batches.items()})
    qrels = {q: s.evalset.qrels.get(q, {}) for q in batches}
    values = evaluate(qrels, run, ["harmful@1"], bad=s.evalset.bad)["harmful@1"]
    return float(np.mean(list(values.values()))) if values else None


@dataclass
class InDomain:
    """What :func:`in_domain` found for one set: the metrics, the out-of-fold ``p`` per item
    (full-data item index) and the set's own model (refit on all its pages with the
    configuration chosen by grouped CV on them: the single-source model of the set)."""

    metrics: dict[str, Any]
    oof: dict[int, float]
    config: Config


def in_domain(items: Items, name: str, *, seed: int, n_boot: int, n_jobs: int) -> InDomain:
    """Nested grouped CV inside set ``name`` (its items and groups only): AUC, interval, the
    final configuration; and the out-of-fold ``p`` of each of its items (for an item judged
    in several of the set's groups: the mean)."""
    full = items.data
    fold = _set_groups(items, name)
    pair_idx = full.pairs_in(fold)
    rows = np.unique(full.pair_item[pair_idx])
    where = {int(i): k for k, i in enumerate(rows)}
    judgements: list[dict[str, int]] = [{} for _ in rows]
    for j in pair_idx:
        judgements[where[int(full.pair_item[j])]][str(full.pair_group[j])] = int(full.pair_y[j])
    sub = GroupedData.from_judgements(judgements, ids=[full.ids[i] for i in rows],
                                      x=full.x[rows])
    cv = learn_cv.nested_cross_validation(sub, learner_for(items), configs_for(items),
                                          HIGHEST_AUC, seed=seed, n_boot=n_boot,
                                          n_jobs=n_jobs)
    sums: dict[int, list[float]] = {}
    id_row = {full.ids[i]: int(i) for i in rows}
    for doc, p in zip(cv.oof.doc_ids, cv.oof.p, strict=True):
        sums.setdefault(id_row[doc], []).append(float(p))
    interval = cv.intervals["auc"].bounds
    return InDomain({"auc": cv.oof.auc(), "auc_interval": list(interval) if interval else None,
                     "cv": cv.describe_cv(), "config": cv.final.config.to_dict(),
                     "n_pairs": len(cv.oof.y)},
                    {i: float(np.mean(v)) for i, v in sums.items()}, cv.final.config)


def single_source(items: Items, source: str, config: Config, held_out: str
                  ) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """A model of set ``source`` alone (``config``: its in-domain choice), fitted on its pages
    that are neither judged in nor linked to set ``held_out`` (each with the majority of its
    ``source`` labels), scoring every pair of ``held_out``: ``(trained items, groups, y,
    p)``."""
    data = items.data
    own = data.pairs_in(_set_groups(items, source))
    votes: dict[int, list[int]] = {}
    for j in own:
        votes.setdefault(int(data.pair_item[j]), []).append(int(data.pair_y[j]))
    away = set(int(i) for i in data.items_in(items.fold(held_out)))
    rows = np.array(sorted(i for i, v in votes.items()
                           if i not in away and _majority(v) is not None), dtype=np.intp)
    y_train = np.array([_majority(votes[int(i)]) for i in rows], dtype=np.float64)
    groups, pair_items, y = _pairs_of(items, _set_groups(items, held_out))
    cols = np.asarray(learner_for(items).columns(config))
    if not len(rows) or len(set(y_train.tolist())) < 2:
        return rows, groups, y, np.full(len(y), np.nan)
    est = logistic_estimator(config).fit(np.asfortranarray(data.x[rows][:, cols]), y_train)
    p = est.predict_proba(np.asfortranarray(data.x[pair_items][:, cols]))
    return rows, groups, y, p


def machine_text_auc(items: Items, name: str, scores: Mapping[str, float], *,
                     n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any] | None:
    """The hook of a machine-text detector: the AUC of ``1 − score`` as ``P(credible)`` over
    set ``name``'s pairs that have a score (``scores``: ``<set>/<doc id>`` → a score, higher =
    more likely machine-written; read as is, nothing fitted); ``None`` when none of the set's
    pages has one (the column is then left out, never filled in)."""
    doc_of: dict[int, str] = {}
    for (set_name, doc), i in items.item_of.items():
        if set_name == name:
            doc_of.setdefault(i, f"{set_name}{DOC_SEP}{doc}")
    groups, pair_items, y = _pairs_of(items, _set_groups(items, name))
    keep = [k for k, i in enumerate(pair_items) if doc_of.get(int(i)) in scores]
    if not keep:
        return None
    p = np.array([1.0 - float(scores[doc_of[int(pair_items[k])]]) for k in keep])
    yk = y[keep]
    return {"auc": roc_auc(yk, p), "pairs": len(keep), "of_pairs": len(y),
            "interval": _interval([groups[k] for k in keep], yk, p, n_boot, seed)
            if len(set(yk.tolist())) == 2 else None}


def machine_text_scores(sets: Mapping[str, LabelledSet], scorer: Any, *,
                        cache_dir: Path | None = None,
                        on_count: Callable[[int, int], None] | None = None) -> dict[str, float]:
    """``<set>/<doc id>`` → the ``scorer``'s ``d`` (``.key``, ``.score(texts)``: the product's
    :class:`~credrank.machine_text.scorer.FastDetectScorer`) of every labelled page and pool
    document of ``sets``; texts too short to score are left out (module docstring)."""
    from credrank_bench.experiments.machine_text_rows import score_texts

    refs: list[str] = []
    texts: list[str] = []
    for name, s in sets.items():
        docs = {p.doc_id: p.text for p in s.pages}
        for batch in (s.batches or {}).values():
            for doc, text in zip(batch.doc_ids, batch.column("text"), strict=True):
                docs.setdefault(str(doc), str(text))
        for doc, text in docs.items():
            refs.append(f"{name}{DOC_SEP}{doc}")
            texts.append(text)
    d = score_texts(texts, scorer, cache_dir=cache_dir, on_count=on_count)
    return {ref: float(v) for ref, v in zip(refs, d, strict=True) if np.isfinite(v)}


#: ``extra_missing`` of :func:`score_features`'s block: no score, missing indicator set
SCORE_MISSING = (0.0, 1.0)


def score_features(scores: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """The ``extra`` block of a detector's scores (``--machine-text-feature``): ``<set>/<doc
    id>`` → ``(score, 0)``; pass :data:`SCORE_MISSING` as ``extra_missing`` for the pages
    without a score (module docstring)."""
    return {ref: (float(v), 0.0) for ref, v in scores.items()}


def transfer(sets: Mapping[str, LabelledSet], featurizer: CredibilityFeaturizer, *,
             extra: Mapping[str, Sequence[float]] | None = None,
             extra_missing: Sequence[float] | None = None,
             machine_text: Mapping[str, float] | None = None, seed: int = 0,
             n_boot: int = N_BOOT, n_jobs: int = 1, floor: float = FLOOR,
             with_in_domain: bool = True, log: Callable[[str], None] | None = None
             ) -> dict[str, Any]:
    """The leave-one-dataset-out experiment over ``sets`` (module docstring): per held-out
    set its pages, groups, LODO AUC with interval, chosen configuration and inner AUC, the
    in-domain nested-CV AUC, the single-source AUCs (each other set's own model), harmful@1
    (similarity only, LODO, in-domain), the machine-text AUC where ``machine_text`` scores the
    set, and the items the LODO model trained on (``trained_on``: their ids). Needs at least 2
    sets with pages."""
    say = log or (lambda _m: None)
    t0 = time.perf_counter()
    items = build_items(sets, featurizer, extra, extra_missing)
    data = items.data
    say(f"{len(data)} items ({items.shared} in several sets), {data.x.shape[1]} features "
        f"({time.perf_counter() - t0:.0f} s)")
    names = [n for n in sets if _set_groups(items, n)]
    if len(names) < 2:
        raise ValueError("transfer: expected labelled pages of at least 2 sets")
    folds = [items.fold(n) for n in names]
    configs = configs_for(items)
    learner = learner_for(items)

    def inner(rest: list[str]) -> list[tuple[str, ...]]:
        """The other sets, each without what the outer held-out set already leaves out; with
        one set left, folds of its groups."""
        keep = set(rest)
        out = [tuple(g for g in f if g in keep) for f in folds]
        out = [f for f in out if any(_judged(g) for g in f)]
        if len(out) >= 2:
            return out
        return learn_cv.group_folds([g for g in rest if _judged(g)], seed=seed)

    t1 = time.perf_counter()
    choices = learn_cv.choose_per_fold(data, learner, configs, folds, HIGHEST_AUC,
                                       n_jobs=n_jobs, inner=inner)
    say(f"configuration choices ({time.perf_counter() - t1:.0f} s)")
    own: dict[str, InDomain] = {}
    if with_in_domain:
        for name in names:
            t2 = time.perf_counter()
            own[name] = in_domain(items, name, seed=seed, n_boot=n_boot, n_jobs=n_jobs)
            say(f"{name}: in-domain CV ({time.perf_counter() - t2:.0f} s)")
    out: dict[str, Any] = {}
    for name, fold, choice in zip(names, folds, choices, strict=True):
        s = sets[name]
        fitted = learn_cv.fit(data, learner, choice.config, fold)
        held = set(int(i) for i in data.items_in(fold)) | _pool_items(items, s)
        trained = set(int(i) for i in fitted.rows)
        leaked = trained & held
        if leaked:  # never: train_rows leaves out every item judged in the fold
            raise AssertionError(f"{name}: the LODO model trained on {len(leaked)} of the "
                                 "held-out set's pages")
        held_keys = {items.keys[i] for i in held}
        if any(items.keys[i] in held_keys for i in trained):
            raise AssertionError(f"{name}: a held-out text is in the training set")
        cols = np.asarray(learner.columns(choice.config))
        scored = np.array(sorted(held), dtype=np.intp)
        p_items = dict(zip(scored.tolist(), fitted.estimator.predict_proba(
            np.asfortranarray(data.x[scored][:, cols])).tolist(), strict=True))
        groups, pair_items, y = _pairs_of(items, _set_groups(items, name))
        p = np.array([p_items[int(i)] for i in pair_items])
        entry: dict[str, Any] = {
            "pages": len(s.pages), "groups": len(s.groups), "pairs": len(y),
            "credible_share": float(y.mean()) if len(y) else None,
            "lodo_auc": roc_auc(y, p) if len(y) else None,
            "lodo_auc_interval": _interval(groups, y, p, n_boot, seed),
            "lodo_config": choice.config.to_dict(), "lodo_inner_auc": choice.value,
            "trained_on_items": len(trained),
            "trained_on_sets": sorted({g.split(SEP, 1)[0] for i in trained
                                       for g in data.groups_of(i) if not g.startswith("~")}),
            "linked_questions": len(items.links.get(name, ())),
            "left_out_by_links": len(set(int(i) for i in data.items_in(
                items.links.get(name, ()))) - set(int(i) for i in data.items_in(
                    _set_groups(items, name)))),
            "trained_on": sorted(data.ids[i] for i in trained),
            "notes": list(s.notes)}
        doc_p = {d: p_items[items.item_of[(name, d)]]
                 for ids in (s.pools or {}).values() for d in ids}
        entry["harmful@1_similarity"] = harmful_at_1(s, None, floor)
        entry["harmful@1_lodo"] = harmful_at_1(s, doc_p, floor) if s.pools else None
        if name in own:
            entry.update({f"in_domain_{k}": v for k, v in own[name].metrics.items()})
            oof = own[name].oof
            pooled = [items.item_of[(name, d)] for ids in (s.pools or {}).values()
                      for d in ids]
            entry["harmful@1_in_domain"] = (
                harmful_at_1(s, {d: oof[items.item_of[(name, d)]]
                                 for ids in (s.pools or {}).values() for d in ids}, floor)
                if s.pools and all(i in oof for i in pooled) else None)
            single: dict[str, Any] = {}
            for source in names:
                if source == name or source not in own:
                    continue
                rows, _, y_s, p_s = single_source(items, source, own[source].config, name)
                auc = roc_auc(y_s, p_s) if len(y_s) and np.all(np.isfinite(p_s)) else None
                single[source] = {"auc": auc, "trained_on_items": len(rows),
                                  "config": own[source].config.to_dict()}
            entry["single_source"] = single
            aucs = {k: v["auc"] for k, v in single.items() if v["auc"] is not None}
            entry["single_source_mean_auc"] = float(np.mean(list(aucs.values()))) \
                if aucs else None
            best = max(aucs, key=lambda k: aucs[k]) if aucs else None
            entry["single_source_best"] = ({"set": best, "auc": aucs[best]}
                                           if best is not None else None)
        if machine_text is not None:
            mt = machine_text_auc(items, name, machine_text, n_boot=n_boot, seed=seed)
            if mt is not None:
                entry["machine_text_auc"] = mt
        out[name] = entry
    return {"sets": out, "n_items": len(data), "features": data.x.shape[1],
            "items_in_several_sets": items.shared,
            "dropped_conflicting_judgements": items.dropped,
            "configs": [c.to_dict() for c in configs]}


# ---------------------------------------------------------------- report


def _num(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}"


def _ci(v: Any, i: Any) -> str:
    return _num(v) + ("" if not i else f" [{i[0]:.3f}, {i[1]:.3f}]")


def table(result: Mapping[str, Any]) -> str:
    """The leave-one-dataset-out table (Markdown): per held-out set the in-domain CV AUC, the
    LODO AUC (a model of all the other sets) with its 95% interval over the set's groups, the
    single-source AUCs (each other set's own model: their mean and the best), the LODO
    configuration and harmful@1. The column ``machine-text AUC`` appears only when some set
    has machine-text scores (the hook of :func:`machine_text_auc`)."""
    rows = result["sets"]
    machine = any("machine_text_auc" in e for e in rows.values())
    head = ["held-out set", "pages", "groups", "in-domain CV AUC", "LODO AUC",
            "single-source AUC: mean / best", "LODO config", "harmful@1 similarity",
            "harmful@1 LODO", "harmful@1 in-domain"]
    if machine:
        head.append("machine-text AUC")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, e in rows.items():
        cfg = e["lodo_config"]
        best = e.get("single_source_best")
        single = (f"{_num(e.get('single_source_mean_auc'))} / "
                  + (f"{best['auc']:.3f} ({best['set']})" if best else "—"))
        cells = [name, str(e["pages"]), str(e["groups"]),
                 _ci(e.get("in_domain_auc"), e.get("in_domain_auc_interval")),
                 _ci(e["lodo_auc"], e["lodo_auc_interval"]), single,
                 f"{'+'.join(cfg['groups'])}, L2 {cfg['l2']:g}",
                 _num(e["harmful@1_similarity"]), _num(e["harmful@1_lodo"]),
                 _num(e.get("harmful@1_in_domain"))]
        if machine:
            mt = e.get("machine_text_auc")
            cells.append("—" if mt is None else
                         f"{_ci(mt['auc'], mt['interval'])} ({mt['pairs']}/{mt['of_pairs']})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def matrix(result: Mapping[str, Any]) -> str:
    """The single-source AUCs as a Markdown matrix: row = the set a model was fitted on (its
    in-domain configuration), column = the set it scores; the diagonal is the in-domain CV
    AUC."""
    rows = result["sets"]
    names = list(rows)
    lines = ["| fitted on ↓ · scores → | " + " | ".join(names) + " |",
             "|" + "---|" * (len(names) + 1)]
    for src in names:
        cells = []
        for dst in names:
            if dst == src:
                cells.append(f"*{_num(rows[dst].get('in_domain_auc'))}*")
            else:
                v = rows[dst].get("single_source", {}).get(src)
                cells.append(_num(None if v is None else v["auc"]))
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    lines.append("| **all the others (LODO)** | "
                 + " | ".join(f"**{_num(rows[n]['lodo_auc'])}**" for n in names) + " |")
    return "\n".join(lines)


def report(result: Mapping[str, Any]) -> str:
    """``report.md``: the settings, the LODO table, the single-source matrix, notes."""
    st = result.get("settings", {})
    out = ["# Credibility model transfer (leave one dataset out)", "",
           f"Sets: {', '.join(result['sets'])}; embedder {st.get('embedder')}, seed "
           f"{st.get('seed')}, {st.get('n_boot')} bootstrap resamples, fetch_k "
           f"{st.get('fetch_k')}, floor {st.get('floor')}; {result['n_items']} distinct texts "
           f"({result['items_in_several_sets']} in several sets), {result['features']} "
           f"features; {st.get('seconds')} s.", "", table(result), "",
           "Single-source transfer (AUC; diagonal: in-domain nested CV):", "",
           matrix(result), ""]
    for name, e in result["sets"].items():
        notes = [*e.get("notes", [])]
        if e.get("linked_questions"):
            notes.append(f"{e['left_out_by_links']} pages of other sets share one of its "
                         f"questions and were left out of its LODO training")
        if notes:
            out.append(f"* {name}: " + "; ".join(notes))
    for name, why in st.get("left_out", {}).items():
        out.append(f"* not used: {name} — {why}")
    return "\n".join(out) + "\n"


def read_machine_text(path: Path) -> dict[str, float]:
    """A machine-text score file: CSV with header ``set,doc_id,score`` (higher = more likely
    machine-written) → ``{"<set>/<doc id>": score}``."""
    out: dict[str, float] = {}
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or not {"set", "doc_id", "score"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: expected the header set,doc_id,score")
        for line, row in enumerate(reader, start=2):
            try:
                score = float(row["score"])
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: score: expected a number, got "
                                 f"{row['score']!r}") from None
            if not np.isfinite(score):
                raise ValueError(f"{path}:{line}: score: expected a finite number")
            out[f"{row['set']}{DOC_SEP}{row['doc_id']}"] = score
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m credrank_bench.experiments.credibility_transfer``: run, print the table, write
    ``report.md`` and ``result.json`` under ``--out``."""
    ap = argparse.ArgumentParser(prog="python -m credrank_bench.experiments.credibility_transfer",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"),
                    help="the shared data root (default ../shared/data)")
    ap.add_argument("--sets", default=",".join(SETS),
                    help=f"comma-separated sets (default: {','.join(SETS)})")
    ap.add_argument("--out", type=Path, default=Path("out/credibility-transfer"),
                    help="the folder to write report.md and result.json to")
    ap.add_argument("--cache", type=Path, default=None,
                    help="embedding and feature-row cache folder (reused across runs)")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=N_BOOT)
    ap.add_argument("--jobs", type=int, default=0,
                    help="processes for the fits (0: one per usable core, at most 8)")
    ap.add_argument("--fetch-k", type=int, default=FETCH_K)
    ap.add_argument("--machine-text", type=Path, default=None,
                    help="CSV set,doc_id,score of a machine-text detector (higher = more "
                         "likely machine-written): adds the column machine-text AUC")
    ap.add_argument("--score-machine-text", action="store_true",
                    help="score every page and pool document with SmolLM2 (the lm extra; "
                         "≈ 0.2 s a text, kept under --cache) instead of reading --machine-text")
    ap.add_argument("--machine-text-feature", action="store_true",
                    help="also use the --machine-text scores as a feature block (every "
                         "configuration tried with and without it; a page without a score: "
                         "0 with a missing indicator)")
    ap.add_argument("--no-in-domain", action="store_true",
                    help="skip the in-domain nested CV of each set (and the single-source "
                         "models)")
    args = ap.parse_args(argv)
    from credrank.index.embed import CachedEmbedder, get_embedder

    if not args.data.is_dir():
        print(f"error: --data {args.data}: not a folder (the shared data root)",
              file=sys.stderr)
        return 2
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    unknown = [n for n in names if n not in SETS]
    if unknown:
        print(f"error: --sets: unknown {unknown}; expected some of {', '.join(SETS)}",
              file=sys.stderr)
        return 2
    try:
        machine = read_machine_text(args.machine_text) if args.machine_text else None
    except (OSError, ValueError) as exc:
        print(f"error: --machine-text: {exc}", file=sys.stderr)
        return 2
    if args.score_machine_text and machine is not None:
        print("error: --score-machine-text: give it or --machine-text FILE, not both",
              file=sys.stderr)
        return 2
    if args.score_machine_text:
        from credrank.generate.local import lm_available

        missing = lm_available()
        if missing is not None:
            print(f"error: --score-machine-text needs SmolLM2: {missing}", file=sys.stderr)
            return 2
    if args.machine_text_feature and machine is None and not args.score_machine_text:
        print("error: --machine-text-feature: needs --machine-text FILE or "
              "--score-machine-text (the scores it uses)",
              file=sys.stderr)
        return 2
    jobs = args.jobs
    if jobs <= 0:
        jobs = max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else os.cpu_count() or 1, 8))
    t0 = time.perf_counter()
    emb = CachedEmbedder(get_embedder(args.embedder), args.cache, option="--cache")

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - t0:6.0f} s] {message}", file=sys.stderr, flush=True)

    sets = load_sets(args.data, names, emb, fetch_k=args.fetch_k)
    log("sets loaded: " + ", ".join(f"{n} {len(s.pages)}" for n, s in sets.items()))
    featurizer = CredibilityFeaturizer(emb, cache_dir=args.cache)
    scorer_key = None
    if args.score_machine_text:
        from credrank.machine_text.scorer import FastDetectScorer

        scorer = FastDetectScorer()
        scorer_key = scorer.key
        machine = machine_text_scores(
            sets, scorer, cache_dir=args.cache,
            on_count=lambda done, total: log(f"machine-text scores: {done}/{total} to score"))
        log(f"machine-text scores: {len(machine)} pages and pool documents ({scorer_key})")
    block = score_features(machine) if args.machine_text_feature and machine else None
    result = transfer(sets, featurizer, extra=block,
                      extra_missing=SCORE_MISSING if block is not None else None,
                      machine_text=machine, seed=args.seed,
                      n_boot=args.n_boot, n_jobs=jobs, with_in_domain=not args.no_in_domain,
                      log=log)
    for e in result["sets"].values():
        e.pop("trained_on")
    result["settings"] = {"sets": names, "embedder": args.embedder, "seed": args.seed,
                          "n_boot": args.n_boot, "fetch_k": args.fetch_k, "floor": FLOOR,
                          "jobs": jobs, "left_out": LEFT_OUT,
                          "machine_text": scorer_key or (str(args.machine_text)
                                                         if machine else None),
                          "machine_text_feature": block is not None,
                          "seconds": round(time.perf_counter() - t0, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n",
                                          encoding="utf-8")
    (args.out / "report.md").write_text(report(result), encoding="utf-8")
    print(table(result))
    print(f"\nwritten to {args.out}/report.md and {args.out}/result.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
