"""Fit a credibility model from labels files and an index (``credrank credibility fit``).

:func:`fit_from_labels` reads one or several labels files (:mod:`credrank.credibility.labels`),
matches them to the index's documents, featurises every matched page once (embedding
included; with ``cache_dir`` the rows persist on disk, so a refit embeds nothing), runs the
nested grouped cross-validation (:func:`~credrank.credibility.cv.grouped_cross_validation`:
the pooled out-of-fold AUC with a 95% bootstrap interval over groups) and refits on every
labelled page with the configuration chosen by grouped CV on all of them; the result holds the
model file's document (:mod:`credrank.credibility.modelfile`) and the ``--json`` report.

**Several labelled sets** (the multi-set recipe). Each labels file is its own *set*, named
after its file (:func:`set_names`), and its groups live in that set's namespace
(``<set>:<group>``), so topic ``1`` of one set is never merged with topic ``1`` of another and
a fold never splits a set's group. A page labelled in several sets carries every set's
judgements. With two or more sets the report adds, per set, the AUC of the pooled
out-of-fold scores on that set's pages (``per_set``), and with ``leave_one_set_out`` the
transfer estimate: per set ``S``, a model fitted on the other sets only (configuration chosen
by leave-one-set-out CV among them, never reading ``S``) scores ``S`` — the number to read
before applying the model to a corpus unlike any of the training sets.

**Embedding source.** A new fit takes the ``embedding`` feature from the vectors the index
stores (``embedding_source="document"``, the default: :mod:`credrank.credibility.features`),
so it embeds nothing and its model can be scored at index time, and rescored after a refit,
without the embedder (:mod:`credrank.credibility.indexed`); ``"head"`` embeds each page's
first 200 words as models before it did.

**Cost.** ``n`` pages: featurising ``O(n)`` embedder calls with the ``head`` source (the
dominant cost of a cold fit; none with a warm ``cache_dir``), ``O(n d)`` vector reads with
``document``; then the CV of :mod:`credrank.learn.cv`:
``O(F² C)`` fits of ``O(T n d)`` (``F`` folds, ``C`` configurations), in ``n_jobs`` processes.
Leave-one-set-out adds, for ``S`` sets, ``S (S − 1) C`` inner fits and ``S`` refits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.maths import roc_auc
from credrank.credibility.cv import (
    N_BOOT,
    CrossValidation,
    bootstrap_auc,
    grouped_cross_validation,
    grouped_data,
    learner,
    usable_configs,
)
from credrank.credibility.features import CredibilityFeaturizer
from credrank.credibility.labels import (
    LabelsFile,
    MatchReport,
    match_labels,
    read_labels,
    training_hash,
)
from credrank.credibility.model import DEFAULT_CONFIGS, Config, CredibilityExample, topics_of
from credrank.credibility.modelfile import DEFAULT_FLOOR, model_document
from credrank.index.errors import StoreError
from credrank.index.scoring import read_vectors
from credrank.index.store import VectorStore
from credrank.learn import cv as learn_cv
from credrank.learn.cv import HIGHEST_AUC, Progress, group_folds

#: the separator of a set's name and its group (``<set>:<group>``)
SET_SEP = ":"


@dataclass
class FitResult:
    """The model file's document, the ``--json`` report and the cross-validation."""

    document: dict[str, Any]
    report: dict[str, Any]
    cv: CrossValidation


def set_names(paths: Sequence[str]) -> list[str]:
    """One name per labels file: its file stem (characters other than letters, digits, ``.``,
    ``_`` and ``-`` become ``_``); a repeated stem gets ``-2``, ``-3``, … in file order."""
    out: list[str] = []
    for p in paths:
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(p).stem) or "set"
        name, k = stem, 1
        while name in out:
            k += 1
            name = f"{stem}-{k}"
        out.append(name)
    return out


def labels_digest(labels: LabelsFile) -> str:
    """SHA-256 of a labels file's rows, order-free: sorted ``(key column, key, credible,
    topic)`` — a copy of a file (or the file re-sorted) has the digest of the original."""
    rows = sorted((labels.by, r.key, r.credible, r.topic or "") for r in labels.rows)
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()


def check_distinct(files: Sequence[LabelsFile]) -> None:
    """``ValueError`` naming both files when a labels file is given twice: the same file
    (one resolved path) or the same rows (:func:`labels_digest`). A set given twice would
    count each of its groups twice — twice the folds, a bootstrap interval over groups too
    narrow — and hold no new judgement."""
    seen: dict[str, tuple[int, str]] = {}
    for i, f in enumerate(files, 1):
        for key, how in ((f"path:{Path(f.path).expanduser().resolve()}", "the same file"),
                         (f"rows:{labels_digest(f)}", "the same rows (a copy)")):
            if key in seen:
                j, first = seen[key]
                raise ValueError(f"labels: {f.path} (file {i}) is {how} as {first} (file "
                                 f"{j}); give each labelled set once (a set given twice counts "
                                 "each of its groups twice and narrows the bootstrap interval)")
            seen[key] = (i, f.path)


def merge_sets(named: Sequence[tuple[str, Sequence[CredibilityExample]]]
               ) -> list[CredibilityExample]:
    """The pages of several sets as one list: each group renamed ``<set>:<group>``; a page
    (doc id) in several sets keeps every set's judgements (first-seen order of pages)."""
    merged: dict[str, CredibilityExample] = {}
    for name, examples in named:
        for e in examples:
            labels = {f"{name}{SET_SEP}{g}": y for g, y in e.labels.items()}
            if e.doc_id in merged:
                old = merged[e.doc_id]
                labels = {**old.labels, **labels}
            merged[e.doc_id] = dataclasses.replace(e, labels=labels)
    return list(merged.values())


#: a credibility label written in a page's own text (the CAG data's "Low credibility of
#: text:", leaked into NewsPolluted's texts: SOURCES.md): what a model could learn instead of
#: the page; counted in the fit report (``self_labelled``) and warned of by the CLI
SELF_LABEL = re.compile(r"\b(?:High|Middle|Medium|Low) credibility of text:")


def _folder(store: VectorStore) -> str | None:
    """The folder of ``store`` (an index directory), ``None`` for a store without one."""
    path = getattr(store, "path", None)
    return None if path is None else str(path)


def _merged_matching(reports: Sequence[MatchReport]) -> dict[str, Any]:
    """The matching summaries of several files added up (examples: the first few)."""
    total = MatchReport()
    for r in reports:
        total.rows += r.rows
        total.used_rows += r.used_rows
        total.outvoted += r.outvoted
        total.outvoted_examples.extend(
            r.outvoted_examples[:max(0, 5 - len(total.outvoted_examples))])
        for reason, n in r.skipped.items():
            total.skipped[reason] += n
            kept = total.examples.setdefault(reason, [])
            kept.extend(r.examples.get(reason, [])[:max(0, 5 - len(kept))])
    return total.to_dict()


def fit_from_labels(labels_path: str | Path | LabelsFile | Sequence[str | Path | LabelsFile],
                    store: VectorStore, embedder: Embedder, *,
                    group_by: str = "topic", seed: int = 0,
                    configs: tuple[Config, ...] = DEFAULT_CONFIGS, n_boot: int = N_BOOT,
                    floor: float = DEFAULT_FLOOR, n_jobs: int = 1,
                    on_progress: Progress | None = None,
                    on_features: Progress | None = None,
                    cache_dir: str | Path | None = None,
                    leave_one_set_out: bool = False,
                    on_transfer: Progress | None = None,
                    embedding_source: str = "document") -> FitResult:
    """Labels → matched pages → features → nested grouped CV → final model (module
    docstring).

    ``labels_path`` is a labels file or one already read (:func:`read_labels`, so a command
    can refuse a bad file before it opens the index), or a sequence of them (several sets,
    each its own group namespace). ``n_jobs``: processes for the CV fits (the same numbers
    for any value); ``on_features(done, total)`` while pages are featurised,
    ``on_progress(done, total)`` after every fit of the cross-validation, ``on_transfer``
    after every configuration-choice fit of ``leave_one_set_out``. ``cache_dir``: the feature
    rows on disk (:class:`~credrank.credibility.features.FeatureCache`).

    ``embedding_source``: ``document`` (the index's stored vectors; the default) or ``head``
    (module docstring).

    ``ValueError`` for a bad labels file, a labels file given twice (:func:`check_distinct`),
    one class only after matching, fewer than 3 groups, or an embedder that is not the
    index's.
    """
    manifest = store.manifest
    if getattr(embedder, "name", manifest.embedder) != manifest.embedder:
        raise ValueError(f"embedder: the index uses {manifest.embedder!r}, got "
                         f"{getattr(embedder, 'name', None)!r}")
    items: list[str | Path | LabelsFile] = (
        [labels_path] if isinstance(labels_path, (str, Path, LabelsFile)) else list(labels_path))
    if not items:
        raise ValueError("labels: expected at least one labels file")
    files = [x if isinstance(x, LabelsFile) else read_labels(x) for x in items]
    check_distinct(files)
    names = set_names([f.path for f in files])
    per_file: list[tuple[str, list[CredibilityExample]]] = []
    reports: list[MatchReport] = []
    for name, labels in zip(names, files, strict=True):
        found, match = match_labels(labels, store, group_by)
        per_file.append((name, found))
        reports.append(match)
    where = files[0].path if len(files) == 1 else ", ".join(f.path for f in files)
    if len(files) == 1:
        examples = per_file[0][1]
        summary = reports[0].to_dict()
    else:
        examples = merge_sets(per_file)
        summary = _merged_matching(reports)
    if not examples:  # said as such: "one class only (none)" hid why
        reasons = ", ".join(f"{k} {v}" for k, v in summary["skipped"].items()) or "none"
        raise ValueError(f"{where}: none of the {summary['rows']} label rows matched a usable "
                         f"page of the index (skipped: {reasons}; e.g. "
                         f"{next(iter(summary['skipped_examples'].values()), ['-'])[0]})")
    classes = {y for e in examples for y in e.labels.values()}
    if len(classes) < 2:
        only = "none" if not classes else ("credible" if 1 in classes else "not credible")
        skipped = ", ".join(f"{k} {v}" for k, v in summary["skipped"].items()) or "none"
        raise ValueError(f"{where}: after matching {len(examples)} pages to the index, "
                         f"the labels hold one class only ({only}); a credibility model needs "
                         f"credible and non-credible pages (of {summary['rows']} label rows; "
                         f"skipped: {skipped})")
    groups = topics_of(examples)
    if len(groups) < 3:
        raise ValueError(f"{where}: grouped cross-validation needs at least 3 groups "
                         f"(by {group_by}); the matched pages form {len(groups)}: "
                         f"{', '.join(groups)}")
    featurizer = CredibilityFeaturizer(embedder, cache_dir=cache_dir,
                                       embedding_source=embedding_source)
    if embedding_source == "document":
        examples = with_stored_vectors(examples, store)
    featurizer.features([e.text for e in examples], [e.url for e in examples],
                        titles=[e.title for e in examples],
                        vectors=[e.vector for e in examples],
                        on_progress=on_features)  # every page once, up front
    cv = grouped_cross_validation(examples, featurizer, configs, seed=seed, n_boot=n_boot,
                                  n_jobs=n_jobs, on_progress=on_progress)
    metrics = cv.metrics()
    if len(files) > 1:
        metrics["per_set"] = per_set_auc(cv, names)
        if leave_one_set_out:
            metrics["leave_one_set_out"] = leave_one_set_out_auc(
                examples, featurizer, configs, names, seed=seed, n_boot=n_boot, n_jobs=n_jobs,
                on_progress=on_transfer)
    document = model_document(cv.model, embedder_name=manifest.embedder,
                              embedder_dim=int(getattr(embedder, "dim", manifest.dim)),
                              training_sha256=training_hash(examples),
                              n_pages=cv.n_train_pages, n_groups=cv.n_groups,
                              group_by=group_by, metrics=metrics,
                              provenance=cv.provenance(group_by), floor=floor,
                              labels=[f.path for f in files], index=_folder(store),
                              groups=topics_of(examples))
    report = {"credrank_credibility_fit": 1,
              "labels": where if len(files) == 1 else [f.path for f in files],
              "group_by": group_by, "seed": seed, "n_pages": cv.n_pages,
              "n_train_pages": cv.n_train_pages, "tied_pages": cv.dropped_ties,
              "n_groups": cv.n_groups, "unknown": summary["unknown"], "matching": summary,
              **metrics, "embedder": manifest.embedder,
              "embedding_source": embedding_source, "floor": floor,
              "training_sha256": document["training"]["sha256"],
              "self_labelled": sum(1 for e in examples if SELF_LABEL.search(e.text))}
    if len(files) > 1:
        report["sets"] = [{"name": n, "labels": f.path, "n_pages": len(found),
                           "n_groups": len(topics_of(found)), "matching": r.to_dict()}
                          for n, f, (_, found), r in zip(names, files, per_file, reports,
                                                         strict=True)]
    return FitResult(document, report, cv)


def with_stored_vectors(examples: Sequence[CredibilityExample], store: VectorStore
                        ) -> list[CredibilityExample]:
    """``examples`` with the vector ``store`` holds for each page (the ``document`` embedding
    source); a store that cannot return vectors leaves them ``None`` (the featuriser then
    embeds ``title\ntext`` as indexing did)."""
    try:
        found = read_vectors(store, [e.doc_id for e in examples])
    except StoreError:
        return list(examples)
    return [dataclasses.replace(e, vector=found.get(e.doc_id)) for e in examples]


def _set_of(group: str) -> str:
    return group.split(SET_SEP, 1)[0]


def per_set_auc(cv: CrossValidation, names: Sequence[str]) -> dict[str, Any]:
    """Per set: the pooled out-of-fold AUC on its (group, page) pairs (``None``: one class),
    with the number of pairs. Every score comes from the nested CV, so no set's pairs are
    scored by a model that saw their group (other groups of the same set did train it)."""
    sets = np.array([_set_of(g) for g in cv.oof.groups], dtype=object)
    out = {}
    for name in names:
        mask = sets == name
        out[name] = {"auc": roc_auc(cv.oof.y[mask], cv.oof.p[mask]) if mask.any() else None,
                     "n_pairs": int(mask.sum())}
    return out


def _untrainable(data: learn_cv.GroupedData, held: Sequence[str], name: str) -> str | None:
    """Why no model can be fitted leaving out the groups ``held`` (set ``name``'s), or
    ``None`` when the other sets leave pages of both classes to train on."""
    rows = data.train_rows(held)
    if not len(rows):
        return (f"every page of the other sets is judged in {name}: no page is left to train "
                f"a model that never saw {name}")
    if len(np.unique(data.y[rows])) < 2:
        return (f"the pages of the other sets not judged in {name} hold one class only: no "
                f"model can be fitted without {name}")
    return None


def leave_one_set_out_auc(examples: Sequence[CredibilityExample],
                          featurizer: CredibilityFeaturizer, configs: Sequence[Config],
                          names: Sequence[str], *, seed: int = 0, n_boot: int = N_BOOT,
                          n_jobs: int = 1, on_progress: Progress | None = None
                          ) -> dict[str, Any]:
    """Per set ``S``: a model fitted on the pages of the other sets only — its configuration
    chosen by leave-one-set-out CV among those sets (with one other set: grouped CV over its
    groups), never reading ``S`` — scores every pair
    of ``S``; its AUC with a bootstrap interval over ``S``'s groups, the configuration and
    the pairs. A page judged in ``S`` trains no model that scores ``S`` (it is left out with
    ``S``'s groups, :meth:`~credrank.learn.cv.GroupedData.train_rows`). Needs 2 sets.

    Declared policy for a set that cannot be estimated — every page of the other sets is
    judged in ``S`` too (``S`` covers them: a superset, a re-release), or what is left holds
    one class, or no inner fold of the configuration choice leaves pages to train on —: its
    entry has ``auc`` ``None`` and a ``reason``; the other sets are estimated as usual. An
    inner fold that leaves no page to train on is not used for the choice."""
    available = usable_configs(featurizer, configs)
    data = grouped_data(examples, featurizer)
    by_set: dict[str, tuple[str, ...]] = {
        n: tuple(sorted(g for g in data.groups if _set_of(g) == n)) for n in names}
    if sum(1 for g in by_set.values() if g) < 2:
        raise ValueError("leave-one-set-out: expected pages of at least 2 sets")
    outer = [by_set[n] for n in names if by_set[n]]
    out: dict[str, Any] = {}
    inner_of: dict[frozenset[str], list[tuple[str, ...]]] = {}
    estimable: list[tuple[str, ...]] = []
    for fold in outer:
        name = _set_of(fold[0])
        rest = [g for g in data.groups if g not in fold]
        others = [f for f in outer if set(f) <= set(rest)]
        inner = others if len(others) >= 2 else group_folds(rest, seed=seed)
        inner = [tuple(f) for f in inner if _untrainable(data, [*fold, *f], name) is None]
        reason = _untrainable(data, fold, name) or (
            None if inner else f"no fold of the other sets leaves pages of both classes to "
                               f"train on once {name} is left out: no configuration can be "
                               "chosen")
        if reason is not None:
            out[name] = {"auc": None, "auc_interval": None,
                         "n_pairs": int(np.isin(data.pair_group, fold).sum()), "config": None,
                         "inner_auc": None, "trained_on_pages": len(data.train_rows(fold)),
                         "reason": reason}
            continue
        inner_of[frozenset(rest)] = inner
        estimable.append(fold)
    choices = learn_cv.choose_per_fold(data, learner(featurizer), available, estimable,
                                       HIGHEST_AUC, inner=lambda r: inner_of[frozenset(r)],
                                       n_jobs=n_jobs, on_progress=on_progress)
    for fold, choice in zip(estimable, choices, strict=True):
        fitted = learn_cv.fit(data, learner(featurizer), choice.config, fold)
        items = data.items_in(fold)
        cols = featurizer.columns(choice.config.groups)
        p_items = fitted.estimator.predict_proba(np.asfortranarray(data.x[items][:, cols]))
        def fold_scores(_items: np.ndarray, p: np.ndarray = p_items) -> np.ndarray:
            return p

        oof = learn_cv.out_of_fold(data, [fold], [fold_scores])
        interval, _ = bootstrap_auc(oof.groups, oof.y, oof.p, n_boot=n_boot, seed=seed)
        out[_set_of(fold[0])] = {
            "auc": oof.auc(), "auc_interval": list(interval) if interval else None,
            "n_pairs": len(oof.y), "config": choice.config.to_dict(),
            "inner_auc": choice.value, "trained_on_pages": len(fitted.rows)}
    return {_set_of(f[0]): out[_set_of(f[0])] for f in outer}
