"""Near-duplicate passages: which candidates of one query are copies of each other.

Chapter 35.3 warns that copies inflate a consensus: ten pages that repeat one press release are
one voice, not ten. ``credrank.reliability`` detects such dependence between *sources*; this
module does the same between the *passages* of one candidate batch, so that
:class:`~credrank.consensus.stage.AnswerConsensus` counts each group of copies once.

Two passages are near-duplicates when either test fires (thresholds stated, defaults fixed a
priori, never tuned on an evaluation set):

* **text**: the Jaccard similarity of their word ``shingle``-gram sets (case-folded,
  whitespace-split; default 3-grams) is ``>= jaccard`` (default 0.5). This is the exact
  quantity MinHash estimates; with the ≤ a few hundred candidates of one query the exact
  value is cheaper than the sketches;
* **embedding** (optional): the cosine of their vectors is ``>= cosine`` (default ``None``:
  off).

Groups are the connected components of the "near-duplicate" graph (single link), numbered in
order of their first member, so the grouping is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from credrank.core.validation import check_int, check_probability

#: defaults of the text test
SHINGLE = 3
JACCARD = 0.5


def shingles(text: str, size: int = SHINGLE) -> frozenset[str]:
    """The word ``size``-grams of ``text`` (case-folded, split on whitespace); a text shorter
    than ``size`` words is one shingle; an empty text has none."""
    words = str(text).casefold().split()
    if not words:
        return frozenset()
    return frozenset(" ".join(words[i:i + size])
                     for i in range(max(len(words) - size + 1, 1)))


def jaccard_matrix(texts: Sequence[str], size: int = SHINGLE) -> np.ndarray:
    """``J[i, j] = |S_i ∩ S_j| / |S_i ∪ S_j|`` over the shingle sets; 0 where both are empty
    (declared: two empty passages are not copies of each other); ``J[i, i] = 1``.

    Columnar: a sparse passage × shingle incidence matrix ``X`` gives every intersection at
    once, ``X Xᵀ``, and ``|S_i ∪ S_j| = |S_i| + |S_j| − |S_i ∩ S_j|``."""
    from scipy import sparse
    sets = [shingles(t, size) for t in texts]
    n = len(sets)
    vocab: dict[str, int] = {}
    cols = [vocab.setdefault(g, len(vocab)) for s in sets for g in s]
    rows = np.repeat(np.arange(n), [len(s) for s in sets])
    x = sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(n, max(len(vocab), 1)))
    inter = (x @ x.T).toarray()
    sizes = np.array([len(s) for s in sets], dtype=np.float64)
    union = sizes[:, None] + sizes[None, :] - inter
    out = np.divide(inter, union, out=np.zeros((n, n)), where=union > 0)
    np.fill_diagonal(out, 1.0)
    return out


def duplicate_groups(texts: Sequence[str], vectors: np.ndarray | None = None, *,
                     jaccard: float = JACCARD, shingle: int = SHINGLE,
                     cosine: float | None = None) -> np.ndarray:
    """Group id per passage (``0, 1, …`` in order of first member): connected components of
    ``J >= jaccard`` or (with ``cosine`` and ``vectors``) ``cos >= cosine``.

    ``jaccard`` in ``[0, 1]``; ``jaccard = 1`` joins exact shingle-set copies only. A zero
    vector has cosine 0 with everything (no division by zero)."""
    from scipy import sparse
    from scipy.sparse import csgraph
    jaccard = check_probability("jaccard", jaccard)
    shingle = check_int("shingle", shingle, 1)
    n = len(texts)
    linked = jaccard_matrix(texts, shingle) >= jaccard
    if cosine is not None:
        cosine = float(check_probability("cosine", cosine))
        if vectors is None:
            raise ValueError("cosine: a threshold was given but no vectors; retrieve with "
                             "vectors or drop the embedding test")
        v = np.asarray(vectors, dtype=np.float64)
        if v.shape[0] != n:
            raise ValueError(f"vectors: expected {n} rows (one per passage), got {v.shape[0]}")
        norms = np.linalg.norm(v, axis=1)
        unit = v / np.where(norms > 0, norms, 1.0)[:, None]
        linked |= (unit @ unit.T) >= cosine
    # connected components of the link graph, numbered in order of their first member
    _, labels = csgraph.connected_components(sparse.csr_matrix(np.triu(linked, 1)),
                                             directed=False)
    return np.asarray(labels, dtype=np.int64)
