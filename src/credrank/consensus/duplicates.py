"""Near-duplicate passages: which candidates of one query are copies of each other.

Chapter 35.3 warns that copies inflate a consensus: ten pages that repeat one press release are
one voice, not ten. ``credrank.reliability`` detects such dependence between *sources*; this
module does the same between the *passages* of one candidate batch, so that
:class:`~credrank.stages.consensus.AnswerConsensus` counts each group of copies once.

Two passages are near-duplicates when either test fires (thresholds stated, defaults fixed a
priori, never tuned on an evaluation set):

* **text**: the Jaccard similarity ``J(i, j) = |S_i ∩ S_j| / |S_i ∪ S_j|`` of their word
  ``shingle``-gram sets (case-folded, whitespace-split; default 3-grams) is ``>= jaccard``
  (default 0.5). ``J`` is computed exactly (the quantity MinHash only estimates);
* **embedding** (optional): the cosine of their vectors is ``>= cosine`` (default ``None``:
  off).

Groups are the connected components of the "near-duplicate" graph (single link), numbered in
order of their first member, so the grouping is deterministic.

**How the pairs are found (exact, sub-quadratic in practice).** Shingles are numbered with
exact integer ids once (one dict lookup per word, then numpy; :func:`shingle_ids`). A pair
can reach ``J ≥ t`` only if it shares a shingle in both *prefixes* (prefix filtering;
Chaudhuri et al. 2006, Bayardo et al. 2007): order every set by ascending document frequency,
keep the first ``p_i = |S_i| − ⌈t·|S_i|⌉ + 2`` shingles (one more than the lemma needs, a
margin for floating-point rounding); since ``J ≥ t`` implies
``|S_i ∩ S_j| ≥ t·max(|S_i|, |S_j|)``, two sets that meet the threshold always share a
prefix shingle. The candidate pairs are the nonzeros of ``P Pᵀ`` (``P`` the sparse prefix
incidence); their intersections ``|S_i ∩ S_j| = (X Xᵀ)_ij`` are then counted exactly on
those pairs only, and ``J = |S_i ∩ S_j| / (|S_i| + |S_j| − |S_i ∩ S_j|)`` is compared with
``t``, the same float64 division as the dense matrix of :func:`jaccard_matrix`. Cost:
``O(W log W)`` for ``W`` words, plus ``Σ_g df_P(g)²`` candidate pairs over prefix shingles
(rare by construction), instead of the ``n²`` pairs of an all-pairs test (a flood of
near-copies is the worst case: every pair is a candidate; :func:`duplicate_groups` then skips
the pairs already joined). ``t = 0`` links every pair (``J ≥ 0`` always holds) without
looking at the text. The cosine test is all-pairs, ``O(n²·d)``, in row blocks of
:data:`COSINE_BLOCK` so that memory stays ``O(COSINE_BLOCK·n)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from credrank.core.validation import check_int, check_probability

#: defaults of the text test
SHINGLE = 3
JACCARD = 0.5
#: rows of the cosine matrix computed at once (memory ``COSINE_BLOCK × n`` floats)
COSINE_BLOCK = 2048
#: candidate pairs verified at once (memory ``O(VERIFY_CHUNK × shingles per passage)``)
VERIFY_CHUNK = 65_536
#: the first chunk of :func:`duplicate_groups` (chunks then double up to ``VERIFY_CHUNK``)
FIRST_CHUNK = 1_024


def shingles(text: str, size: int = SHINGLE) -> frozenset[str]:
    """The word ``size``-grams of ``text`` (case-folded, split on whitespace); a text shorter
    than ``size`` words is one shingle; an empty text has none."""
    words = str(text).casefold().split()
    if not words:
        return frozenset()
    return frozenset(" ".join(words[i:i + size])
                     for i in range(max(len(words) - size + 1, 1)))


def _unique_inverse(values: np.ndarray) -> tuple[np.ndarray, int]:
    """``(inverse, count)``: dense ids ``0 … count−1`` numbering the distinct values in
    ascending order (what ``np.unique(…, return_inverse=True)`` gives, by one sort)."""
    if len(values) == 0:
        return np.zeros(0, np.int64), 0
    order = np.argsort(values)
    ordered = values[order]
    new = np.empty(len(values), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    ranks = np.cumsum(new) - 1
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = ranks
    return inverse, int(ranks[-1]) + 1


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (one sort)."""
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ordered) \
        else ordered


def shingle_ids(texts: Sequence[str], size: int = SHINGLE) -> tuple[np.ndarray, np.ndarray,
                                                                      np.ndarray, int]:
    """Integer shingle sets: ``(rows, ids, sizes, n_ids)`` with one entry per distinct
    shingle of each text (``rows`` ascending), ``sizes[i] = |S_i|`` and ids in
    ``[0, n_ids)``.

    Equal ids ⇔ equal shingles of :func:`shingles`: words get ids ``≥ 1`` (one dict pass);
    a gram is the tuple of its word ids, a short text's single gram padded with 0 (which no
    word has), so a short gram never equals a full one; tuples are numbered by one sort.
    ``O(W·size·log W)`` for ``W`` words in all; the only Python-level work is the split and
    one dict lookup per word.
    """
    size = check_int("shingle", size, 1)
    n = len(texts)
    lists = [str(t).casefold().split() for t in texts]
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=n)
    words = list(itertools.chain.from_iterable(lists))
    word_id = dict(zip(dict.fromkeys(words), itertools.count(1)))  # first-seen order, ≥ 1
    flat = np.fromiter(map(word_id.__getitem__, words), dtype=np.int64, count=len(words))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if n else np.zeros(0, np.int64)
    n_grams = np.where(lengths > 0, np.maximum(lengths - size + 1, 1), 0)
    total = int(n_grams.sum())
    rows = np.repeat(np.arange(n, dtype=np.int64), n_grams)
    if total == 0:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(n, np.int64), 0)
    first = np.concatenate([[0], np.cumsum(n_grams)[:-1]])
    pos = np.arange(total, dtype=np.int64) - np.repeat(first, n_grams)
    base = len(word_id) + 1
    code: np.ndarray | None = None
    n_codes = 1
    for q in range(size):
        inside = pos + q < lengths[rows]
        token = np.where(inside, flat[np.minimum(starts[rows] + pos + q, len(flat) - 1)], 0)
        if code is None:
            code, n_codes = token, base
        elif n_codes * base < 2 ** 62:
            code, n_codes = code * base + token, n_codes * base
        else:  # renumber before the code would overflow int64
            code, n_codes = _unique_inverse(code)
            code, n_codes = code * base + token, n_codes * base
    assert code is not None  # size >= 1: the loop ran
    ids, n_ids = _unique_inverse(code)
    key = _distinct(rows * n_ids + ids)  # distinct shingles per text, rows ascending
    rows_u, ids_u = key // n_ids, key % n_ids
    return rows_u, ids_u, np.bincount(rows_u, minlength=n).astype(np.int64), n_ids


def jaccard_matrix(texts: Sequence[str], size: int = SHINGLE) -> np.ndarray:
    """``J[i, j] = |S_i ∩ S_j| / |S_i ∪ S_j|`` over the shingle sets; 0 where both are empty
    (declared: two empty passages are not copies of each other); ``J[i, i] = 1``.

    Dense ``n × n`` (for reports and tests; :func:`duplicate_groups` never builds it): a
    sparse passage × shingle incidence matrix ``X`` gives every intersection at once,
    ``X Xᵀ``, and ``|S_i ∪ S_j| = |S_i| + |S_j| − |S_i ∩ S_j|``."""
    from scipy import sparse
    n = len(texts)
    rows, ids, sizes, n_ids = shingle_ids(texts, size)
    x = sparse.csr_matrix((np.ones(len(ids)), (rows, ids)), shape=(n, max(n_ids, 1)))
    inter = (x @ x.T).toarray()
    union = sizes[:, None].astype(np.float64) + sizes[None, :] - inter
    out = np.divide(inter, union, out=np.zeros((n, n)), where=union > 0)
    np.fill_diagonal(out, 1.0)
    return out


def _candidates(texts: Sequence[str], t: float, size: int
                ) -> tuple[np.ndarray, np.ndarray, Any, np.ndarray]:
    """The prefix-filter candidate pairs ``i < j`` (sorted by ``(i, j)``, length filter
    applied), the ``passage × shingle`` incidence ``X`` (CSR, int32) and the set sizes."""
    from scipy import sparse
    n = len(texts)
    rows, ids, sizes, n_ids = shingle_ids(texts, size)
    shape = (n, max(n_ids, 1))
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    # (rows, ids) are sorted by row, so the CSR arrays are the entries themselves
    x = sparse.csr_matrix((np.ones(len(ids), np.int32), ids, indptr), shape=shape)
    none = np.zeros(0, np.int64)
    if n_ids == 0:
        return none, none, x, sizes
    df = np.bincount(ids, minlength=n_ids)
    rank_of = np.empty(n_ids, dtype=np.int64)  # the global order: rarest shingle first
    rank_of[np.lexsort((np.arange(n_ids), df))] = np.arange(n_ids)
    order = np.argsort(rows * n_ids + rank_of[ids])  # by row, then by that order
    rank = np.arange(len(order)) - indptr[rows[order]]
    prefix = np.minimum(sizes - np.ceil(t * sizes).astype(np.int64) + 2, sizes)
    keep = order[rank < prefix[rows[order]]]  # rows ascending
    p_indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=n))])
    p = sparse.csr_matrix((np.ones(len(keep), np.int32), ids[keep], p_indptr), shape=shape)
    cand = sparse.triu(p @ p.T, k=1).tocoo()
    ci, cj = cand.row.astype(np.int64), cand.col.astype(np.int64)
    # length filter: J ≥ t needs |S_min| ≥ t·|S_max| (with the same float margin as the prefix)
    small, large = np.minimum(sizes[ci], sizes[cj]), np.maximum(sizes[ci], sizes[cj])
    fits = small >= np.floor(t * large) - 1
    ci, cj = ci[fits], cj[fits]
    order = np.lexsort((cj, ci))
    return ci[order], cj[order], x, sizes


def _verify(ci: np.ndarray, cj: np.ndarray, x: Any, sizes: np.ndarray
            ) -> np.ndarray:
    """Exact ``J(i, j)`` of the pairs ``(ci, cj)``: ``|S_i ∩ S_j|`` counted on those rows of
    ``X`` only, then the same float64 division as :func:`jaccard_matrix`."""
    inter = np.asarray(x[ci].multiply(x[cj]).sum(axis=1), dtype=np.float64).reshape(-1)
    union = sizes[ci].astype(np.float64) + sizes[cj] - inter
    return np.divide(inter, union, out=np.zeros(len(ci)), where=union > 0)


def jaccard_pairs(texts: Sequence[str], jaccard: float = JACCARD,
                  size: int = SHINGLE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``i < j`` with ``J(i, j) >= jaccard`` (``jaccard > 0``) and its exact ``J``,
    found by prefix filtering then exact verification (module docstring); pairs sorted by
    ``(i, j)``. Equal to thresholding :func:`jaccard_matrix`, without its ``n²`` cells."""
    t = check_probability("jaccard", jaccard)
    if t <= 0.0:
        raise ValueError("jaccard: expected a positive threshold for pair listing (at 0 every "
                         "pair qualifies)")
    size = check_int("shingle", size, 1)
    ci, cj, x, sizes = _candidates(texts, t, size)
    out_i, out_j, out_v = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    for lo in range(0, len(ci), VERIFY_CHUNK):
        a, b = ci[lo:lo + VERIFY_CHUNK], cj[lo:lo + VERIFY_CHUNK]
        jac = _verify(a, b, x, sizes)
        hit = jac >= t
        out_i.append(a[hit])
        out_j.append(b[hit])
        out_v.append(jac[hit])
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_v)


def _cosine_pairs(v: np.ndarray, n: int, cosine: float) -> tuple[np.ndarray, np.ndarray]:
    norms = np.linalg.norm(v, axis=1)
    unit = v / np.where(norms > 0, norms, 1.0)[:, None]
    out_i, out_j = [], []
    for lo in range(0, n, COSINE_BLOCK):
        block = unit[lo:lo + COSINE_BLOCK] @ unit.T >= cosine
        i, j = np.nonzero(block)
        i = i + lo
        upper = j > i
        out_i.append(i[upper])
        out_j.append(j[upper])
    if not out_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_i), np.concatenate(out_j)


def duplicate_groups(texts: Sequence[str], vectors: np.ndarray | None = None, *,
                     jaccard: float = JACCARD, shingle: int = SHINGLE,
                     cosine: float | None = None) -> np.ndarray:
    """Group id per passage (``0, 1, …`` in order of first member): connected components of
    ``J >= jaccard`` or (with ``cosine`` and ``vectors``) ``cos >= cosine``.

    ``jaccard`` in ``[0, 1]``; ``jaccard = 1`` joins exact shingle-set copies only, ``0``
    joins everything. A zero vector has cosine 0 with everything (no division by zero). The
    text pairs are the prefix-filter candidates verified exactly (module docstring), so the
    grouping equals the all-pairs test's. They are verified in chunks (in ``(i, j)`` order,
    :data:`FIRST_CHUNK` pairs first, doubling up to :data:`VERIFY_CHUNK`); a candidate whose
    two passages are already in one group (by the cosine links or an earlier chunk) is
    skipped, which bounds the work of a flood of near-copies (``n²/2`` candidates, nearly all
    joined by the first chunk's star around passage 0).
    """
    jaccard = check_probability("jaccard", jaccard)
    shingle = check_int("shingle", shingle, 1)
    n = len(texts)
    if cosine is not None:
        cosine = float(check_probability("cosine", cosine))
        if vectors is None:
            raise ValueError("cosine: a threshold was given but no vectors; retrieve with "
                             "vectors or drop the embedding test")
        v = np.asarray(vectors, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] != n:
            raise ValueError(f"vectors: expected {n} rows (one per passage), got "
                             f"{v.shape[0] if v.ndim else 0}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if jaccard <= 0.0:  # J ≥ 0 holds for every pair: one group
        return np.zeros(n, dtype=np.int64)
    edges_i: list[np.ndarray] = []
    edges_j: list[np.ndarray] = []
    if cosine is not None:
        vi, vj = _cosine_pairs(v, n, cosine)
        edges_i.append(vi)
        edges_j.append(vj)
    labels = _components(n, edges_i, edges_j)
    ci, cj, x, sizes = _candidates(texts, jaccard, shingle)
    lo, chunk = 0, FIRST_CHUNK
    while lo < len(ci):
        a, b = ci[lo:lo + chunk], cj[lo:lo + chunk]
        lo, chunk = lo + chunk, min(2 * chunk, VERIFY_CHUNK)
        apart = labels[a] != labels[b]  # a pair already joined cannot change the groups
        a, b = a[apart], b[apart]
        hit = _verify(a, b, x, sizes) >= jaccard
        edges_i.append(a[hit])
        edges_j.append(b[hit])
        labels = _components(n, edges_i, edges_j)
    return labels


def _components(n: int, edges_i: list[np.ndarray], edges_j: list[np.ndarray]) -> np.ndarray:
    """Connected components of the link graph, numbered in order of their first member."""
    from scipy import sparse
    from scipy.sparse import csgraph
    pi = np.concatenate([np.zeros(0, np.int64), *edges_i])
    pj = np.concatenate([np.zeros(0, np.int64), *edges_j])
    graph = sparse.csr_matrix((np.ones(len(pi), dtype=np.int8), (pi, pj)), shape=(n, n))
    _, labels = csgraph.connected_components(graph, directed=False)
    return np.asarray(labels, dtype=np.int64)
