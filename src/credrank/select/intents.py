"""The declared intent set 𝒮 and each candidate's intents S_d ⊆ 𝒮 (chapter 35.8).

Two sources, and the result always says which one was used:

* ``labels``: one value per candidate — a string (one intent), an iterable of strings
  (several intents) or ``None`` (unlabelled: the candidate covers no intent; it is counted,
  never guessed). The intent set is the declared ``intent_set`` when given (every label must
  belong to it, ``S_d ⊆ 𝒮``), else the distinct labels present, sorted.
* ``clusters`` (when no labels exist): average-linkage agglomerative clustering of the
  candidate embeddings on cosine distance (``scipy.cluster.hierarchy``, deterministic, no
  seed), cut into at most ``n_clusters`` groups; each candidate covers its cluster. Geometric
  clusters are a stand-in for intents, not evidence of distinct stances (chapter 35.8).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.validation import as_matrix, check_int, check_nonzero_rows


@dataclass(frozen=True)
class Intents:
    """Intent set 𝒮 and membership ``M[d, s] = (s ∈ S_d)``.

    Attributes:
        names: the intent set 𝒮, in column order.
        membership: boolean ``(n_candidates, |𝒮|)`` matrix.
        source: ``"labels"`` or ``"clusters"``.
        n_unlabelled: candidates with no intent (``None`` label).
        outside_set: each label outside a declared 𝒮 and how many candidates carry it (they
            cover nothing of it: ``S_d ∩ 𝒮``).
    """

    names: tuple[str, ...]
    membership: np.ndarray
    source: str
    n_unlabelled: int = 0
    outside_set: dict[str, int] = field(default_factory=dict)

    def as_info(self) -> dict[str, Any]:
        """JSON-serialisable summary."""
        return {"source": self.source, "intents": list(self.names),
                "n_unlabelled": self.n_unlabelled, "outside_set": dict(self.outside_set)}


def _label_set(value: Any, row: int) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, float) and np.isnan(value):
        return set()
    if isinstance(value, str):
        return {value} if value else set()
    if isinstance(value, Iterable):
        out = set()
        for item in value:
            if not isinstance(item, str) or not item:
                raise ValueError(f"intent labels: row {row} holds {item!r} inside {value!r}; "
                                 "expected non-empty strings")
            out.add(item)
        return out
    raise ValueError(f"intent labels: row {row} is {value!r}; expected a string, a list of "
                     "strings or None")


def has_labels(labels: Sequence[Any] | np.ndarray | None) -> bool:
    """True when at least one candidate carries an intent label."""
    if labels is None:
        return False
    return any(_label_set(v, i) for i, v in enumerate(labels))


def intents_from_labels(labels: Sequence[Any] | np.ndarray,
                        intent_set: Sequence[str] | None = None) -> Intents:
    """Membership from per-candidate labels (chapter 35.8: ``S_d ⊆ 𝒮``, ``𝒮`` non-empty).

    ``intent_set`` declares 𝒮, the eligible intents: a label outside it covers nothing (the
    candidate's intents are ``S_d ∩ 𝒮``), counted per label in ``outside_set`` (the caller
    says it). Raises ``ValueError`` when the resulting intent set is empty.
    """
    sets = [_label_set(v, i) for i, v in enumerate(labels)]
    outside: dict[str, int] = {}
    if intent_set is None:
        names = tuple(sorted(set().union(*sets))) if sets else ()
    else:
        names = tuple(dict.fromkeys(str(s) for s in intent_set))
        declared = set(names)
        for row, s in enumerate(sets):
            for label in sorted(s - declared):
                outside[label] = outside.get(label, 0) + 1
            sets[row] = s & declared
    if not names:
        raise ValueError("intent labels: the intent set is empty (no candidate is labelled and "
                         "no intent_set was declared); coverage needs a non-empty intent set")
    col = {name: j for j, name in enumerate(names)}
    membership = np.zeros((len(sets), len(names)), dtype=bool)
    for row, s in enumerate(sets):
        for name in s:
            membership[row, col[name]] = True
    return Intents(names=names, membership=membership, source="labels",
                   n_unlabelled=sum(1 for s in sets if not s), outside_set=outside)


def intents_from_clusters(vectors: np.ndarray, n_clusters: int) -> Intents:
    """Intents as clusters of candidate embeddings (used when no labels exist; chapter 35.8).

    Average-linkage agglomerative clustering on cosine distance ``1 − cos``, cut with
    ``criterion="maxclust"`` into at most ``n_clusters`` clusters (fewer when embeddings
    coincide). Zero vectors raise ``ValueError`` (cosine undefined).
    """
    from scipy.cluster.hierarchy import fcluster, linkage
    x = as_matrix("vectors", vectors)
    n_clusters = check_int("n_clusters", n_clusters, 1)
    n = x.shape[0]
    if n == 0:
        raise ValueError("vectors: no candidates to cluster into intents")
    check_nonzero_rows("vectors", x, why="a zero vector cannot be clustered by cosine")
    if n == 1 or n_clusters == 1:
        labels = np.zeros(n, dtype=np.int64)
    else:
        unit = x / np.linalg.norm(x, axis=1)[:, None]
        z = linkage(unit, method="average", metric="cosine")
        labels = fcluster(z, t=min(n_clusters, n), criterion="maxclust") - 1
    # name clusters by first appearance so that names follow the candidate order
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(first)
    relabel = np.empty(len(order), dtype=np.int64)
    relabel[order] = np.arange(len(order))
    labels = relabel[np.searchsorted(np.unique(labels), labels)]
    k = int(labels.max()) + 1
    membership = labels[:, None] == np.arange(k)[None, :]
    return Intents(names=tuple(f"cluster-{i}" for i in range(k)), membership=membership,
                   source="clusters")
