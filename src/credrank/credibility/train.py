"""Fit a credibility model from a labels file and an index (``credrank credibility fit``).

:func:`fit_from_labels` reads the labels (:mod:`credrank.credibility.labels`), matches them to
the index's documents, runs the nested grouped cross-validation
(:func:`~credrank.credibility.cv.grouped_cross_validation`: the pooled out-of-fold AUC with a
95% bootstrap interval over groups) and refits on every labelled page with the configuration
chosen by grouped CV on all of them; the result holds the model file's document
(:mod:`credrank.credibility.modelfile`) and the ``--json`` report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credrank.core.embedder import Embedder
from credrank.credibility.cv import N_BOOT, CrossValidation, grouped_cross_validation
from credrank.credibility.features import CredibilityFeaturizer
from credrank.credibility.labels import LabelsFile, match_labels, read_labels, training_hash
from credrank.credibility.model import DEFAULT_CONFIGS, Config, topics_of
from credrank.credibility.modelfile import DEFAULT_FLOOR, model_document
from credrank.index.store import VectorStore
from credrank.learn.cv import Progress


@dataclass
class FitResult:
    """The model file's document, the ``--json`` report and the cross-validation."""

    document: dict[str, Any]
    report: dict[str, Any]
    cv: CrossValidation


def fit_from_labels(labels_path: str | Path | LabelsFile, store: VectorStore,
                    embedder: Embedder, *,
                    group_by: str = "topic", seed: int = 0,
                    configs: tuple[Config, ...] = DEFAULT_CONFIGS, n_boot: int = N_BOOT,
                    floor: float = DEFAULT_FLOOR, n_jobs: int = 1,
                    on_progress: Progress | None = None) -> FitResult:
    """Labels → matched pages → nested grouped CV → final model (module docstring).

    ``labels_path`` is the labels file or one already read (:func:`read_labels`, so a command
    can refuse a bad file before it opens the index). ``n_jobs``: processes for the CV fits (the
    same numbers for any value); ``on_progress(done, total)`` after every fit.

    ``ValueError`` for a bad labels file, one class only after matching, fewer than 3 groups,
    or an embedder that is not the index's.
    """
    manifest = store.manifest
    if getattr(embedder, "name", manifest.embedder) != manifest.embedder:
        raise ValueError(f"embedder: the index uses {manifest.embedder!r}, got "
                         f"{getattr(embedder, 'name', None)!r}")
    labels = (labels_path if isinstance(labels_path, LabelsFile)
              else read_labels(labels_path))
    where = labels.path
    examples, match = match_labels(labels, store, group_by)
    summary = match.to_dict()
    classes = {y for e in examples for y in e.labels.values()}
    if len(classes) < 2:
        only = "none" if not classes else ("credible" if 1 in classes else "not credible")
        raise ValueError(f"{where}: after matching {len(examples)} pages to the index, "
                         f"the labels hold one class only ({only}); a credibility model needs "
                         f"credible and non-credible pages (rows: {summary})")
    groups = topics_of(examples)
    if len(groups) < 3:
        raise ValueError(f"{where}: grouped cross-validation needs at least 3 groups "
                         f"(by {group_by}); the matched pages form {len(groups)}: "
                         f"{', '.join(groups)}")
    featurizer = CredibilityFeaturizer(embedder)
    cv = grouped_cross_validation(examples, featurizer, configs, seed=seed, n_boot=n_boot,
                                  n_jobs=n_jobs, on_progress=on_progress)
    metrics = cv.metrics()
    document = model_document(cv.model, embedder_name=manifest.embedder,
                              embedder_dim=int(getattr(embedder, "dim", manifest.dim)),
                              training_sha256=training_hash(examples),
                              n_pages=cv.n_train_pages, n_groups=cv.n_groups,
                              group_by=group_by, metrics=metrics,
                              provenance=cv.provenance(group_by), floor=floor)
    report = {"credrank_credibility_fit": 1, "labels": where, "group_by": group_by,
              "seed": seed, "n_pages": cv.n_pages, "n_train_pages": cv.n_train_pages,
              "tied_pages": cv.dropped_ties, "n_groups": cv.n_groups,
              "unknown": match.unknown, "matching": summary, **metrics,
              "embedder": manifest.embedder, "floor": floor,
              "training_sha256": document["training"]["sha256"]}
    return FitResult(document, report, cv)
