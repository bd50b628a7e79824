"""The planted defence's pool graph without the ``N × N`` matrices (issue 37, N1).

Before, the stage held the pool's full cosine matrix and several ``N × N`` float arrays
derived from it (the GRADA weights, their row-normalised transition matrix, the paraphrase
mask, complete linkage's distances): at ``fetch_k`` 10,000 that was 0.8 GB each and 3–8 GB in
all, and PageRank's 100–200 dense mat-vecs grew as ``N²`` per step. Here the same quantities
are built **block by block** (:data:`BLOCK` rows of cosines at a time, never the whole matrix)
and only the edges that carry information are kept:

* the **paraphrase candidates** — pairs ``i < j`` with ``cos ≥ cluster_cosine`` (the word-copy
  test then runs on these pairs only, :func:`~credrank.defences.planted.copy_pairs`);
* the **GRADA graph** — the positive weights ``w_ij = max(0, s_ij − α(s_iq + s_jq))``,
  ``i ≠ j`` (:func:`~credrank.defences.planted_math.grada_weights`), as a sparse matrix, and
  PageRank by sparse power iteration (:func:`sparse_pagerank`, the same iteration as
  :func:`~credrank.defences.planted_math.pagerank`);
* **complete linkage** per paraphrase component (:func:`complete_groups`): two passages in
  different single-link components are never a paraphrase pair, so no complete-link group
  crosses components, and the cut is the same global one.

Same numbers as the dense path up to floating-point rounding (tests/test_planted.py checks
flags and clusters equal and the PageRank within 1e-12 on random pools). Cost: the
``N²·dim`` multiply-adds of the cosines remain (BLAS, ≈ 10 ms at N = 1,000, dim 384),
memory is ``O(N·BLOCK + edges)``; the GRADA graph has at most ``N(N−1)`` edges (dense on a
pool of near-copies far from the query — the service's price assumes it), and each block
calls :func:`~credrank.core.checkpoint.checkpoint`, so a cancelled request stops within one
block.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from credrank.core.checkpoint import checkpoint
from credrank.defences.planted_math import first_seen_labels

#: rows of cosines computed at a time (BLOCK × N float64: 2 MB at N = 1,000)
BLOCK = 256
#: the float32 screen of :func:`paraphrase_pairs` keeps pairs from ``cluster_cosine`` minus
#: this (above the float32 rounding bound of a 384-to-4,096-dimensional dot product)
SCREEN_MARGIN = 1e-3


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to norm 1 (a zero row stays zero: cosine 0 with every row, as
    :func:`~credrank.core.maths.cosine_matrix`)."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1)
    return v / np.where(norms > 0, norms, 1.0)[:, None]


def paraphrase_pairs(vectors: np.ndarray, cluster_cosine: float, *, block: int = BLOCK,
                     stage: str = "planted") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ii, jj, s)``: the pairs ``i < j`` with ``s_ij = cos(i, j) ≥ cluster_cosine``, in
    row-major order (as ``np.nonzero`` of the dense upper triangle), block by block.

    Screened in float32 (half the multiply-add time of float64) with a margin of
    :data:`SCREEN_MARGIN`, then each pair kept is recomputed in float64 and tested exactly:
    the float32 error of a dot product of unit vectors is at most ``dim · 2⁻²⁴ + 2⁻²³``
    (≈ 2.3e-5 at dim 384, Higham's ``γ_dim`` bound), below the margin, so no pair the float64
    test keeps is missed."""
    u = unit_rows(vectors)
    u32 = u.astype(np.float32)
    n = len(u)
    ii, jj, ss = [], [], []
    screen = cluster_cosine - SCREEN_MARGIN
    for start in range(0, n - 1, block):
        checkpoint(stage)
        stop = min(start + block, n)
        s = u32[start:stop] @ u32[start + 1:].T  # columns j > start
        bi, bj = np.nonzero(s >= screen)
        keep = bj + 1 > bi
        bi, bj = bi[keep], bj[keep]
        if len(bi) > 4 * block:  # many close pairs: the block's float64 cosines at once
            exact = np.clip(u[start:stop] @ u[start + 1:].T, -1.0, 1.0)[bi, bj]
        else:
            exact = np.clip(np.einsum("ij,ij->i", u[bi + start], u[bj + start + 1]),
                            -1.0, 1.0)
        sure = exact >= cluster_cosine
        ii.append((bi[sure] + start).astype(np.int64))
        jj.append((bj[sure] + start + 1).astype(np.int64))
        ss.append(exact[sure])
    if not ii:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(ii), np.concatenate(jj), np.concatenate(ss)


def grada_graph(vectors: np.ndarray, query_sims: np.ndarray, alpha: float, *,
                block: int = BLOCK, stage: str = "planted") -> sparse.csr_matrix:
    """GRADA's weights ``w_ij = max(0, s_ij − α(s_iq + s_jq))``, ``w_ii = 0``
    (:func:`~credrank.defences.planted_math.grada_weights`) as a sparse matrix of the
    positive ones, block by block (``O(N·block + edges)`` memory; the edges are all pairs
    when the pool's passages are closer to each other than to the query)."""
    u = unit_rows(vectors)
    q = np.asarray(query_sims, dtype=np.float64)
    n = len(u)
    parts = []
    for start in range(0, n, block):
        checkpoint(stage)
        stop = min(start + block, n)
        w = np.clip(u[start:stop] @ u.T, -1.0, 1.0) - alpha * (q[start:stop, None] + q[None, :])
        w[np.arange(stop - start), np.arange(start, stop)] = 0.0
        parts.append(sparse.csr_matrix(np.where(w > 0.0, w, 0.0)))
    if not parts:
        return sparse.csr_matrix((0, 0))
    return sparse.vstack(parts, format="csr")


def sparse_pagerank(weights: sparse.csr_matrix, *, damping: float = 0.85, tol: float = 1e-10,
                    max_iter: int = 200, stage: str = "planted") -> np.ndarray:
    """:func:`~credrank.defences.planted_math.pagerank` on a sparse non-negative matrix::

        r ← (1 − δ)/n + δ · (Pᵀ r + Σ_{dangling} r / n),   P_ij = w_ij / Σ_j w_ij

    same iteration, stopping rule and dangling policy; each step costs ``O(edges)``."""
    n = weights.shape[0]
    if n == 0:
        return np.zeros(0)
    out = np.asarray(weights.sum(axis=1)).reshape(-1)
    dangling = out <= 0
    scale = np.divide(1.0, out, out=np.zeros(n), where=~dangling)
    pt = (sparse.diags(scale) @ weights).T.tocsr()
    r = np.full(n, 1.0 / n)
    for step in range(max_iter):
        if step % 20 == 0:
            checkpoint(stage)
        nxt = (1.0 - damping) / n + damping * (pt @ r + r[dangling].sum() / n)
        if np.abs(nxt - r).sum() < tol:
            r = nxt
            break
        r = nxt
    return r / r.sum()


def components(n: int, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
    """Connected-component labels of the graph of edges ``(ii, jj)`` on ``n`` nodes, numbered
    in order of first member (as :func:`~credrank.defences.planted_math.paraphrase_components`)."""
    from scipy.sparse.csgraph import connected_components  # scipy's graph module: on use

    if n == 0:
        return np.zeros(0, dtype=np.int64)
    adj = sparse.coo_matrix((np.ones(len(ii), dtype=bool), (ii, jj)), shape=(n, n))
    _, labels = connected_components(adj, directed=False)
    return first_seen_labels(labels)


def complete_groups(n: int, ii: np.ndarray, jj: np.ndarray, s_pairs: np.ndarray
                    ) -> np.ndarray:
    """:func:`~credrank.defences.planted_math.complete_link_groups` from the paraphrase pairs
    ``(ii, jj)`` of ``n`` passages and their cosines ``s_pairs``, one single-link component
    at a time (module docstring): ``D_ij = 1 − s_ij`` on paraphrase pairs, 2 elsewhere,
    complete linkage cut at the largest paraphrase distance of the pool. Memory: the largest
    component's square."""
    # scipy's clustering modules, imported on use (complete linkage only), as planted_math does
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if n < 2 or len(ii) == 0:
        return np.arange(n, dtype=np.int64)
    single = components(n, ii, jj)
    d_pairs = np.clip(1.0 - np.asarray(s_pairs, dtype=np.float64), 0.0, 2.0)
    cut = float(d_pairs.max())
    raw = np.arange(n, dtype=np.int64)  # singletons keep their own label
    next_label = n
    pair_comp = single[ii]
    for comp in np.unique(pair_comp):
        checkpoint("planted")
        members = np.flatnonzero(single == comp)
        local = np.full(n, -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        mask = pair_comp == comp
        dist = np.full((len(members), len(members)), 2.0)
        a, b = local[ii[mask]], local[jj[mask]]
        dist[a, b] = dist[b, a] = d_pairs[mask]
        np.fill_diagonal(dist, 0.0)
        labels = fcluster(linkage(squareform(dist, checks=False), "complete"), cut,
                          "distance")
        raw[members] = labels + next_label
        next_label += int(labels.max()) + 1
    return first_seen_labels(raw)


def trustrag_flags_sparse(u: np.ndarray, labels: np.ndarray, threshold: float) -> np.ndarray:
    """:func:`~credrank.defences.planted.trustrag_flags` given the two-means ``labels``,
    with each cluster's mean pairwise cosine from sums of unit rows (no ``N × N`` matrix)::

        mean_{i≠j∈C} u_i·u_j = (‖Σ_{i∈C} u_i‖² − Σ_{i∈C} ‖u_i‖²) / (|C|(|C| − 1))"""
    tight = []
    for c in (0, 1):
        members = u[labels == c]
        m = len(members)
        if m < 2:
            tight.append(0.0)
            continue
        total = members.sum(axis=0)
        tight.append(float((total @ total - (members * members).sum()) / (m * (m - 1))))
    best = int(np.argmax(tight))
    out = np.zeros(len(labels))
    if tight[best] >= threshold:
        out[labels == best] = 1.0
    return out
